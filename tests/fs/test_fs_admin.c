/* test_fs_admin.c — the l3fs filesystem (fixture.c): the `l3fs cache` command,
 * escaped log lines, read-only semantics, the exclude option, control files
 * and warm, SIGTERM and bad arguments. */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "l3.h"
#include "l3cache.h"
#include "l3fs.h"
#include "tc_file.h"
#include "tc_shell.h"
#include "tc_rand.h"
#include "fixture.h"

/* ------------------------------------------------- the cache command */

/* Runs `l3fs cache ARGS`; its output in out, its exit status returned. */
static int cache_cmd(char *out, size_t outsize, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cache_cmd(char *out, size_t outsize, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    xsnprintf(cmd, sizeof cmd, "'%s' cache %s 2>&1", l3fs_bin(), args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, outsize - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t json_u64(const char *json, const char *key)
{
    char pat[64];
    xsnprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    cr_assert_not_null(p, "no %s in %s", key, json);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* l3cache_get of source NAME under T.src (real codec): its size, or with
 * want_hit < 0 whether it was a hit. */
static uint64_t cache_get(l3cache *c, const char *name, int want_hit)
{
    char p[PATH_MAX];
    srcpath(p, sizeof p, name);
    int fd = open(p, O_RDONLY);
    cr_assert(fd >= 0);
    struct l3cache_source src;
    cr_assert_eq(l3cache_identify(fd, "", AT_EMPTY_PATH, NULL, &src), 0);
    struct l3cache_object o;
    cr_assert_eq(l3cache_get(c, fd, &src, 0, &o, NULL), 0);
    if (want_hit >= 0)
        cr_assert_eq(o.hit, want_hit, "%s: hit %d", name, o.hit);
    close(fd);
    close(o.fd);
    return want_hit < 0 ? (uint64_t)o.hit : o.size;
}

static int cache_get_any(l3cache *c, const char *name)
{
    return (int)cache_get(c, name, -1);
}

static l3cache *fill_cache(void)
{
    struct l3cache_options co = {.dir = T.cache, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c = NULL;
    cr_assert_eq(l3cache_open(&co, &c), 0);
    return c;
}

Test(cache_cmd, stats_verify_gc_clear, .init = setup, .fini = teardown)
{
    const char *names[] = {"a.png", "b.png", "c.png"};
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX];
        srcpath(p, sizeof p, names[i]);
        write_png(p, 40 + (uint32_t)i, 40, PNG_COLOR_TYPE_RGB, 8, 0, 0, (uint64_t)i + 1);
    }
    l3cache *c = fill_cache();
    uint64_t size = 0;
    for (int i = 0; i < 3; i++)
        size += cache_get(c, names[i], 0);
    cache_get(c, "a.png", 1);
    cache_get(c, "b.png", 1);
    l3cache_close(c);

    char out[8192];
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "lookups"), 5);
    cr_assert_eq(json_u64(out, "hits"), 2);
    cr_assert_eq(json_u64(out, "misses"), 3);
    cr_assert_eq(json_u64(out, "objects"), 3);
    cr_assert_eq(json_u64(out, "object_bytes"), size);
    cr_assert_eq(json_u64(out, "index_entries"), 3);
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s'", T.cache), 0, "%s", out);
    cr_assert_not_null(strstr(out, "hit rate         40.0%"), "%s", out);

    /* every object checks out; then one payload byte flipped: 1 bad, removed */
    cr_assert_eq(cache_cmd(out, sizeof out, "verify --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "checked"), 3, "%s", out);
    cr_assert_eq(json_u64(out, "bad"), 0, "%s", out);
    cr_assert_eq(tc_sh("f=$(find '%s/objects' -name '*.l3' | head -1) && "
                    "printf '\\377' | dd of=\"$f\" bs=1 seek=$(( $(stat -c %%s \"$f\") - 3 )) "
                    "conv=notrunc status=none",
                    T.cache),
                 0);
    cr_assert_eq(cache_cmd(out, sizeof out, "verify --cache-dir '%s' --json", T.cache), 1,
                 "%s", out);
    cr_assert_eq(json_u64(out, "checked"), 3, "%s", out);
    cr_assert_eq(json_u64(out, "bad"), 1, "%s", out);
    cr_assert_eq(tc_sh("test $(find '%s/objects' -name '*.l3' | wc -l) = 2", T.cache), 0);

    /* refill, then gc under a cap of one object, and clear */
    c = fill_cache();
    int hits = 0;
    for (int i = 0; i < 3; i++)
        hits += cache_get_any(c, names[i]);
    l3cache_close(c);
    cr_assert_eq(hits, 2, "the removed object is encoded again, the others are hits");
    cr_assert_eq(cache_cmd(out, sizeof out, "gc --cache-dir '%s' --cache-size %llu --json",
                           T.cache, (unsigned long long)(size / 3 + 100)),
                 0, "%s", out);
    cr_assert_geq(json_u64(out, "evictions"), 2, "%s", out);
    cr_assert_leq(json_u64(out, "object_bytes"), size / 3 + 100, "%s", out);
    cr_assert_eq(cache_cmd(out, sizeof out, "clear --cache-dir '%s'", T.cache), 0, "%s", out);
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "objects"), 0);
    cr_assert_eq(json_u64(out, "index_entries"), 0);

    cr_assert_eq(cache_cmd(out, sizeof out, "stats"), 2, "missing --cache-dir is a usage error");
    cr_assert_eq(cache_cmd(out, sizeof out, "frobnicate --cache-dir '%s'", T.cache), 2);
    cr_assert_eq(cache_cmd(out, sizeof out, "gc --cache-dir '%s' --cache-size 12Q", T.cache), 2);
}

/* A source named with a newline and terminal escapes, which fails to encode:
 * one log line, the name escaped in it (no forged line, no escape byte). */
Test(mount, hostile_name_gives_one_escaped_log_line)
{
    const char *evil = "evil\n12:00:00.000 l3fs error: FORGED LOG LINE\x1b[2J\x1b[31m.png";
    char p[PATH_MAX], m[PATH_MAX];
    srcpath(p, sizeof p, evil);
    spit(p, "\x89PNG\r\n\x1a\ngarbage after the signature", 33);
    mount_fs(NULL);
    mntpath(m, sizeof m, "evil\n12:00:00.000 l3fs error: FORGED LOG LINE\x1b[2J\x1b[31m.l3");
    struct stat st;
    errno = 0;
    cr_assert(stat(m, &st) < 0 && errno == EIO, "want EIO, got %s", strerror(errno));
    cr_assert_eq(unmount_fs(), 0);
    size_t len;
    char *log = tc_slurp(T.log, &len); /* NUL-terminated */
    cr_assert(log);
    cr_assert(memchr(log, 0x1b, len) == NULL, "an escape byte reached the log:\n%s", log);
    int lines = 0, forged = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "cannot encode")) {
            lines++;
            cr_assert(strstr(line, "evil\\n12:00:00.000 l3fs error: FORGED LOG LINE"
                                   "\\x1b[2J\\x1b[31m.png"),
                      "not escaped: %s", line);
        }
        if (!strncmp(line, "12:00:00.000", 12))
            forged++;
    }
    cr_assert_eq(lines, 1, "one log line for the bad file");
    cr_assert_eq(forged, 0, "a forged line in the log");
    free(log);
}

Test(mount, every_write_is_erofs)
{
    make_tree(0);
    mount_fs(NULL);
    char f[PATH_MAX], d[PATH_MAX], n[PATH_MAX], t[PATH_MAX];
    mntpath(f, sizeof f, "t0_c0_d1.l3");
    mntpath(d, sizeof d, "a");
    mntpath(n, sizeof n, "new-file");
    mntpath(t, sizeof t, "labels.txt");
#define EROFS_OK(expr)                                                                    \
    do {                                                                                  \
        errno = 0;                                                                        \
        cr_assert((expr) < 0 && errno == EROFS, #expr ": %s", strerror(errno));           \
    } while (0)
    EROFS_OK(open(f, O_WRONLY));
    EROFS_OK(open(f, O_RDWR));
    EROFS_OK(open(t, O_WRONLY | O_TRUNC));
    EROFS_OK(open(t, O_WRONLY | O_APPEND));
    EROFS_OK(open(n, O_WRONLY | O_CREAT, 0644));
    EROFS_OK(mkdir(n, 0755));
    EROFS_OK(rmdir(d));
    EROFS_OK(unlink(f));
    EROFS_OK(unlink(t));
    EROFS_OK(rename(t, n));
    EROFS_OK(link(t, n));
    EROFS_OK(symlink("x", n));
    EROFS_OK(mknod(n, S_IFIFO | 0644, 0));
    EROFS_OK(chmod(f, 0600));
    EROFS_OK(chown(t, 1, 1));
    EROFS_OK(truncate(t, 0));
    EROFS_OK(utimes(t, NULL));
    EROFS_OK(setxattr(t, "user.x", "1", 1, 0));
    EROFS_OK(removexattr(t, "user.x"));
    cr_assert_eq(check_all(), count_kind(E_L3), "nothing changed");
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, exclude_keeps_png)
{
    make_tree(0);
    mkdir_src("labels");
    png_src("labels/l1.png", 20, 20, PNG_COLOR_TYPE_PALETTE, 8, 0, 0);
    T.e[T.n - 1].kind = E_SAME;
    strcpy(T.e[T.n - 1].shown, "labels/l1.png");
    png_src("a/mask_x.png", 20, 20, PNG_COLOR_TYPE_GRAY, 8, 0, 0);
    T.e[T.n - 1].kind = E_SAME;
    strcpy(T.e[T.n - 1].shown, "a/mask_x.png");
    mount_fs("--exclude", "labels/*.png", "-o", "exclude=mask_*", NULL);
    check_all();
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "labels/l1.l3");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, control_files_and_warm)
{
    make_tree(0);
    int n = count_kind(E_L3);
    mount_fs(NULL);
    /* hidden from the root listing, but readable */
    cr_assert_neq(tc_sh("ls -a '%s' | grep -q '^.l3fs$'", T.mnt), 0, ".l3fs listed");
    char p[PATH_MAX];
    size_t len;
    mntpath(p, sizeof p, L3FS_CTL_DIR "/metrics");
    char *m = tc_slurp(p, &len);
    cr_assert(m && len > 0);
    m = realloc(m, len + 1);
    m[len] = '\0';
    char ids[2 * PATH_MAX + 32], mw[3 * PATH_MAX];
    snprintf(ids, sizeof ids, "mount=\"%s\",source=\"%s\"", T.mnt, T.src);
    snprintf(mw, sizeof mw, "# TYPE l3fs_encodes_total counter\nl3fs_encodes_total{%s} 0\n", ids);
    cr_assert(strstr(m, mw), "%s", m);
    snprintf(mw, sizeof mw, "l3fs_cache_hits_total{%s,scope=\"instance\"} 0\n", ids);
    cr_assert(strstr(m, mw), "%s", m);
    snprintf(mw, sizeof mw, "l3fs_encode_seconds{%s,quantile=\"0.99\"}", ids);
    cr_assert(strstr(m, mw), "%s", m);
    free(m);
    cr_assert_eq(tc_sh("ls '%s/" L3FS_CTL_DIR "' | tr '\\n' ' ' | grep -qx 'metrics stats.json '",
                    T.mnt),
                 0);
    /* warm encodes everything; a rerun finds it all cached */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/warm.out", T.dir);
    cr_assert_eq(tc_sh("'%s' warm '%s' -j 4 > '%s' 2>/dev/null", l3fs_bin(), T.mnt, out), 0);
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    char *o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    char want[128];
    xsnprintf(want, sizeof want, "warm: %d files", n + 1 /* dup.l3 */);
    cr_assert(strstr(o, want), "%s", o);
    free(o);
    cr_assert_eq(tc_sh("'%s' warm '%s' a -j 2 > '%s' 2>/dev/null", l3fs_bin(), T.mnt, out), 0);
    o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    cr_assert(strstr(o, " 0 encoded now"), "%s", o);
    free(o);
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("encode_time_ms.count"), n, "encode_time_ms.count = %g, want %g", stat_num("encode_time_ms.count"), (double)(n));
    cr_assert(stat_num("encode_time_ms.max") >= stat_num("encode_time_ms.p50"));
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, sigterm_unmounts_cleanly)
{
    make_tree(0);
    mount_fs(NULL);
    check_all();
    cr_assert_eq(kill(T.pid, SIGTERM), 0);
    int ws = 0;
    for (int i = 0; i < 1000 && waitpid(T.pid, &ws, WNOHANG) != T.pid; i++)
        usleep(10000);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "status %d", ws);
    T.pid = -1;
    cr_assert_eq(tc_sh("grep -q ' %s ' /proc/mounts", T.mnt), 1, "still mounted");
}

Test(mount, background_start_and_bad_arguments)
{
    if (!have_fuse())
        cr_skip_test("/dev/fuse or fusermount3 is missing: cannot mount");
    make_tree(0);
    /* a bad cache size fails before mounting, with status 1 */
    cr_assert_eq(tc_sh("'%s' '%s' '%s' --cache-dir '%s' --cache-size lots 2>/dev/null", l3fs_bin(),
                    T.src, T.mnt, T.cache),
                 1);
    cr_assert_eq(tc_sh("'%s' '%s' 2>/dev/null", l3fs_bin(), T.src), 2);
    cr_assert_eq(tc_sh("'%s' --version | grep -q '^l3fs '", l3fs_bin()), 0);
    /* background (no -f): returns once mounted, -o form of options */
    cr_assert_eq(tc_sh("'%s' '%s' '%s' -o cache_dir='%s',jobs=2,log_level=info", l3fs_bin(), T.src,
                    T.mnt, T.cache),
                 0);
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "t8_c2_d8_i.l3");
    cr_assert_eq(stat(p, &st), 0, "%s", strerror(errno));
    cr_assert_eq(tc_sh("fusermount3 -u '%s'", T.mnt), 0);
}
