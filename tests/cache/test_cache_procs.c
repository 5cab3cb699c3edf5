/* test_cache_procs.c — tests of libl3cache (cache/), suite "cache"
 * (fixture.c): several processes on one cache: kill -9 of writers, cumulative
 * statistics, claims on a key. */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <png.h>
#include <xxhash.h>

#include "helpers.h"
#include "fixture.h"

/* --------------------------------------------------- multi-process */

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* A helper program: from the environment (meson test) or next to this
 * executable. */
static const char *helper_exe(const char *env, const char *name)
{
    static char path[2][1024];
    const char *v = getenv(env);
    if (v && *v)
        return v;
    char self[900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    cr_assert_gt(n, 0);
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    char *buf = path[name[0] == 'l'];
    snprintf(buf, sizeof(path[0]), "%s/%s", self, name);
    return buf;
}

static pid_t spawn_hammer(const char *dir, double seconds, unsigned seed, uint64_t cap,
                          int threads, int nfiles, char files[][512])
{
    const char *exe = helper_exe("L3_CACHE_HAMMER", "cache_hammer");
    char a_sec[32], a_seed[32], a_cap[32], a_thr[16];
    snprintf(a_sec, sizeof(a_sec), "%.3f", seconds);
    snprintf(a_seed, sizeof(a_seed), "%u", seed);
    snprintf(a_cap, sizeof(a_cap), "%" PRIu64, cap);
    snprintf(a_thr, sizeof(a_thr), "%d", threads);
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)exe;
    argv[n++] = (char *)dir;
    argv[n++] = a_sec;
    argv[n++] = a_seed;
    argv[n++] = a_cap;
    argv[n++] = a_thr;
    for (int i = 0; i < nfiles && n < 62; i++)
        argv[n++] = files[i];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execv(exe, argv);
        _exit(127);
    }
    return pid;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(cache, two_processes_hammer_with_kill9, .timeout = TC_TIMEOUT(240))
{
    double seconds = atof(env_or("L3_CACHE_HAMMER_SECONDS", getenv("L3_STRESS") ? "30" : "10"));
    enum { N = 20 };
    char files[N][512];
    for (int i = 0; i < N; i++) {
        char name[32];
        /* 4 pairs of identical content among the sources */
        snprintf(name, sizeof(name), "h%02d.png", i);
        make_png(name, 48, 32, 500 + (unsigned)(i % 16), 1);
        src_path(files[i], sizeof(files[i]), name);
    }
    uint64_t cap = 60000; /* about a third of the objects: constant churn */
    pid_t steady = spawn_hammer(cachedir, seconds, 1, cap, 3, N, files);
    double end = mono() + seconds;
    unsigned seed = 2, kills = 0;
    while (mono() < end - 0.5) {
        pid_t victim = spawn_hammer(cachedir, 1000, seed, cap, 2, N, files);
        struct timespec ts = {0, (long)(20 + (seed * 37) % 280) * 1000000L};
        nanosleep(&ts, NULL);
        kill(victim, SIGKILL);
        int st;
        waitpid(victim, &st, 0);
        cr_assert(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
                  "victim failed with status %d", WEXITSTATUS(st));
        kills++;
        seed++;
    }
    int st;
    waitpid(steady, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "steady hammer saw wrong bytes or failed (%d)",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    cr_assert_gt(kills, 3);

    /* afterwards: everything verifies, no temp file survives an open,
     * every file reads back right */
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.no_background = 1;
    l3cache *c = open_fake(cachedir, 0, &in);
    uint64_t checked = 0, bad = 0;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(bad, 0, "%" PRIu64 " bad objects of %" PRIu64, bad, checked);
    cr_assert_eq(count_names(cachedir, ".tmp-", NULL), 0, "temp files left after reopen");
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "h%02d.png", i);
        get_ok(c, name, -1);
    }
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 0);
    cr_log_info("hammer: %.0f s, %u kill -9, %" PRIu64 " objects checked, total lookups %" PRIu64
                ", encodes %" PRIu64 ", evictions %" PRIu64,
                seconds, kills, checked, s.total.lookups, s.total.encodes, s.total.evictions);
    l3cache_close(c);
}

Test(cache, stats_are_cumulative_across_processes)
{
    enum { N = 6 };
    char files[N][512];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "s%02d.png", i);
        make_png(name, 20, 20, 600 + (unsigned)i, 1);
        src_path(files[i], sizeof(files[i]), name);
    }
    /* two processes at once, one pass each over the files with 2 threads */
    pid_t a = spawn_hammer(cachedir, 0, 11, 0, 2, N, files);
    pid_t b = spawn_hammer(cachedir, 0, 12, 0, 2, N, files);
    int sa, sb;
    waitpid(a, &sa, 0);
    waitpid(b, &sb, 0);
    cr_assert(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    cr_assert(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.lookups, 4 * N);
    cr_assert_eq(s.total.hits + s.total.misses, 4 * N);
    cr_assert_geq(s.total.encodes, N);
    cr_assert_leq(s.total.encodes, 2 * N, "duplicate work bounded by the process count");
    cr_assert_eq(s.objects, N);
    cr_assert_eq(s.index_entries, N);
    l3cache_close(c);
}

/* --------------------------------------------------------------- claims */

/* Two processes, same sources, same order, at the same moment: each key is
 * encoded once in all (the second waits on the first one's claim). */
Test(cache, claims_one_encode_across_processes, .timeout = TC_TIMEOUT(60))
{
    enum { N = 8 };
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "s%d.png", i);
        make_png(names[i], 24, 24, 300 + (unsigned)i, 1);
    }
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            struct l3cache_internal in;
            fake_internal(&in, &fc);
            atomic_store(&fc.delay_ms, 150);
            l3cache *kc = open_flags(0, &in);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                struct l3cache_object o;
                if (get_file(kc, names[i], &o, NULL) != 0) {
                    bad = 1;
                    continue;
                }
                uint8_t *want, *got;
                size_t wn;
                char p[512];
                src_path(p, sizeof p, names[i]);
                long n = read_fd(o.fd, &got);
                if (fake_expected(p, &want, &wn) != 0 || n != (long)wn || memcmp(want, got, wn))
                    bad = 1;
                close(o.fd);
            }
            l3cache_close(kc);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d: wrong bytes", k);
    }
    l3cache *c = open_flags(0, NULL);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.encodes, N, "%" PRIu64 " encodes for %d keys", s.total.encodes, N);
    cr_assert_geq(s.total.claim_waits, 1);
    cr_assert_eq(count_names(cachedir, "", ".claim"), 0, "no claim left");
    l3cache_close(c);
}

/* Writes a claim file for the key of source NAME as another owner would. */
static void plant_claim(l3cache *c, const char *name, const char *owner, time_t age_s)
{
    char p[512];
    src_path(p, sizeof p, name);
    uint8_t *png;
    size_t len;
    cr_assert_not_null(png = tc_slurp(p, &len), "%s", p);
    struct l3cache_key key;
    l3cache_key_compute(png, len, L3_FORMAT_VERSION, NULL, &key);
    free(png);
    (void)c;
    char hex[33], dir[600], claim[700];
    l3cache_key_hex(&key, hex);
    snprintf(dir, sizeof dir, "%s/objects", cachedir);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/objects/%.2s", cachedir, hex);
    mkdir(dir, 0700);
    snprintf(claim, sizeof claim, "%s/%s.claim", dir, hex + 2);
    FILE *f = fopen(claim, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", owner);
    fclose(f);
    struct timespec ts[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, claim, ts, 0), 0);
}

/* A claim whose owner went silent (another host: its mtime stops moving) is
 * taken over after claim_stale_ms; one of a dead process of this host at
 * once; a live one is waited for at most claim_wait_ms. */
Test(cache, stale_claims_taken_over_and_waits_bounded, .timeout = TC_TIMEOUT(60))
{
    make_png("a.png", 20, 20, 41, 1);
    make_png("b.png", 20, 20, 42, 1);
    make_png("c.png", 20, 20, 43, 1);
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.claim_stale_ms = 300;
    in.claim_wait_ms = 5000;
    l3cache *c = open_flags(0, &in);
    char host[64];
    l3cache_host_name(host, sizeof host);
    char owner[160];
    plant_claim(c, "a.png", "l3cache-claim 1 some-other-host 4242 00000000000000aa", 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "a.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_geq(ms, 250, "silent claim taken over after %.0f ms (stale after 300)", ms);
    cr_assert_lt(ms, 3000);
    cr_assert_eq(COUNTER(c, claim_takeovers), 1);
    /* a dead process of this host: no wait */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(owner, sizeof owner, "l3cache-claim 1 %s %ld 00000000000000bb", host, (long)dead);
    plant_claim(c, "b.png", owner, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "b.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_lt(ms, 250, "dead owner's claim taken at once (%.0f ms)", ms);
    cr_assert_eq(COUNTER(c, claim_takeovers), 2);
    l3cache_close(c);
    /* a live owner (this process, heartbeat simulated by a fresh mtime and
     * a never-stale limit): the wait ends at claim_wait_ms, then it encodes */
    in.claim_stale_ms = 60000;
    in.claim_wait_ms = 400;
    c = open_flags(0, &in);
    snprintf(owner, sizeof owner, "l3cache-claim 1 %s %ld 00000000000000cc", host, (long)getpid());
    plant_claim(c, "c.png", owner, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "c.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_geq(ms, 350, "waited %.0f ms of 400", ms);
    cr_assert_lt(ms, 3000);
    cr_assert_eq(COUNTER(c, claim_takeovers), 0);
    l3cache_close(c);
}
