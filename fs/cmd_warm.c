/* cmd_warm.c — `l3fs warm MOUNTPOINT [PATH] [-j N]`: opens every .l3 under
 * the mount (every .png too on a --keep-names mount) in N threads so that
 * each is encoded ahead of use. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "l3fs.h"

struct warm {
    int keep_names;     /* the mount shows encoded PNGs under their .png names */
    char **files;
    size_t n, cap;
    uint64_t *sizes;
    size_t next;        /* next file index (atomic) */
    size_t done;        /* finished (atomic) */
    size_t errors;      /* (atomic) */
    uint64_t bytes;     /* (atomic) */
    int tty;
    pthread_mutex_t out_lock;
    struct timespec t0;
};

static int add_file(struct warm *w, const char *path)
{
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 256;
        char **nf = realloc(w->files, nc * sizeof *nf);
        if (!nf)
            return -ENOMEM;
        w->files = nf;
        w->cap = nc;
    }
    if (!(w->files[w->n] = strdup(path)))
        return -ENOMEM;
    w->n++;
    return 0;
}

/* Depth-first walk relative to directory descriptors; symlinks are not followed. */
static int walk(struct warm *w, int dirfd, char *path, size_t plen, int top)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || (top && !strcmp(nm, L3FS_CTL_DIR)))
            continue;
        size_t nl = strlen(nm);
        if (plen + nl + 2 > PATH_MAX)
            continue;
        path[plen] = '/';
        memcpy(path + plen + 1, nm, nl + 1);
        if (de->d_type == DT_DIR) {
            int sub = openat(dirfd, nm, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                r = walk(w, sub, path, plen + 1 + nl, 0);
                close(sub);
            }
        } else if ((de->d_type == DT_REG || de->d_type == DT_UNKNOWN) &&
                   (l3fs_has_l3_ext(nm, NULL) || (w->keep_names && l3fs_has_png_ext(nm, NULL)))) {
            r = add_file(w, path);
        }
        path[plen] = '\0';
    }
    closedir(d);
    return r;
}

static double elapsed(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void progress(struct warm *w, size_t done)
{
    double s = elapsed(&w->t0);
    size_t errs = __atomic_load_n(&w->errors, __ATOMIC_RELAXED);
    if (w->tty) {
        int width = 30, fill = w->n ? (int)((double)done / (double)w->n * width) : width;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %zu/%zu files, %.1f files/s, %zu errors ", bar, done, w->n,
                s > 0 ? (double)done / s : 0.0, errs);
    } else {
        fprintf(stderr, "warm: %zu/%zu files, %.1f s, %zu errors\n", done, w->n, s, errs);
    }
}

static void *warm_worker(void *arg)
{
    struct warm *w = arg;
    char buf[65536];
    size_t step = w->n / 20 ? w->n / 20 : 1;
    for (;;) {
        size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (i >= w->n)
            break;
        /* the open (its lookup) encodes; reading the header proves it serves */
        int fd = open(w->files[i], O_RDONLY | O_CLOEXEC);
        int ok = fd >= 0;
        if (ok) {
            struct stat st;
            ssize_t n = pread(fd, buf, sizeof buf, 0);
            ok = n >= 0 && fstat(fd, &st) == 0;
            if (ok)
                __atomic_add_fetch(&w->bytes, (uint64_t)st.st_size, __ATOMIC_RELAXED);
            close(fd);
        }
        if (!ok) {
            __atomic_add_fetch(&w->errors, 1, __ATOMIC_RELAXED);
            pthread_mutex_lock(&w->out_lock);
            fprintf(stderr, "%swarm: %s: %s\n", w->tty ? "\r\033[K" : "", w->files[i],
                    strerror(errno));
            pthread_mutex_unlock(&w->out_lock);
        }
        size_t d = __atomic_add_fetch(&w->done, 1, __ATOMIC_RELAXED);
        if (w->tty || d % step == 0 || d == w->n) {
            pthread_mutex_lock(&w->out_lock);
            progress(w, d);
            pthread_mutex_unlock(&w->out_lock);
        }
    }
    return NULL;
}

static int stats_number(const char *mnt, const char *key, double *v)
{
    char *j = l3fs_read_stats_json(mnt);
    if (!j)
        return -errno;
    int r = l3fs_json_number(j, key, v);
    free(j);
    return r;
}

int l3fs_cmd_warm(int argc, char **argv)
{
    const char *mnt = NULL, *sub = NULL;
    unsigned jobs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
            if (i + 1 >= argc)
                goto usage;
            jobs = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (!strncmp(a, "-j", 2) && a[2]) {
            jobs = (unsigned)strtoul(a + 2, NULL, 10);
        } else if (!strncmp(a, "--jobs=", 7)) {
            jobs = (unsigned)strtoul(a + 7, NULL, 10);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            argc = 0;
            goto usage;
        } else if (a[0] == '-' && a[1]) {
            goto usage;
        } else if (!mnt) {
            mnt = a;
        } else if (!sub) {
            sub = a;
        } else {
            goto usage;
        }
    }
    if (!mnt)
        goto usage;
    if (jobs == 0 || jobs > 1024) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = jobs > 1024 ? 1024 : (unsigned)(n > 0 ? n : 1);
    }
    double before = 0;
    if (stats_number(mnt, "fs.encodes", &before) < 0) {
        fprintf(stderr, "l3fs warm: %s is not an l3fs mount (no " L3FS_CTL_DIR "/stats.json)\n",
                mnt);
        return 1;
    }
    char root[PATH_MAX];
    if (sub && sub[0] == '/')
        snprintf(root, sizeof root, "%s", sub);
    else if (sub)
        snprintf(root, sizeof root, "%s/%s", mnt, sub);
    else
        snprintf(root, sizeof root, "%s", mnt);
    struct warm w;
    memset(&w, 0, sizeof w);
    double keep = 0;
    w.keep_names = stats_number(mnt, "keep_names", &keep) == 0 && keep != 0;
    pthread_mutex_init(&w.out_lock, NULL);
    w.tty = isatty(2);
    clock_gettime(CLOCK_MONOTONIC, &w.t0);
    int rc = 0;
    struct stat st;
    if (lstat(root, &st) < 0) {
        fprintf(stderr, "l3fs warm: %s: %s\n", root, strerror(errno));
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", root);
        size_t pl = strlen(path);
        while (pl > 1 && path[pl - 1] == '/')
            path[--pl] = '\0';
        int r = dfd < 0 ? -errno : walk(&w, dfd, path, pl, !sub);
        if (dfd >= 0)
            close(dfd);
        if (r < 0) {
            fprintf(stderr, "l3fs warm: walking %s: %s\n", root, strerror(-r));
            rc = 1;
        }
    } else if (add_file(&w, root) < 0) {
        rc = 1;
    }
    if (rc == 0) {
        fprintf(stderr, "warm: %zu .l3 files under %s, %u jobs\n", w.n, root, jobs);
        if (jobs > w.n)
            jobs = w.n ? (unsigned)w.n : 1;
        pthread_t *t = calloc(jobs, sizeof *t);
        unsigned started = 0;
        for (unsigned i = 0; t && i < jobs; i++)
            if (pthread_create(&t[i], NULL, warm_worker, &w) == 0)
                started++;
        if (started == 0)
            warm_worker(&w);
        for (unsigned i = 0; i < started; i++)
            pthread_join(t[i], NULL);
        free(t);
        if (w.tty)
            fprintf(stderr, "\n");
        double after = before;
        stats_number(mnt, "fs.encodes", &after);
        double s = elapsed(&w.t0);
        char b[32];
        printf("warm: %zu files (%s of .l3) in %.1f s: %.0f encoded now, %.0f already cached, "
               "%zu errors\n",
               w.n, l3fs_human_bytes(w.bytes, b, sizeof b), s, after - before,
               (double)w.n - (double)w.errors - (after - before) > 0
                   ? (double)w.n - (double)w.errors - (after - before)
                   : 0.0,
               w.errors);
        if (w.errors)
            rc = 1;
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.files[i]);
    free(w.files);
    pthread_mutex_destroy(&w.out_lock);
    return rc;
usage:
    fprintf(stderr, "usage: l3fs warm MOUNTPOINT [PATH] [-j N]\n"
                    "Encodes every .l3 under MOUNTPOINT (or PATH inside it) ahead of use, N in\n"
                    "parallel (default: number of CPUs). Interrupt and rerun to resume.\n");
    return argc == 0 ? 0 : 2;
}
