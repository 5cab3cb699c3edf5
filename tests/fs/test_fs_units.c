/* test_fs_units.c — the l3fs filesystem (fixture.c): the namespace rules,
 * statistics, escaping and the command line, without a mount. */
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

/* ------------------------------------------------------- unit tests */

struct fake_dir {
    const char *names[16];
    const char *pngs[16]; /* names that qualify */
};

static int in_list(const char *const *l, const char *name)
{
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], name))
            return 1;
    return 0;
}
static int fake_exists(void *c, const char *n)
{
    return in_list(((struct fake_dir *)c)->names, n);
}
static int fake_qualifies(void *c, const char *n)
{
    return in_list(((struct fake_dir *)c)->pngs, n);
}

Test(names, shown_names_and_collisions)
{
    struct fake_dir d = {
        .names = {"a.png", "b.PNG", "c.png", "c.l3", "d.png", "d.PNG", "e.png", "f.png", "f.Png",
                  ".png", NULL},
        .pngs = {"a.png", "b.PNG", "c.png", "d.png", "d.PNG", "f.png", NULL},
    };
    struct l3fs_probe p = {fake_exists, fake_qualifies, &d};
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "a.png"), 1);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "b.PNG"), 1);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "c.png"), 0, "a real c.l3 wins");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "d.PNG"), 1, "bytewise first variant wins");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "d.png"), 0);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "e.png"), 0, "no PNG signature");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "f.png"), 1, "f.Png does not qualify");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, ".png"), 0, "empty stem");
    char src[256];
    cr_assert_eq(l3fs_resolve_l3(&p, "a.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "a.png");
    cr_assert_eq(l3fs_resolve_l3(&p, "b.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "b.PNG");
    cr_assert_eq(l3fs_resolve_l3(&p, "c.l3", src), L3FS_L3_REAL);
    cr_assert_eq(l3fs_resolve_l3(&p, "d.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "d.PNG");
    cr_assert_eq(l3fs_resolve_l3(&p, "e.l3", src), -ENOENT);
    cr_assert_eq(l3fs_resolve_l3(&p, "zz.l3", src), -ENOENT);
    cr_assert_eq(l3fs_resolve_l3(&p, ".l3", src), -ENOENT);
    char out[256];
    cr_assert_eq(l3fs_l3_name("x.y.PnG", out), 0);
    cr_assert_str_eq(out, "x.y.l3");
    char v[8][256];
    cr_assert_eq(l3fs_png_variants("s", 1, v), 0);
    for (int i = 1; i < 8; i++)
        cr_assert(strcmp(v[i - 1], v[i]) < 0, "variants sorted");
    cr_assert_str_eq(v[0], "s.PNG");
    cr_assert_str_eq(v[7], "s.png");
}

Test(names, exclude_globs)
{
    char *g[] = {(char *)"labels/*.png", (char *)"*_mask.png", (char *)"/top.png"};
    cr_assert_eq(l3fs_excluded(g, 3, "labels", "x.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "a/labels", "x.png"), 0, "anchored at SOURCE");
    cr_assert_eq(l3fs_excluded(g, 3, "a/b", "car_mask.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "", "top.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "a", "top.png"), 0);
    cr_assert_eq(l3fs_excluded(g, 3, "", "img.png"), 0);
}

Test(stats, percentiles_json_and_prometheus)
{
    struct l3fs_timings *t = calloc(1, sizeof *t);
    cr_assert_eq(l3fs_timings_percentile(t, 50), 0);
    for (uint64_t i = 1; i <= 100; i++)
        l3fs_timings_add(t, i * 1000);
    cr_assert_eq(l3fs_timings_percentile(t, 50), 50000);
    cr_assert_eq(l3fs_timings_percentile(t, 90), 90000);
    cr_assert_eq(l3fs_timings_percentile(t, 99), 99000);
    cr_assert_eq(l3fs_timings_percentile(t, 100), 100000);
    cr_assert_eq(t->max_ns, 100000);
    free(t);
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = "9";
    s.source = "/data/a \"q\"";
    s.cache_dir = "/c";
    s.fs.encodes = 7;
    s.fs.l3_open_hits = 3;
    s.fs.l3_open_misses = 1;
    s.have_cache = 1;
    s.cache_instance.hits = 5;
    s.cache_instance.misses = 15;
    s.cache_total.hits = 42;
    s.encode_count = 2;
    s.encode_p99_ns = 2500000;
    char *j = l3fs_render_json(&s);
    double v;
    cr_assert_eq(l3fs_json_number(j, "fs.encodes", &v), 0);
    cr_assert_eq(v, 7);
    cr_assert_eq(l3fs_json_number(j, "fs.hit_rate", &v), 0);
    cr_assert_float_eq(v, 0.75, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.instance.hit_rate", &v), 0);
    cr_assert_float_eq(v, 0.25, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.total.hits", &v), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(l3fs_json_number(j, "encode_time_ms.p99", &v), 0);
    cr_assert_float_eq(v, 2.5, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.nothing", &v), -ENOENT);
    char str[64];
    cr_assert_eq(l3fs_json_string(j, "source", str, sizeof str), 0);
    cr_assert_str_eq(str, "/data/a \"q\"");
    free(j);
    s.mountpoint = "/mnt/a\\b";
    char *m = l3fs_render_prometheus(&s);
    /* every sample names its mount and source, label values escaped */
    cr_assert(strstr(m, "l3fs_cache_hits_total{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\",scope=\"total\"} 42\n"), "%s", m);
    cr_assert(strstr(m, "l3fs_encode_seconds{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\",quantile=\"0.99\"} 0.002500\n"));
    cr_assert(strstr(m, "l3fs_encodes_total{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\"} 7\n"));
    /* byte counters all end in _bytes_total */
    cr_assert(strstr(m, "# TYPE l3fs_cache_served_bytes_total counter\n"));
    cr_assert(strstr(m, "# TYPE l3fs_cache_written_bytes_total counter\n"));
    cr_assert(strstr(m, "# TYPE l3fs_cache_evicted_bytes_total counter\n"));
    cr_assert(!strstr(m, "_bytes_served") && !strstr(m, "_bytes_written"));
    free(m);
    s.mountpoint = NULL;
    s.source = NULL;
    m = l3fs_render_prometheus(&s);
    cr_assert(strstr(m, "l3fs_encodes_total{} 7\n"));
    cr_assert(strstr(m, "l3fs_encode_seconds{quantile=\"0.5\"}"));
    free(m);
    cr_assert_eq(l3fs_hit_rate(0, 0), -1);
}

Test(names, escaped_for_logs_and_json)
{
    char out[256];
    l3fs_escape("a\nb\x1b[2Jc\\d\t\x7f", 0, out, sizeof out);
    cr_assert_str_eq(out, "a\\nb\\x1b[2Jc\\\\d\\t\\x7f");
    l3fs_escape("ünïcödé 画像 \"q\"", 0, out, sizeof out);
    cr_assert_str_eq(out, "ünïcödé 画像 \"q\"", "valid UTF-8 kept");
    l3fs_escape("bad\xff\xc0\x80\xed\xa0\x80.png", 0, out, sizeof out);
    cr_assert_str_eq(out, "bad\\xff\\xc0\\x80\\xed\\xa0\\x80.png", "not UTF-8: bytes");
    l3fs_escape("q\"\n\x1b\xff", 1, out, sizeof out);
    cr_assert_str_eq(out, "q\\\"\\n\\u001b\\\\xff");
    cr_assert_eq(l3fs_escape("\n\n", 0, out, 3), 4, "the length needed");
    cr_assert_str_eq(out, "\\n");
    /* JSON round trip through the reader */
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = "1";
    s.source = "/data/x\ny\x1bz";
    s.cache_dir = "/c";
    char *j = l3fs_render_json(&s);
    cr_assert(strchr(j, '\x1b') == NULL && !strstr(j, "x\ny"), "%s", j);
    char back[64];
    cr_assert_eq(l3fs_json_string(j, "source", back, sizeof back), 0);
    cr_assert_str_eq(back, "/data/x\ny\x1bz");
    free(j);
    /* and in the Prometheus labels: no raw control byte either */
    s.mountpoint = "/m";
    char *m = l3fs_render_prometheus(&s);
    cr_assert(strchr(m, '\x1b') == NULL, "%s", m);
    cr_assert(strstr(m, "source=\"/data/x\\ny\\\\x1bz\"") != NULL, "%s", m);
    free(m);
}

Test(options, both_spellings)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    char *argv[] = {"l3fs", tmp, tmp, "--cache-dir", "/c1", "--exclude", "a*",
                    "-o", "exclude=b*,allow_other,jobs=3,timeout=2.5,cache_size=1G",
                    "--dir-timeout=0.5", "-f", NULL};
    struct l3fs_options o;
    cr_assert_eq(l3fs_parse_args(11, argv, &o), 0);
    cr_assert_str_eq(o.cache_dir, "/c1");
    cr_assert_eq(o.n_excludes, 2);
    cr_assert_str_eq(o.excludes[0], "a*");
    cr_assert_str_eq(o.excludes[1], "b*");
    cr_assert_eq(o.jobs, 3);
    cr_assert_float_eq(o.timeout, 2.5, 1e-9);
    cr_assert_float_eq(o.dir_timeout, 0.5, 1e-9);
    cr_assert_str_eq(o.cache_size, "1G");
    /* allow_other brings default_permissions with it */
    cr_assert_str_eq(o.fuse_opts, "allow_other,default_permissions");
    cr_assert_eq(o.foreground, 1);
    l3fs_options_free(&o);
    char *both[] = {"l3fs", tmp, tmp, "-o", "default_permissions,allow_other", NULL};
    cr_assert_eq(l3fs_parse_args(5, both, &o), 0);
    cr_assert_str_eq(o.fuse_opts, "default_permissions,allow_other");
    l3fs_options_free(&o);
    char *lim[] = {"l3fs", tmp, tmp, "-o", "max_pixels=64M,max_memory=1G,nofail,x-systemd.x=1",
                   NULL};
    cr_assert_eq(l3fs_parse_args(5, lim, &o), 0);
    cr_assert_eq(o.max_pixels, 64ull << 20);
    cr_assert_eq(o.max_memory, 1ull << 30);
    cr_assert_null(o.fuse_opts, "fstab-only options are dropped");
    l3fs_options_free(&o);
    char *eff[] = {"l3fs", tmp, tmp, "--effort", "-1", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff, &o), 0);
    cr_assert_eq(o.effort, -1);
    l3fs_options_free(&o);
    char *eff2[] = {"l3fs", tmp, tmp, "-o", "effort=2", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff2, &o), 0);
    cr_assert_eq(o.effort, 2);
    l3fs_options_free(&o);
    char *eff_bad[] = {"l3fs", tmp, tmp, "--effort", "3", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff_bad, &o), -EINVAL);
    char *bad[] = {"l3fs", tmp, tmp, "--jobs", "zero", NULL};
    cr_assert_eq(l3fs_parse_args(5, bad, &o), -EINVAL);
    char *missing[] = {"l3fs", tmp, NULL};
    cr_assert_eq(l3fs_parse_args(2, missing, &o), -EINVAL);
    rmdir(tmp);
}

/* Runs l3fs_parse_args with stderr captured into err (one line expected). */
static int parse_err(int argc, char **argv, struct l3fs_options *o, char *err, size_t cap)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    cr_assert(f && saved >= 0);
    dup2(fileno(f), 2);
    int r = l3fs_parse_args(argc, argv, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = '\0';
    fclose(f);
    return r;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(options, o_typos_are_refused_in_one_line)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    struct l3fs_options o;
    char err[1024];
    char *typo[] = {"l3fs", tmp, tmp, "-o", "ro,cahce_dir=/x", NULL};
    cr_assert_eq(parse_err(5, typo, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "unknown mount option 'cahce_dir=/x'"), "%s", err);
    cr_assert(strstr(err, "did you mean 'cache_dir'?"), "%s", err);
    cr_assert_eq(lines(err), 1, "%s", err);
    char *typo2[] = {"l3fs", tmp, tmp, "-o", "allow_otehr", NULL};
    cr_assert_eq(parse_err(5, typo2, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "did you mean 'allow_other'?"), "%s", err);
    char *junk[] = {"l3fs", tmp, tmp, "-o", "frobnicate=3", NULL};
    cr_assert_eq(parse_err(5, junk, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "unknown mount option 'frobnicate=3'; "), "%s", err);
    cr_assert_eq(lines(err), 1, "%s", err);
    /* a flag given a value, a valued FUSE option without one: not known either */
    char *val[] = {"l3fs", tmp, tmp, "-o", "ro=1", NULL};
    cr_assert_eq(parse_err(5, val, &o, err, sizeof err), -EINVAL);
    char *noval[] = {"l3fs", tmp, tmp, "-o", "fsname", NULL};
    cr_assert_eq(parse_err(5, noval, &o, err, sizeof err), -EINVAL);
    /* every FUSE/kernel option fstab lines use still passes */
    char *good[] = {"l3fs", tmp, tmp, "-o",
                    "rw,noatime,nodev,nosuid,noexec,auto_unmount,fsname=data,subtype=x,"
                    "defaults,nofail,_netdev,x-systemd.automount,keep_names,log_file=/l",
                    NULL};
    cr_assert_eq(parse_err(5, good, &o, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(o.fuse_opts, "rw,noatime,nodev,nosuid,noexec,auto_unmount,fsname=data,"
                                  "subtype=x");
    cr_assert_eq(o.keep_names, 1);
    cr_assert_str_eq(o.log_file, "/l");
    l3fs_options_free(&o);
    char *flags[] = {"l3fs", tmp, tmp, "--keep-names", "--log-file", "rel.log", NULL};
    cr_assert_eq(l3fs_parse_args(6, flags, &o), 0);
    cr_assert_eq(o.keep_names, 1);
    cr_assert(o.log_file[0] == '/' && strstr(o.log_file, "/rel.log"), "%s", o.log_file);
    l3fs_options_free(&o);
    rmdir(tmp);
}

Test(options, refused_mountpoints)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    char src[PATH_MAX], inner[PATH_MAX], other[PATH_MAX], info[PATH_MAX];
    snprintf(src, sizeof src, "%s/src", tmp);
    snprintf(inner, sizeof inner, "%s/src/mnt", tmp);
    snprintf(other, sizeof other, "%s/m t", tmp);
    snprintf(info, sizeof info, "%s/mountinfo", tmp);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(mkdir(inner, 0755), 0);
    cr_assert_eq(mkdir(other, 0755), 0);
    struct l3fs_options o;
    char *in[] = {"l3fs", src, inner, NULL};
    cr_assert_eq(l3fs_parse_args(3, in, &o), 0);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), -ELOOP);
    l3fs_options_free(&o);
    char *same[] = {"l3fs", src, src, NULL};
    cr_assert_eq(l3fs_parse_args(3, same, &o), 0);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), -ELOOP);
    l3fs_options_free(&o);
    /* a FUSE mount at the mountpoint (octal-escaped space) refuses; another type does not */
    char *ok[] = {"l3fs", src, other, NULL};
    cr_assert_eq(l3fs_parse_args(3, ok, &o), 0);
    FILE *f = fopen(info, "w");
    fprintf(f, "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
               "90 22 0:50 / %s/m\\040t rw,relatime shared:5 - ext4 /dev/sda1 rw\n", tmp);
    fclose(f);
    cr_assert_eq(l3fs_check_mountpoint(&o, info), 0, "a bind/volume mount is fine");
    f = fopen(info, "a");
    fprintf(f, "91 90 0:51 / %s/m\\040t rw,nosuid,nodev,relatime shared:6 - fuse.l3fs /data "
               "rw,user_id=0,group_id=0\n", tmp);
    fclose(f);
    cr_assert_eq(l3fs_check_mountpoint(&o, info), -EBUSY);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), 0, "no table: no refusal");
    l3fs_options_free(&o);
    unlink(info);
    rmdir(other);
    rmdir(inner);
    rmdir(src);
    rmdir(tmp);
}
