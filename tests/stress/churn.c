/* churn.c — `stress_tool churn SRC MNT [opts]`: readers through the mount
 * while a writer changes the sources under them (docs/RELIABILITY.md).
 *
 * SRC gets --files N same-size PNGs imgNNN.png (stored deflate: every
 * version of a file has the same byte size), whose pixels carry their own
 * identity: the first samples hold the file's id and a version number, the
 * rest follows from (id, version). One writer thread keeps
 *   - rewriting a file in place (same inode, same size) and restoring its
 *     mtime (as `touch -r` does),
 *   - renaming a new version over one,
 *   - deleting one and creating it again (the inode number may be reused),
 *   - creating new files (ids N, N+1, ...) and deleting them again;
 * --readers threads read random names through the mount and check every
 * read: the size fstat() gives is the size read, the bytes decode with
 * their payload checksum, the pixels are exactly those of (id, version) —
 * else a torn read — and the id is the name's own — else another file's
 * content. EIO is allowed only within --bound-ms of a change of that name
 * (or while one is under way); ENOENT for a name that is or just was absent.
 * Exit 1 on any other file's content, torn read or EIO away from a change.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <png.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "l3.h"
#include "stress.h"

#define MAX_NAMES 256
#define W 64
#define H 40

struct name_state {
    _Atomic uint64_t change_start, change_end; /* ns, monotonic: last change */
    _Atomic int present;
};

static struct {
    const char *src, *mnt;
    int files, readers;
    double seconds;
    uint64_t bound_ns;
    _Atomic int stop;
    _Atomic int names;                /* names in use: 0 .. names-1 */
    struct name_state st[MAX_NAMES];
    _Atomic uint64_t version;
    _Atomic uint64_t reads, ok, enoent, eio_near, eio_far, torn, other, writes;
    _Atomic uint64_t eio_max_ns;      /* the farthest EIO from its change */
} C;

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The pixels of (id, version): RGB, W x H. */
static void pixels_of(uint32_t id, uint32_t version, uint8_t *px)
{
    uint64_t s = ((uint64_t)id << 32 | version) * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < (size_t)W * H * 3; i++)
        px[i] = (uint8_t)tc_splitmix64(&s);
    px[0] = (uint8_t)(id >> 8);
    px[1] = (uint8_t)id;
    for (int k = 0; k < 4; k++)
        px[2 + k] = (uint8_t)(version >> (24 - 8 * k));
}

static int png_of(uint32_t id, uint32_t version, unsigned char **png, size_t *len)
{
    static const struct st_img im = {.w = W, .h = H, .ctype = PNG_COLOR_TYPE_RGB, .depth = 8,
                                     .channels = 3};
    uint8_t px[W * H * 3];
    pixels_of(id, version, px);
    return st_png_encode(&im, px, png, len);
}

static void path_of(char *buf, size_t cap, const char *dir, int i, const char *ext)
{
    st_fmt(buf, cap, "%s/img%03d.%s", dir, i, ext);
}

/* ----------------------------------------------------------- the writer */

static void begin_change(int i)
{
    atomic_store(&C.st[i].change_start, mono_ns());
}

static void end_change(int i, int present)
{
    atomic_store(&C.st[i].present, present);
    atomic_store(&C.st[i].change_end, mono_ns());
}

static int write_version(const char *path, int i, int flags)
{
    unsigned char *png;
    size_t len;
    if (png_of((uint32_t)i, (uint32_t)atomic_fetch_add(&C.version, 1), &png, &len) != 0)
        return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
    int r = fd >= 0 && pwrite(fd, png, len, 0) == (ssize_t)len ? 0 : -1;
    if (fd >= 0)
        close(fd);
    free(png);
    return r;
}

static void op_in_place(int i)
{
    char p[4096];
    path_of(p, sizeof p, C.src, i, "png");
    struct stat before;
    if (stat(p, &before) != 0)
        return;
    begin_change(i);
    write_version(p, i, 0);
    struct timespec ts[2] = {before.st_atim, before.st_mtim}; /* touch -r */
    utimensat(AT_FDCWD, p, ts, 0);
    end_change(i, 1);
}

static void op_rename_over(int i)
{
    char p[4096], tmp[4096];
    path_of(p, sizeof p, C.src, i, "png");
    st_fmt(tmp, sizeof tmp, "%s/.churn-tmp", C.src);
    if (write_version(tmp, i, O_CREAT | O_TRUNC) != 0)
        return;
    begin_change(i);
    rename(tmp, p);
    end_change(i, 1);
}

static void op_recreate(int i)
{
    char p[4096];
    path_of(p, sizeof p, C.src, i, "png");
    begin_change(i);
    unlink(p);
    end_change(i, 0);
    struct timespec gap = {0, 2000000};
    nanosleep(&gap, NULL);
    begin_change(i);
    write_version(p, i, O_CREAT | O_EXCL);
    end_change(i, 1);
}

static void *writer(void *arg)
{
    (void)arg;
    uint64_t s = 12345;
    while (!atomic_load(&C.stop)) {
        int n = atomic_load(&C.names);
        int op = (int)(tc_splitmix64(&s) % 8);
        int i = (int)(tc_splitmix64(&s) % (uint64_t)C.files);
        if (op < 3) {
            op_in_place(i);
        } else if (op < 5) {
            op_rename_over(i);
        } else if (op < 7) {
            op_recreate(i);
        } else if (n < MAX_NAMES && n < 2 * C.files) { /* a new file */
            char p[4096];
            path_of(p, sizeof p, C.src, n, "png");
            begin_change(n);
            write_version(p, n, O_CREAT | O_TRUNC);
            end_change(n, 1);
            atomic_store(&C.names, n + 1);
        } else { /* the new files go again: inode numbers come free */
            for (int k = C.files; k < n; k++) {
                char p[4096];
                path_of(p, sizeof p, C.src, k, "png");
                begin_change(k);
                unlink(p);
                end_change(k, 0);
            }
            atomic_store(&C.names, C.files);
        }
        atomic_fetch_add(&C.writes, 1);
        struct timespec pace = {0, 3000000};
        nanosleep(&pace, NULL);
    }
    return NULL;
}

/* ---------------------------------------------------------- the readers */

/* Within the bound of a change of name i (or one under way) at time t. */
static int near_change(int i, uint64_t t0, uint64_t t1, uint64_t *dist_ret)
{
    uint64_t cs = atomic_load(&C.st[i].change_start), ce = atomic_load(&C.st[i].change_end);
    if (cs > ce || cs >= t0)
        return *dist_ret = 0, 1; /* a change under way, or during the read */
    *dist_ret = t1 > ce ? t1 - ce : 0;
    return ce && *dist_ret <= C.bound_ns;
}

/* 0 ok, 1 torn, 2 another file's content */
static int check_bytes(int i, const uint8_t *data, size_t len, off_t st_size)
{
    if ((off_t)len != st_size)
        return 1;
    struct l3_decode_options o = {.flags = L3_DECODE_VERIFY};
    void *px = NULL;
    size_t n = 0;
    struct l3_info info;
    if (l3_decode_alloc(data, len, &o, &px, &n, &info) != L3_OK)
        return 1;
    int r = 1;
    if (info.width == W && info.height == H && n == (size_t)W * H * 3) {
        const uint8_t *p = px;
        uint32_t id = (uint32_t)p[0] << 8 | p[1];
        uint32_t version = (uint32_t)p[2] << 24 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 8 | p[5];
        if (id != (uint32_t)i) {
            r = 2;
        } else {
            uint8_t want[W * H * 3];
            pixels_of(id, version, want);
            r = memcmp(want, px, n) != 0;
        }
    }
    l3_free(px);
    return r;
}

static void count_error(int i, int err, uint64_t t0)
{
    uint64_t dist = 0;
    int near = near_change(i, t0, mono_ns(), &dist);
    if (err == ENOENT) {
        if (!atomic_load(&C.st[i].present) || near || i >= C.files)
            atomic_fetch_add(&C.enoent, 1);
        else
            atomic_fetch_add(&C.eio_far, 1); /* a present file that is not there */
        return;
    }
    if (near) {
        atomic_fetch_add(&C.eio_near, 1);
        uint64_t m = atomic_load(&C.eio_max_ns);
        while (dist > m && !atomic_compare_exchange_weak(&C.eio_max_ns, &m, dist))
            ;
    } else {
        atomic_fetch_add(&C.eio_far, 1);
        fprintf(stderr, "churn: img%03d.l3: %s %.3f s after its last change\n", i, strerror(err),
                (double)dist / 1e9);
    }
}

static void read_one(int i, uint8_t *buf, size_t cap)
{
    char p[4096];
    path_of(p, sizeof p, C.mnt, i, "l3");
    uint64_t t0 = mono_ns();
    atomic_fetch_add(&C.reads, 1);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        count_error(i, errno, t0);
        return;
    }
    struct stat st;
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    int err = n < 0 ? errno : fstat(fd, &st) != 0 ? errno : 0;
    close(fd);
    if (err) {
        count_error(i, err, t0);
        return;
    }
    int r = check_bytes(i, buf, len, st.st_size);
    if (r == 0)
        atomic_fetch_add(&C.ok, 1);
    else if (r == 2)
        atomic_fetch_add(&C.other, 1);
    else
        atomic_fetch_add(&C.torn, 1);
    if (r)
        fprintf(stderr, "churn: img%03d.l3: %s (%zu bytes, st_size %lld)\n", i,
                r == 2 ? "ANOTHER FILE'S CONTENT" : "torn read", len, (long long)st.st_size);
}

static void *reader(void *arg)
{
    uint64_t s = (uint64_t)(uintptr_t)arg * 7919 + 1;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    while (buf && !atomic_load(&C.stop)) {
        int n = atomic_load(&C.names);
        read_one((int)(tc_splitmix64(&s) % (uint64_t)n), buf, cap);
    }
    free(buf);
    return NULL;
}

/* ---------------------------------------------------------------- main */

int cmd_churn(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: stress_tool churn SRC MNT [--files N] [--readers N] "
                        "[--seconds S] [--bound-ms MS] [--create-only]\n");
        return 2;
    }
    C.src = argv[1];
    C.mnt = argv[2];
    C.files = 40;
    C.readers = 8;
    C.seconds = 10;
    C.bound_ns = 1500000000ull;
    int create_only = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--files") && i + 1 < argc)
            C.files = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--readers") && i + 1 < argc)
            C.readers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            C.seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--bound-ms") && i + 1 < argc)
            C.bound_ns = (uint64_t)atoll(argv[++i]) * 1000000ull;
        else if (!strcmp(argv[i], "--create-only"))
            create_only = 1;
    }
    if (C.files < 1 || 2 * C.files > MAX_NAMES || C.readers < 1 || C.readers > 64)
        return 2;
    st_png_level = 0; /* stored deflate: every version has the same size */
    for (int i = 0; i < C.files; i++) {
        char p[4096];
        path_of(p, sizeof p, C.src, i, "png");
        if (write_version(p, i, O_CREAT | O_TRUNC) != 0) {
            fprintf(stderr, "churn: cannot write %s\n", p);
            return 1;
        }
        atomic_store(&C.st[i].present, 1);
    }
    atomic_store(&C.names, C.files);
    if (create_only)
        return 0;
    pthread_t w, r[64];
    pthread_create(&w, NULL, writer, NULL);
    for (int i = 0; i < C.readers; i++)
        pthread_create(&r[i], NULL, reader, (void *)(uintptr_t)(i + 1));
    struct timespec d = {(time_t)C.seconds, (long)((C.seconds - (double)(time_t)C.seconds) * 1e9)};
    nanosleep(&d, NULL);
    atomic_store(&C.stop, 1);
    pthread_join(w, NULL);
    for (int i = 0; i < C.readers; i++)
        pthread_join(r[i], NULL);
    printf("churn: %.0f s, %d readers, %" PRIu64 " source changes: %" PRIu64 " reads, %" PRIu64
           " right, %" PRIu64 " ENOENT (name absent or just changed), %" PRIu64
           " EIO within %.1f s of a change (farthest %.3f s), %" PRIu64
           " errors away from a change, %" PRIu64 " torn, %" PRIu64 " another file's content\n",
           C.seconds, C.readers, atomic_load(&C.writes), atomic_load(&C.reads),
           atomic_load(&C.ok), atomic_load(&C.enoent), atomic_load(&C.eio_near),
           (double)C.bound_ns / 1e9, (double)atomic_load(&C.eio_max_ns) / 1e9,
           atomic_load(&C.eio_far), atomic_load(&C.torn), atomic_load(&C.other));
    int fail = atomic_load(&C.other) || atomic_load(&C.torn) || atomic_load(&C.eio_far) ||
               atomic_load(&C.ok) == 0;
    printf("%s churn: 0 reads of another file's content, 0 torn reads, errors only near "
           "changes\n", fail ? "FAIL" : "PASS");
    return fail;
}
