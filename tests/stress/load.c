/* load.c — `stress_tool load`: reader threads over one or two mounts with
 * latency figures; `stress_tool lsdir`: readdir and stat timing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "l3.h"
#include "l3fs.h"
#include "stress.h"
/* ----------------------------------------------------------------- load */

struct lctx {
    struct ent **files;
    size_t nfiles;
    char *mnts[2];
    int nmnt;
    int pass;         /* each file once (shared counter) instead of random */
    int tolerate;     /* count errors, do not fail on them */
    double deadline;
    _Atomic size_t next;
    _Atomic uint64_t reads, bytes, mismatches, errors, enotconn;
    _Atomic int stop;
};

struct lthread {
    struct lctx *c;
    uint64_t *lat;
    size_t nlat, caplat;
    uint64_t seed;
    int id;
};

static void *load_worker(void *arg)
{
    struct lthread *t = arg;
    struct lctx *c = t->c;
    unsigned char *buf = NULL;
    size_t cap = 0;
    char path[8192];
    while (!atomic_load(&c->stop) && now_s() < c->deadline) {
        size_t i;
        if (c->pass) {
            i = atomic_fetch_add(&c->next, 1);
            if (i >= c->nfiles)
                break;
        } else {
            i = (size_t)(tc_splitmix64(&t->seed) % c->nfiles);
        }
        struct ent *e = c->files[i];
        const char *mnt = c->mnts[c->nmnt > 1 ? (int)(tc_splitmix64(&t->seed) % 2) : 0];
        st_fmt(path, sizeof path, "%s/%s", mnt, e->mnt);
        atomic_store(&op_path[t->id], e->mnt);
        uint64_t t0 = now_ns();
        atomic_store(&op_start[t->id], t0);
        size_t len = 0;
        off_t stsize;
        const char *step;
        int r = read_all(path, &buf, &cap, &len, &stsize, &step);
        uint64_t d = now_ns() - t0;
        atomic_store(&op_start[t->id], 0);
        if (r < 0) {
            uint64_t n = atomic_fetch_add(&c->errors, 1);
            if (r == -ENOTCONN || r == -ECONNABORTED)
                atomic_fetch_add(&c->enotconn, 1);
            if (n < 5 && !c->tolerate)
                fprintf(stderr, "FAIL load: %s: %s: %s\n", path, step, strerror(-r));
            if (c->tolerate && (r == -ENOTCONN || r == -ECONNABORTED))
                usleep(1000);
            continue;
        }
        XXH128_hash_t h = XXH3_128bits(buf, len);
        if (len != e->size || (uint64_t)stsize != len || !XXH128_isEqual(h, e->h)) {
            uint64_t n = atomic_fetch_add(&c->mismatches, 1);
            if (n < 5)
                fprintf(stderr, "FAIL load: %s: %zu bytes (st_size %lld), expected %" PRIu64
                                " bytes %s\n",
                        path, len, (long long)stsize, e->size,
                        len == e->size ? "with other content" : "");
            continue;
        }
        atomic_fetch_add(&c->reads, 1);
        atomic_fetch_add(&c->bytes, len);
        if (t->nlat == t->caplat) {
            t->caplat = t->caplat ? t->caplat * 2 : 4096;
            t->lat = realloc(t->lat, t->caplat * sizeof *t->lat);
        }
        t->lat[t->nlat++] = d;
    }
    free(buf);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int cmd_load(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: load MNT[,MNT2] ORACLE [--threads N] [--seconds S] [--pass] "
                        "[--tolerate-errors] [--label TEXT] [--timeout S]\n");
        return 2;
    }
    struct oracle o;
    if (oracle_load(&o, argv[2]) < 0)
        return 2;
    struct lctx c;
    memset(&c, 0, sizeof c);
    char *m = strdup(argv[1]);
    char *comma = strchr(m, ',');
    c.mnts[0] = m;
    c.nmnt = 1;
    if (comma) {
        *comma = 0;
        c.mnts[1] = comma + 1;
        c.nmnt = 2;
    }
    int threads = 64;
    double seconds = 10;
    const char *label = "load";
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pass"))
            c.pass = 1;
        else if (!strcmp(argv[i], "--tolerate-errors"))
            c.tolerate = 1;
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            hang_limit_s = atof(argv[++i]);
    }
    if (threads < 1 || threads > MAXW)
        threads = 64;
    c.files = malloc(o.n * sizeof *c.files);
    for (size_t i = 0; i < o.n; i++)
        if (o.e[i].kind == K_L3 && !o.e[i].err)
            c.files[c.nfiles++] = &o.e[i];
    if (!c.nfiles) {
        fprintf(stderr, "load: no encodable files in the oracle\n");
        return 2;
    }
    /* shuffle so a pass does not walk directories in order */
    uint64_t seed = 12345;
    for (size_t i = c.nfiles - 1; i > 0; i--) {
        size_t j = (size_t)(tc_splitmix64(&seed) % (i + 1));
        struct ent *t = c.files[i];
        c.files[i] = c.files[j];
        c.files[j] = t;
    }
    start_watchdog();
    struct lthread *ts = calloc((size_t)threads, sizeof *ts);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double t0 = now_s();
    c.deadline = t0 + seconds;
    for (int i = 0; i < threads; i++) {
        ts[i].c = &c;
        ts[i].seed = 1000 + (uint64_t)i;
        ts[i].id = i;
        pthread_create(&th[i], NULL, load_worker, &ts[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    size_t nl = 0;
    for (int i = 0; i < threads; i++)
        nl += ts[i].nlat;
    uint64_t *all = malloc((nl ? nl : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        if (ts[i].nlat)
            memcpy(all + k, ts[i].lat, ts[i].nlat * sizeof *all);
        k += ts[i].nlat;
        free(ts[i].lat);
    }
    qsort(all, nl, sizeof *all, cmp_u64);
#define PCT(p) (nl ? all[(size_t)((double)(nl - 1) * (p) / 100.0 + 0.5)] / 1e6 : 0.0)
    uint64_t reads = atomic_load(&c.reads), bytes = atomic_load(&c.bytes);
    uint64_t mism = atomic_load(&c.mismatches), errs = atomic_load(&c.errors);
    int fail = mism > 0 || (!c.tolerate && errs > 0);
    int unfinished = c.pass && atomic_load(&c.next) < c.nfiles && !c.tolerate;
    if (unfinished)
        fail = 1;
    printf("%s %s: %d threads, %zu files%s, %.2f s: %" PRIu64 " files read (%.0f files/s, "
           "%.1f MiB/s), latency per file p50 %.2f ms p90 %.2f ms p99 %.2f ms max %.2f ms; "
           "%" PRIu64 " wrong bytes, %" PRIu64 " errors (%" PRIu64 " ENOTCONN)%s\n",
           fail ? "FAIL" : "PASS", label, threads, c.nfiles,
           c.nmnt > 1 ? " on 2 mounts" : "", dt, reads, reads / dt, bytes / dt / 1048576.0,
           PCT(50), PCT(90), PCT(99), nl ? all[nl - 1] / 1e6 : 0.0, mism, errs,
           atomic_load(&c.enotconn),
           unfinished ? "; the pass did not finish in time" : "");
    free(all);
    free(ts);
    free(th);
    free(c.files);
    free(m);
    oracle_free(&o);
    return fail ? 1 : 0;
}

/* ---------------------------------------------------------------- lsdir */

int cmd_lsdir(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    double t0 = now_s();
    int dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        fprintf(stderr, "FAIL lsdir %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    size_t cap = 1024, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (n == cap)
            names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(de->d_name);
    }
    double t1 = now_s();
    size_t statted = 0;
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
            statted++;
        else if (!first_err) {
            first_err = errno;
            fprintf(stderr, "lsdir: lstat %s: %s\n", names[i], strerror(errno));
        }
        free(names[i]);
    }
    double t2 = now_s();
    closedir(d);
    free(names);
    printf("lsdir %s: %zu entries, readdir %.0f ms, lstat of every entry %.0f ms (%zu ok)\n",
           argv[1], n, (t1 - t0) * 1e3, (t2 - t1) * 1e3, statted);
    printf("entries=%zu statted=%zu\n", n, statted);
    return statted == n ? 0 : 1;
}
