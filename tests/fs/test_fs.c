/* test_fs.c — the l3fs filesystem, mounted for real (suite "mount",
 * fixture.c): pixels, sizes and the namespace; copy tools and Python;
 * statistics and the index across remounts; 32 readers, one encode per file;
 * corrupt PNGs and the pixel limit. The rooms, one executable:
 *   test_fs.c          the above
 *   test_fs_changes.c  changes to the source under a mount
 *   test_fs_admin.c    the cache command, logs, read-only, options, control files
 *   test_fs_units.c    namespace rules, statistics, command line: no mount */
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

/* ------------------------------------------------------------- tests */

Test(mount, pixels_sizes_and_namespace)
{
    make_tree(1);
    mount_fs(NULL);
    int n = check_all();
    cr_assert_eq(n, count_kind(E_L3));

    /* the directory listing is exactly the expected names */
    char cmd[PATH_MAX + 64];
    xsnprintf(cmd, sizeof cmd, "cd '%s' && find . -mindepth 1 | sort > ../found", T.mnt);
    cr_assert_eq(tc_sh("%s", cmd), 0);
    char want[PATH_MAX];
    xsnprintf(want, sizeof want, "%s/want", T.dir);
    FILE *f = fopen(want, "w");
    for (int i = 0; i < T.n; i++)
        fprintf(f, "./%s\n", T.e[i].shown);
    fclose(f);
    cr_assert_eq(tc_sh("cd '%s' && LC_ALL=C sort -o want want && LC_ALL=C sort -o found found && "
                    "diff want found >&2",
                    T.dir),
                 0, "mount listing differs from the expected names");

    /* a transcoded PNG's own name is hidden; .l3fs is hidden but reachable */
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "UPPER.PNG");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, "a/with space.png");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, "nonexistent.l3");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, L3FS_CTL_DIR);
    cr_assert(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    /* symlinks stay symlinks; the daemon never follows them */
    mntpath(p, sizeof p, "link.png");
    cr_assert(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
    /* `..` from the root is the kernel's business: it cannot reach SOURCE's parent */
    mntpath(p, sizeof p, "a/b/../../a/b/c/deep.l3");
    cr_assert(stat(p, &st) == 0);
    cr_assert_eq(unmount_fs(), 0, "daemon exit status");
}

Test(mount, copy_tools_and_python)
{
    make_tree(0);
    mount_fs(NULL);
    check_all();
    /* cp -r, tar, rsync all give byte-identical trees; find and du agree */
    cr_assert_eq(tc_sh("cd '%s' && cp -r mnt cp && diff -r --no-dereference mnt cp >&2", T.dir), 0);
    cr_assert_eq(tc_sh("cd '%s' && mkdir tar && tar cf - -C mnt . | tar xf - -C tar && "
                    "diff -r --no-dereference mnt tar >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && rsync -a mnt/ rs/ && diff -r --no-dereference mnt rs >&2 && "
                    "diff -r --no-dereference cp rs >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && for d in mnt rs; do (cd $d && find . \\( -type d -printf "
                    "'%%P d\\n' \\) -o -printf '%%P %%y %%s\\n' | sort) > find.$d; done && "
                    "diff find.mnt find.rs >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && for d in mnt rs; do (cd $d && find . -type f -print0 | "
                    "du -b --files0-from=- | sort -k2) > du.$d; done && diff du.mnt du.rs >&2 && "
                    "du -sh mnt > /dev/null",
                    T.dir),
                 0);
    /* Python: open().read() and mmap see the same bytes as read(2) */
    char script[PATH_MAX];
    xsnprintf(script, sizeof script, "%s/check.py", T.dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "import mmap, os, sys\n"
               "root = sys.argv[1]\n"
               "n = 0\n"
               "for d, dirs, files in os.walk(root):\n"
               "    for name in files:\n"
               "        p = os.path.join(d, name)\n"
               "        if not name.endswith('.l3') or os.path.islink(p): continue\n"
               "        data = open(p, 'rb').read()\n"
               "        assert len(data) == os.stat(p).st_size, p\n"
               "        fd = os.open(p, os.O_RDONLY)\n"
               "        raw = b''\n"
               "        while True:\n"
               "            b = os.read(fd, 1000)\n"
               "            if not b: break\n"
               "            raw += b\n"
               "        os.close(fd)\n"
               "        with open(p, 'rb') as fh:\n"
               "            m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)\n"
               "            assert m[:] == data == raw, p\n"
               "            m.close()\n"
               "        n += 1\n"
               "print(n)\n");
    fclose(f);
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/py.out", T.dir);
    cr_assert_eq(tc_sh("/usr/bin/python3 '%s' '%s' > '%s'", script, T.mnt, out), 0);
    size_t len;
    char *o = tc_slurp(out, &len);
    cr_assert(o);
    cr_assert_eq(atoi(o), count_kind(E_L3) + 1 /* dup.l3 */);
    free(o);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, stats_count_exactly_and_index_survives_remount)
{
    make_tree(0);
    int n = count_kind(E_L3);
    mount_fs(NULL);
    check_all(); /* first pass: every file encoded once */
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_misses"), n, "fs.l3_open_misses = %g, want %g", stat_num("fs.l3_open_misses"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_hits"), 0, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(0));
    cr_assert_eq(stat_num("cache.instance.misses"), n, "cache.instance.misses = %g, want %g", stat_num("cache.instance.misses"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.hits"), 0, "cache.instance.hits = %g, want %g", stat_num("cache.instance.hits"), (double)(0));
    check_all(); /* second pass: all hits */
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_misses"), n, "fs.l3_open_misses = %g, want %g", stat_num("fs.l3_open_misses"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_hits"), n, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.hits"), n, "cache.instance.hits = %g, want %g", stat_num("cache.instance.hits"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.misses"), n, "cache.instance.misses = %g, want %g", stat_num("cache.instance.misses"), (double)(n));
    cr_assert_eq(stat_num("fs.encode_errors"), 0, "fs.encode_errors = %g, want %g", stat_num("fs.encode_errors"), (double)(0));
    cr_assert_eq(unmount_fs(), 0);

    /* remount on the same cache: sizes come from the index, nothing encodes */
    mount_fs(NULL);
    cr_assert_eq(tc_sh("ls -lR '%s' > /dev/null", T.mnt), 0);
    cr_assert_eq(stat_num("fs.encodes"), 0, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(0));
    cr_assert(stat_num("fs.index_hits") >= n);
    check_all();
    cr_assert_eq(stat_num("fs.encodes"), 0, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(0));
    cr_assert_eq(stat_num("fs.l3_open_hits"), n, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(n));
    cr_assert_eq(stat_num("cache.total.misses"), n, "cache.total.misses = %g, want %g", stat_num("cache.total.misses"), (double)(n));
    /* the summary command */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/stats.out", T.dir);
    cr_assert_eq(tc_sh("'%s' stats '%s' > '%s'", l3fs_bin(), T.mnt, out), 0);
    size_t len;
    char *o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    cr_assert(strstr(o, "hit rate"), "l3fs stats output:\n%s", o);
    cr_assert(strstr(o, "100.0%"), "l3fs stats output:\n%s", o);
    free(o);
    cr_assert_eq(unmount_fs(), 0);
}

/* ---- 32 readers over overlapping files ---- */
struct reader {
    int id, nfiles, errors;
    char (*paths)[PATH_MAX];
    uint64_t *sums; /* per file: FNV-1a of the bytes, 0 = not read */
    pthread_barrier_t *start;
};

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h | 1;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    pthread_barrier_wait(r->start);
    for (int k = 0; k < r->nfiles; k++) {
        int i = (k * 7 + r->id) % r->nfiles; /* different order per thread */
        size_t len;
        unsigned char *d = tc_slurp(r->paths[i], &len);
        struct stat st;
        if (!d || stat(r->paths[i], &st) < 0 || (size_t)st.st_size != len) {
            r->errors++;
        } else {
            r->sums[i] = fnv(d, len);
        }
        free(d);
    }
    return NULL;
}

static void run_readers(char (*paths)[PATH_MAX], int nfiles, uint64_t *ref)
{
    enum { NT = 32 };
    pthread_t t[NT];
    struct reader r[NT];
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, NT);
    for (int i = 0; i < NT; i++) {
        r[i] = (struct reader){.id = i, .nfiles = nfiles, .paths = paths, .start = &b};
        r[i].sums = calloc((size_t)nfiles, sizeof(uint64_t));
        cr_assert_eq(pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) {
        cr_assert_eq(r[i].errors, 0, "thread %d had read errors", i);
        for (int k = 0; k < nfiles; k++) {
            if (!ref[k])
                ref[k] = r[i].sums[k];
            cr_assert_eq(r[i].sums[k], ref[k], "thread %d saw other bytes in %s", i, paths[k]);
        }
        free(r[i].sums);
    }
    pthread_barrier_destroy(&b);
}

Test(mount, thirty_two_readers_one_encode_per_file)
{
    mkdir_src("c");
    enum { NF = 12 };
    for (int i = 0; i < NF; i++) {
        char rel[64];
        xsnprintf(rel, sizeof rel, "c/img%02d.png", i);
        png_src(rel, 300 + (uint32_t)i * 10, 200, i % 2 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA,
                8, 0, 0);
    }
    mount_fs("--jobs", "4", NULL);
    char(*paths)[PATH_MAX] = calloc(NF, PATH_MAX);
    for (int i = 0; i < NF; i++)
        mntpath(paths[i], PATH_MAX, T.e[i + 1].shown);
    uint64_t ref[NF] = {0};
    run_readers(paths, NF, ref); /* cold */
    cr_assert_eq(stat_num("fs.encodes"), NF, "exactly one encode per file");
    cr_assert_eq(stat_num("cache.instance.encodes"), NF, "cache.instance.encodes = %g, want %g", stat_num("cache.instance.encodes"), (double)(NF));
    run_readers(paths, NF, ref); /* warm */
    cr_assert_eq(stat_num("fs.encodes"), NF, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(NF));
    cr_assert_eq(check_all(), NF); /* and the bytes decode to the source pixels */
    free(paths);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, corrupt_png_gives_eio_others_served)
{
    make_tree(1);
    mount_fs(NULL);
    char p[PATH_MAX];
    mntpath(p, sizeof p, "corrupt.l3");
    for (int i = 0; i < 3; i++) {
        struct stat st;
        errno = 0;
        cr_assert(stat(p, &st) < 0 && errno == EIO, "stat: %s", strerror(errno));
        errno = 0;
        int fd = open(p, O_RDONLY);
        cr_assert(fd < 0 && errno == EIO, "open: %s", strerror(errno));
    }
    /* the name is listed; every other file is still served */
    cr_assert_eq(tc_sh("ls '%s' | grep -qx corrupt.l3", T.mnt), 0);
    check_all();
    cr_assert_eq(stat_num("fs.encode_errors"), 1, "fs.encode_errors = %g, want %g", stat_num("fs.encode_errors"), (double)(1));
    /* logged once, with the path */
    cr_assert_eq(unmount_fs(), 0, "daemon stayed alive and exited cleanly");
    cr_assert_eq(tc_sh("test \"$(grep -c 'corrupt.png' '%s')\" = 1", T.log), 0,
                 "one log line naming corrupt.png");
}

Test(mount, pixel_limit_gives_eio_and_cache_cli)
{
    make_tree(0);
    mount_fs("--max-pixels", "2000", NULL);
    char small[PATH_MAX], big[PATH_MAX];
    mntpath(small, sizeof small, "t0_c0_d1.l3");     /* 37x19 */
    mntpath(big, sizeof big, "t15_c3_d8.l3");        /* 112x64 */
    struct stat st;
    cr_assert_eq(stat(small, &st), 0, "%s", strerror(errno));
    errno = 0;
    cr_assert(stat(big, &st) < 0 && errno == EIO, "over the limit: %s", strerror(errno));
    cr_assert_eq(stat_num("fs.encode_errors"), 1);
    cr_assert_eq(unmount_fs(), 0);
    /* the cache maintenance commands are reachable through l3fs */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/cache.out", T.dir);
    cr_assert_eq(tc_sh("'%s' cache stats --cache-dir '%s' > '%s'", l3fs_bin(), T.cache, out), 0);
    cr_assert_eq(tc_sh("grep -q objects '%s'", out), 0);
    cr_assert_eq(tc_sh("'%s' cache verify --cache-dir '%s' > /dev/null", l3fs_bin(), T.cache), 0);
}
