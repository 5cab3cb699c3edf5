/* cache.c — the content-addressed object cache (docs/CACHE.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h> /* memfd_create */
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "l3cache_internal.h"

int l3cache_default_encode(void *ctx, const void *png, size_t png_size,
                           const struct l3_encode_options *opts,
                           void **out_ret, size_t *size_ret);
int l3cache_default_check(void *ctx, const void *data, size_t size,
                          uint64_t total, int full, size_t *needed_ret);
void l3cache_host_name(char *buf, size_t size);
uint64_t l3cache_random_u64(void);

#define LOG_NAME "index.log"
#define LOCK_NAME "lock"
#define PREFIX_BYTES 65536
#define MAX_CHECK_PREFIX ((size_t)64 << 20)

struct slot {
    int used;
    struct l3cache_entry e;
};

struct flight {
    struct flight *next;
    struct l3cache_key key;
    int refs;
    int done;
    int status;     /* 0 or -errno */
    int l3_status;
    int result_fd;  /* readable copy for waiters when no object was stored */
};

struct l3cache {
    char *dir;
    int dirfd;
    int lockfd;
    int logfd;
    int log_writable;
    int readonly;               /* L3CACHE_READONLY */
    struct l3cache_options opts;
    struct l3cache_internal in;
    char host[64];

    pthread_mutex_t mu;         /* everything below */
    pthread_cond_t flight_cv;
    struct flight *flights;

    struct slot *slots;
    size_t nslots, nused;
    uint64_t log_off;
    uint64_t log_records, log_bad_bytes;

    uint64_t instance_id;
    uint64_t params_id;
    struct l3cache_counters inst, flushed, persisted;

    int writes_disabled;
    time_t disabled_at;

    uint64_t objects, object_bytes;

    pthread_mutex_t scan_mu;    /* one scan/eviction at a time */
    pthread_cond_t bg_cv;
    pthread_t bg;
    int bg_started, closing, bg_kick;
    int first_sweep;            /* the first scan removes stale temp files */
    int scanned;                /* the first scan is done (objects valid) */
};

/* ---------------------------------------------------------------- utils */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int64_t ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads up to len bytes at off; returns bytes read or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int key_eq(const struct l3cache_key *a, const struct l3cache_key *b)
{
    return memcmp(a->bytes, b->bytes, 16) == 0;
}

static void counters_add(struct l3cache_counters *a, const struct l3cache_counters *b, int sign)
{
    uint64_t *pa = (uint64_t *)a;
    const uint64_t *pb = (const uint64_t *)b;
    for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
        pa[i] = sign > 0 ? pa[i] + pb[i] : pa[i] - pb[i];
}

static int counters_zero(const struct l3cache_counters *a)
{
    const uint64_t *p = (const uint64_t *)a;
    for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
        if (p[i])
            return 0;
    return 1;
}

void l3cache_source_from_stat(const struct stat *st, struct l3cache_source *src_ret)
{
    src_ret->dev = (uint64_t)st->st_dev;
    src_ret->ino = (uint64_t)st->st_ino;
    src_ret->size = (uint64_t)st->st_size;
    src_ret->mtime_ns = ts_ns(&st->st_mtim);
    src_ret->ctime_ns = ts_ns(&st->st_ctim);
}

/* ---------------------------------------------------------- size parsing */

int l3cache_parse_size(const char *text, const char *dir, uint64_t *bytes_ret)
{
    if (!text || !bytes_ret)
        return -EINVAL;
    const char *p = text;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    /* integer and optional fraction, without floating point surprises */
    uint64_t whole = 0, frac = 0, frac_div = 1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (frac_div < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_div *= 10;
            }
        }
    }
    if (*p == '%') {
        if (p[1] != 0 || whole > 100 || (whole == 100 && frac))
            return -EINVAL;
        if (!dir)
            return -EINVAL;
        /* the filesystem holding dir, or its nearest existing parent */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", dir);
        struct statvfs sv;
        while (statvfs(path, &sv) != 0) {
            if (errno != ENOENT)
                return -errno;
            char *slash = strrchr(path, '/');
            if (!slash)
                snprintf(path, sizeof(path), ".");
            else if (slash == path)
                path[1] = 0;
            else
                *slash = 0;
        }
        uint64_t fs_bytes = (uint64_t)sv.f_blocks * (uint64_t)sv.f_frsize;
        long double v = (long double)fs_bytes * ((long double)whole + (long double)frac / frac_div) / 100.0L;
        *bytes_ret = (uint64_t)v;
        return 0;
    }
    uint64_t mult = 1;
    switch (*p) {
    case 0: break;
    case 'b': case 'B': mult = 1; p++; break;
    case 'k': case 'K': mult = 1ull << 10; p++; break;
    case 'm': case 'M': mult = 1ull << 20; p++; break;
    case 'g': case 'G': mult = 1ull << 30; p++; break;
    case 't': case 'T': mult = 1ull << 40; p++; break;
    case 'p': case 'P': mult = 1ull << 50; p++; break;
    default: return -EINVAL;
    }
    if (mult > 1) { /* optional "B" or "iB" */
        if (*p == 'i' && (p[1] == 'B' || p[1] == 'b'))
            p += 2;
        else if (*p == 'B' || *p == 'b')
            p++;
    }
    if (*p != 0)
        return -EINVAL;
    if (whole > UINT64_MAX / mult)
        return -ERANGE;
    uint64_t v = whole * mult;
    uint64_t f = (uint64_t)((long double)frac / frac_div * (long double)mult);
    if (v > UINT64_MAX - f)
        return -ERANGE;
    *bytes_ret = v + f;
    return 0;
}

/* ------------------------------------------------------------- the index */

static uint64_t src_hash(const struct l3cache_source *s, uint64_t params_id)
{
    uint64_t v[6] = {s->dev, s->ino, s->size, (uint64_t)s->mtime_ns, (uint64_t)s->ctime_ns,
                     params_id};
    return XXH3_64bits(v, sizeof(v));
}

static int src_eq(const struct l3cache_source *a, const struct l3cache_source *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static struct slot *table_find(struct l3cache *c, const struct l3cache_source *s,
                               uint64_t params_id)
{
    if (!c->nslots)
        return NULL;
    size_t mask = c->nslots - 1;
    for (size_t i = (size_t)src_hash(s, params_id) & mask;; i = (i + 1) & mask) {
        struct slot *sl = &c->slots[i];
        if (!sl->used)
            return NULL;
        if (sl->e.params_id == params_id && src_eq(&sl->e.src, s))
            return sl;
    }
}

static int table_put(struct l3cache *c, const struct l3cache_entry *e)
{
    if ((c->nused + 1) * 10 >= c->nslots * 7) {
        size_t n = c->nslots ? c->nslots * 2 : 1024;
        struct slot *ns = calloc(n, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < c->nslots; i++) {
            if (!c->slots[i].used)
                continue;
            size_t j = (size_t)src_hash(&c->slots[i].e.src, c->slots[i].e.params_id) & (n - 1);
            while (ns[j].used)
                j = (j + 1) & (n - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->nslots = n;
    }
    size_t mask = c->nslots - 1;
    for (size_t i = (size_t)src_hash(&e->src, e->params_id) & mask;; i = (i + 1) & mask) {
        struct slot *sl = &c->slots[i];
        if (!sl->used) {
            sl->used = 1;
            sl->e = *e;
            c->nused++;
            return 0;
        }
        if (sl->e.params_id == e->params_id && src_eq(&sl->e.src, &e->src)) {
            sl->e = *e; /* the newest record wins */
            return 0;
        }
    }
}

static void index_reset(struct l3cache *c)
{
    free(c->slots);
    c->slots = NULL;
    c->nslots = c->nused = 0;
    c->log_off = 0;
    c->log_records = c->log_bad_bytes = 0;
    memset(&c->persisted, 0, sizeof(c->persisted));
}

/* Reads records appended since the last call (by any process). mu held. */
static void index_tail(struct l3cache *c)
{
    if (c->logfd < 0)
        return;
    struct stat st;
    if (fstat(c->logfd, &st) != 0)
        return;
    uint64_t size = (uint64_t)st.st_size;
    if (size < c->log_off) /* truncated by `cache clear` */
        index_reset(c);
    if (size == c->log_off)
        return;
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(size - c->log_off < CHUNK ? (size_t)(size - c->log_off) : CHUNK);
    if (!buf)
        return;
    uint64_t off = c->log_off;
    while (off < size) {
        size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
        ssize_t n = pread_full(c->logfd, buf, want, off);
        if (n <= 0)
            break;
        size_t pos = 0;
        int need_more = 0;
        while (pos < (size_t)n) {
            int type = 0;
            struct l3cache_entry e;
            struct l3cache_counters cnt;
            uint64_t inst = 0;
            long r = l3cache_rec_parse(buf + pos, (size_t)n - pos, &type, &e, &inst, &cnt);
            if (r > 0) {
                c->log_records++;
                if (type == L3CACHE_REC_ENTRY)
                    table_put(c, &e);
                else if (type == L3CACHE_REC_STATS && inst != c->instance_id)
                    counters_add(&c->persisted, &cnt, 1);
                pos += (size_t)r;
            } else if (r == 0) {
                need_more = 1;
                break;
            } else {
                c->log_bad_bytes++;
                pos++;
            }
        }
        off += pos;
        if (need_more && off + ((size_t)n - pos) >= size)
            break; /* an incomplete record at the end: retry later */
        if (pos == 0)
            break;
    }
    c->log_off = off;
    free(buf);
}

static void index_append(struct l3cache *c, const struct l3cache_entry *e)
{
    /* mu held */
    table_put(c, e);
    if (!c->log_writable || c->readonly)
        return;
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    l3cache_rec_encode_entry(e, rec);
    /* one write() per record on an O_APPEND fd: records of several
     * processes never interleave; a torn record is skipped by checksum */
    ssize_t n = write(c->logfd, rec, sizeof(rec));
    if (n == (ssize_t)sizeof(rec) && c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
        fdatasync(c->logfd);
}

static int index_find(struct l3cache *c, const struct l3cache_source *s,
                      struct l3cache_entry *e_ret)
{
    struct slot *sl = table_find(c, s, c->params_id);
    if (!sl) {
        index_tail(c);
        sl = table_find(c, s, c->params_id);
    }
    if (!sl || sl->e.encoded_size == 0)
        return -ENOENT;
    *e_ret = sl->e;
    return 0;
}

int l3cache_index_lookup(l3cache *c, const struct l3cache_source *src,
                         uint64_t *encoded_size_ret, struct l3cache_key *key_ret)
{
    if (!c || !src)
        return -EINVAL;
    struct l3cache_entry e;
    pthread_mutex_lock(&c->mu);
    int r = index_find(c, src, &e);
    pthread_mutex_unlock(&c->mu);
    if (r == 0) {
        if (encoded_size_ret)
            *encoded_size_ret = e.encoded_size;
        if (key_ret)
            *key_ret = e.key;
    }
    return r;
}

/* --------------------------------------------------------------- stats */

static void flush_stats(struct l3cache *c)
{
    pthread_mutex_lock(&c->mu);
    struct l3cache_counters delta = c->inst;
    counters_add(&delta, &c->flushed, -1);
    if (!counters_zero(&delta) && c->log_writable && !c->readonly) {
        uint8_t rec[L3CACHE_REC_STATS_SIZE];
        l3cache_rec_encode_stats(c->instance_id, &delta, rec);
        ssize_t n = write(c->logfd, rec, sizeof(rec));
        if (n == (ssize_t)sizeof(rec)) {
            counters_add(&c->persisted, &delta, 1);
            c->flushed = c->inst;
            if (c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
                fdatasync(c->logfd);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

int l3cache_get_stats(l3cache *c, struct l3cache_stats *s)
{
    if (!c || !s)
        return -EINVAL;
    memset(s, 0, sizeof(*s));
    pthread_mutex_lock(&c->mu);
    while (!c->scanned) /* objects/object_bytes come from the first scan */
        pthread_cond_wait(&c->flight_cv, &c->mu);
    index_tail(c);
    s->instance = c->inst;
    s->total = c->persisted;
    counters_add(&s->total, &c->inst, 1);
    counters_add(&s->total, &c->flushed, -1);
    s->objects = c->objects;
    s->object_bytes = c->object_bytes;
    s->max_bytes = c->opts.max_bytes;
    s->writes_disabled = c->writes_disabled;
    s->index_entries = c->nused;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ------------------------------------------------------------- objects */

static void note_write_failure(struct l3cache *c)
{
    /* mu held */
    c->inst.write_failures++;
    c->writes_disabled = 1;
    c->disabled_at = time(NULL);
}

static int writes_allowed(struct l3cache *c)
{
    /* mu held */
    if (c->readonly)
        return 0;
    if (!c->writes_disabled)
        return 1;
    if (time(NULL) - c->disabled_at >= (time_t)c->in.reenable_after_s) {
        c->writes_disabled = 0; /* try again; a new failure disables again */
        return 1;
    }
    return 0;
}

/* Removes the object at rel when it is still the inode described by st. */
static void remove_if_same(struct l3cache *c, const char *rel, const struct stat *st)
{
    struct stat now;
    if (fstatat(c->dirfd, rel, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_ino == st->st_ino && now.st_dev == st->st_dev)
        unlinkat(c->dirfd, rel, 0);
}

/* Runs the check hook on an open object. Returns 0 valid, 1 corrupt, -errno. */
static int check_object(struct l3cache *c, int fd, uint64_t size, int full)
{
    if (size == 0)
        return 1;
    if (full) {
        if (size > SIZE_MAX)
            return -EFBIG;
        /* read, not mmap: a file truncated behind our back must not SIGBUS */
        uint8_t *buf = malloc((size_t)size);
        if (!buf)
            return -ENOMEM;
        ssize_t n = pread_full(fd, buf, (size_t)size, 0);
        if (n < 0) {
            free(buf);
            return (int)n;
        }
        int st = (uint64_t)n == size ? c->in.check(c->in.ctx, buf, (size_t)n, size, 1, NULL) : 1;
        free(buf);
        return st == 0 ? 0 : 1;
    }
    size_t len = size < PREFIX_BYTES ? (size_t)size : PREFIX_BYTES;
    for (;;) {
        uint8_t *buf = malloc(len);
        if (!buf)
            return -ENOMEM;
        ssize_t n = pread_full(fd, buf, len, 0);
        if (n < 0) {
            free(buf);
            return (int)n;
        }
        size_t needed = 0;
        int st = c->in.check(c->in.ctx, buf, (size_t)n, size, 0, &needed);
        free(buf);
        if (st == 0)
            return 0;
        if (st == -1 && needed > len && needed <= size && needed <= MAX_CHECK_PREFIX &&
            (size_t)n == len) {
            len = needed;
            continue;
        }
        return 1;
    }
}

/* Opens and verifies an object. Returns 0 (fd/size set), -ENOENT when
 * absent, -EBADMSG when it was corrupt (it is then removed), -errno. */
static int object_open(struct l3cache *c, const struct l3cache_key *key,
                       int *fd_ret, uint64_t *size_ret)
{
    char rel[64];
    l3cache_object_relpath(key, rel);
    int fd = openat(c->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EIO;
    }
    uint64_t size = (uint64_t)st.st_size;
    /* The check compares the file size with the sizes in the object's own
     * checksummed header; a size that differs from the index's is then an
     * index entry that is out of date (two builds of one format version
     * whose encoders differ), not a corrupt object: the caller fixes it. */
    int bad = check_object(c, fd, size, c->in.verify_full);
    if (bad < 0) {
        close(fd);
        return bad;
    }
    if (bad) {
        close(fd);
        if (!c->readonly)
            remove_if_same(c, rel, &st);
        pthread_mutex_lock(&c->mu);
        c->inst.corrupt_repaired++;
        pthread_mutex_unlock(&c->mu);
        return -EBADMSG;
    }
    /* last use for LRU eviction: the atime, refreshed at most every
     * touch_interval_s so hits stay cheap */
    if (!c->readonly) {
        time_t now = time(NULL);
        if (c->in.touch_interval_s == UINT32_MAX ||
            now - st.st_atim.tv_sec >= (time_t)c->in.touch_interval_s) {
            struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
            futimens(fd, ts);
        }
    }
    *fd_ret = fd;
    *size_ret = size;
    return 0;
}

static int mkdir_objects(struct l3cache *c, const char *sub)
{
    if (mkdirat(c->dirfd, "objects", 0755) != 0 && errno != EEXIST)
        return -errno;
    if (mkdirat(c->dirfd, sub, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static void fsync_dir(struct l3cache *c, const char *sub)
{
    int fd = openat(c->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Stores an object atomically. 0: stored (or already there), -errno. */
static int object_store(struct l3cache *c, const struct l3cache_key *key,
                        const void *data, size_t size, int *created_ret)
{
    char rel[64], sub[16], tmpname[160], tmprel[192];
    l3cache_object_relpath(key, rel);
    memcpy(sub, rel, 10);
    sub[10] = 0; /* "objects/ab" */
    int r = l3cache_temp_name(tmpname, sizeof(tmpname));
    if (r < 0)
        return r;
    snprintf(tmprel, sizeof(tmprel), "%s/%s", sub, tmpname);
    *created_ret = 0;

    int fd = openat(c->dirfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
        r = mkdir_objects(c, sub);
        if (r < 0)
            return r;
        fd = openat(c->dirfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return -errno;
    r = write_all(fd, data, size);
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_OBJECT && fsync(fd) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno; /* NFS reports write-back errors at close */
    if (r == 0) {
        if (linkat(c->dirfd, tmprel, c->dirfd, rel, 0) == 0) {
            *created_ret = 1;
        } else if (errno == EEXIST) {
            /* another writer won; same key, same bytes */
        } else if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP ||
                   errno == ENOSYS || errno == EMLINK) {
            /* no hard links here: rename replaces atomically */
            if (renameat(c->dirfd, tmprel, c->dirfd, rel) == 0)
                *created_ret = 1;
            else
                r = -errno;
        } else {
            r = -errno;
        }
    }
    unlinkat(c->dirfd, tmprel, 0);
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
        fsync_dir(c, sub);
    return r;
}

/* A readable fd holding bytes that could not be stored. */
static int memory_fd(const void *data, size_t size)
{
    int fd = memfd_create("l3cache", MFD_CLOEXEC);
    if (fd < 0) {
        char path[] = "/tmp/l3cache-XXXXXX";
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
            return -errno;
        unlink(path);
    }
    int r = write_all(fd, data, size);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

/* A new open file description for the same file as fd (own offset). */
static int reopen_fd(int fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return nfd < 0 ? -errno : nfd;
}

/* Reads a whole source file with pread from offset 0. */
static int read_source(int fd, uint64_t size_hint, uint8_t **buf_ret, size_t *size_ret)
{
    size_t cap = size_hint > 0 && size_hint < ((uint64_t)1 << 40) ? (size_t)size_hint + 1 : 65536;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            free(buf);
            return e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *buf_ret = buf;
    *size_ret = len;
    return 0;
}

static void kick_background(struct l3cache *c)
{
    /* mu held */
    if (c->bg_started) {
        c->bg_kick = 1;
        pthread_cond_signal(&c->bg_cv);
    }
}

static struct flight *flight_find(struct l3cache *c, const struct l3cache_key *key)
{
    for (struct flight *f = c->flights; f; f = f->next)
        if (key_eq(&f->key, key))
            return f;
    return NULL;
}

static void flight_release(struct l3cache *c, struct flight *f)
{
    /* mu held */
    if (--f->refs > 0)
        return;
    for (struct flight **pp = &c->flights; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    if (f->result_fd >= 0)
        close(f->result_fd);
    free(f);
}

static void count_hit(struct l3cache *c, uint64_t size)
{
    pthread_mutex_lock(&c->mu);
    c->inst.hits++;
    c->inst.bytes_served += size;
    pthread_mutex_unlock(&c->mu);
}

/* Encodes src bytes under `key` (single flight) and returns a readable fd. */
static int produce(struct l3cache *c, const struct l3cache_key *key,
                   const uint8_t *src, size_t src_size, int *fd_ret,
                   uint64_t *size_ret, int *l3_status_ret, int *was_hit_ret)
{
    *was_hit_ret = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        struct flight *f = flight_find(c, key);
        if (!f)
            break;
        /* someone in this process is encoding this key: wait for it */
        f->refs++;
        while (!f->done)
            pthread_cond_wait(&c->flight_cv, &c->mu);
        int status = f->status, l3s = f->l3_status;
        int rfd = f->result_fd >= 0 ? reopen_fd(f->result_fd) : -1;
        flight_release(c, f);
        pthread_mutex_unlock(&c->mu);
        if (status < 0) {
            if (rfd >= 0)
                close(rfd);
            if (l3_status_ret)
                *l3_status_ret = l3s;
            return status;
        }
        int fd;
        uint64_t size;
        if (object_open(c, key, &fd, &size) == 0) {
            if (rfd >= 0)
                close(rfd);
            *fd_ret = fd;
            *size_ret = size;
            return 0;
        }
        if (rfd >= 0) {
            struct stat st;
            if (fstat(rfd, &st) == 0) {
                *fd_ret = rfd;
                *size_ret = (uint64_t)st.st_size;
                return 0;
            }
            close(rfd);
        }
        pthread_mutex_lock(&c->mu); /* gone again (evicted): encode ourselves */
    }
    struct flight *f = calloc(1, sizeof(*f));
    if (!f) {
        pthread_mutex_unlock(&c->mu);
        return -ENOMEM;
    }
    f->key = *key;
    f->refs = 1;
    f->result_fd = -1;
    f->next = c->flights;
    c->flights = f;
    pthread_mutex_unlock(&c->mu);

    /* Another process may have stored it since our first look. */
    int fd = -1;
    uint64_t size = 0;
    int r = object_open(c, key, &fd, &size);
    if (r == 0) {
        *was_hit_ret = 1;
        pthread_mutex_lock(&c->mu);
        f->done = 1;
        pthread_cond_broadcast(&c->flight_cv);
        flight_release(c, f);
        pthread_mutex_unlock(&c->mu);
        *fd_ret = fd;
        *size_ret = size;
        return 0;
    }

    void *out = NULL;
    size_t out_size = 0;
    int l3s = c->in.encode(c->in.ctx, src, src_size, &c->opts.encode, &out, &out_size);
    if (l3s != 0 || !out || out_size == 0) {
        free(out);
        if (l3s == 0)
            l3s = L3_ERR_INVALID_ARG;
        pthread_mutex_lock(&c->mu);
        c->inst.encode_failures++;
        f->done = 1;
        f->status = l3s == L3_ERR_NOMEM ? -ENOMEM : -EIO;
        f->l3_status = l3s;
        r = f->status;
        pthread_cond_broadcast(&c->flight_cv);
        flight_release(c, f);
        pthread_mutex_unlock(&c->mu);
        if (l3_status_ret)
            *l3_status_ret = l3s;
        return r;
    }

    pthread_mutex_lock(&c->mu);
    c->inst.encodes++;
    int may_write = writes_allowed(c);
    pthread_mutex_unlock(&c->mu);

    int stored = 0, created = 0;
    if (may_write) {
        r = object_store(c, key, out, out_size, &created);
        pthread_mutex_lock(&c->mu);
        if (r == 0) {
            stored = 1;
            if (created) {
                c->inst.bytes_written += out_size;
                c->objects++;
                c->object_bytes += out_size;
                if (c->opts.max_bytes && c->object_bytes > c->opts.max_bytes)
                    kick_background(c);
            }
        } else {
            note_write_failure(c);
        }
        pthread_mutex_unlock(&c->mu);
    }
    fd = -1;
    if (stored) {
        char rel[64];
        l3cache_object_relpath(key, rel);
        fd = openat(c->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            struct stat st;
            /* a racing writer's object: same key, so it must have our size */
            if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != out_size) {
                close(fd);
                fd = -1;
            }
        }
    }
    int keep_for_waiters = 0;
    if (fd < 0) {
        fd = memory_fd(out, out_size);
        keep_for_waiters = 1;
    }
    free(out);

    pthread_mutex_lock(&c->mu);
    f->done = 1;
    if (fd < 0) {
        f->status = fd;
    } else if (keep_for_waiters && f->refs > 1) {
        f->result_fd = reopen_fd(fd);
        if (f->result_fd < 0)
            f->result_fd = -1;
    }
    pthread_cond_broadcast(&c->flight_cv);
    flight_release(c, f);
    pthread_mutex_unlock(&c->mu);
    if (fd < 0)
        return fd;
    *fd_ret = fd;
    *size_ret = out_size;
    return 0;
}

int l3cache_get(l3cache *c, int src_fd, const struct stat *st,
                struct l3cache_object *obj, int *l3_status_ret)
{
    if (!c || src_fd < 0 || !st || !obj)
        return -EINVAL;
    memset(obj, 0, sizeof(*obj));
    obj->fd = -1;
    if (l3_status_ret)
        *l3_status_ret = 0;

    struct l3cache_source src;
    l3cache_source_from_stat(st, &src);
    struct l3cache_entry e;

    pthread_mutex_lock(&c->mu);
    c->inst.lookups++;
    int known = index_find(c, &src, &e) == 0;
    pthread_mutex_unlock(&c->mu);

    int fd;
    uint64_t size;
    if (known) {
        int r = object_open(c, &e.key, &fd, &size);
        if (r == 0) {
            if (size != e.encoded_size) {
                pthread_mutex_lock(&c->mu);
                e.encoded_size = size;
                index_append(c, &e);
                pthread_mutex_unlock(&c->mu);
            }
            count_hit(c, size);
            obj->fd = fd;
            obj->size = size;
            obj->key = e.key;
            obj->hit = 1;
            return 0;
        }
    }

    uint8_t *buf = NULL;
    size_t len = 0;
    int r = read_source(src_fd, src.size, &buf, &len);
    if (r < 0)
        return r;
    struct l3cache_key key;
    l3cache_key_compute(buf, len, c->in.format_version, &c->opts.encode, &key);

    r = (known && key_eq(&key, &e.key)) ? -ENOENT : object_open(c, &key, &fd, &size);
    if (r == 0) {
        free(buf);
        pthread_mutex_lock(&c->mu);
        struct l3cache_entry ne = {.src = src, .key = key, .encoded_size = size,
                                  .params_id = c->params_id};
        index_append(c, &ne);
        pthread_mutex_unlock(&c->mu);
        count_hit(c, size);
        obj->fd = fd;
        obj->size = size;
        obj->key = key;
        obj->hit = 1;
        return 0;
    }

    int was_hit = 0;
    r = produce(c, &key, buf, len, &fd, &size, l3_status_ret, &was_hit);
    free(buf);
    pthread_mutex_lock(&c->mu);
    if (r == 0 && was_hit) { /* another process stored it meanwhile */
        c->inst.hits++;
        c->inst.bytes_served += size;
    } else {
        c->inst.misses++;
    }
    if (r < 0) {
        pthread_mutex_unlock(&c->mu);
        return r;
    }
    if (!known || !key_eq(&key, &e.key) || e.encoded_size != size) {
        struct l3cache_entry ne = {.src = src, .key = key, .encoded_size = size,
                                  .params_id = c->params_id};
        index_append(c, &ne);
    }
    pthread_mutex_unlock(&c->mu);
    obj->fd = fd;
    obj->size = size;
    obj->key = key;
    obj->hit = was_hit;
    return 0;
}

/* --------------------------------------------------- scans and eviction */

struct objinfo {
    int64_t atime_ns;
    uint64_t size;
    char rel[64];
};

static int cmp_atime(const void *a, const void *b)
{
    const struct objinfo *x = a, *y = b;
    return x->atime_ns < y->atime_ns ? -1 : x->atime_ns > y->atime_ns;
}

static int is_hex2(const char *s)
{
    return strlen(s) == 2 && strchr("0123456789abcdef", s[0]) && strchr("0123456789abcdef", s[1]);
}

/* Walks objects/. mode 0: count; 1: count + evict over the cap; the
 * temp-file sweep runs when sweep_temps is set. */
static int scan_objects(struct l3cache *c, int evict, int sweep_temps, int exclusive,
                        uint64_t *freed_ret)
{
    (void)exclusive; /* temps of live writers on other hosts are kept anyway */
    pthread_mutex_lock(&c->scan_mu);
    int ofd = openat(c->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ofd < 0) {
        pthread_mutex_unlock(&c->scan_mu);
        pthread_mutex_lock(&c->mu);
        c->objects = c->object_bytes = 0;
        pthread_mutex_unlock(&c->mu);
        if (freed_ret)
            *freed_ret = 0;
        return errno == ENOENT ? 0 : -errno;
    }
    DIR *top = fdopendir(ofd);
    if (!top) {
        close(ofd);
        pthread_mutex_unlock(&c->scan_mu);
        return -errno;
    }
    struct objinfo *list = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    int err = 0;
    while ((de = readdir(top))) {
        if (!is_hex2(de->d_name))
            continue;
        int sfd = openat(ofd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
            continue;
        DIR *sd = fdopendir(sfd);
        if (!sd) {
            close(sfd);
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(sd))) {
            if (fe->d_name[0] == '.') {
                long pid;
                char host[64];
                if (!sweep_temps || c->readonly ||
                    l3cache_temp_parse(fe->d_name, &pid, host, sizeof(host)) != 0)
                    continue;
                struct stat st;
                if (fstatat(sfd, fe->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                    continue;
                int dead = strcmp(host, c->host) == 0 && pid != getpid() &&
                           kill((pid_t)pid, 0) != 0 && errno == ESRCH;
                int old = now - st.st_mtim.tv_sec >= (time_t)c->in.stale_temp_s;
                if (dead || old)
                    unlinkat(sfd, fe->d_name, 0);
                continue;
            }
            size_t nl = strlen(fe->d_name);
            if (nl != 33 || strcmp(fe->d_name + 30, ".l3") != 0)
                continue;
            struct stat st;
            if (fstatat(sfd, fe->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
                continue;
            total += (uint64_t)st.st_size;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 1024;
                struct objinfo *nl2 = realloc(list, ncap * sizeof(*list));
                if (!nl2) {
                    err = -ENOMEM;
                    break;
                }
                list = nl2;
                cap = ncap;
            }
            list[n].atime_ns = ts_ns(&st.st_atim);
            list[n].size = (uint64_t)st.st_size;
            snprintf(list[n].rel, sizeof(list[n].rel), "%.2s/%.33s", de->d_name, fe->d_name);
            n++;
        }
        closedir(sd);
        if (err)
            break;
    }
    uint64_t count = n, freed = 0, evicted = 0;
    uint64_t max = c->opts.max_bytes;
    if (!err && evict && max && total > max && !c->readonly) {
        uint64_t low = max - max / 10; /* evict down to 90% of the cap */
        qsort(list, n, sizeof(*list), cmp_atime);
        for (size_t i = 0; i < n && total > low; i++) {
            struct stat st;
            if (fstatat(ofd, list[i].rel, &st, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            if (ts_ns(&st.st_atim) != list[i].atime_ns)
                continue; /* used since the scan: keep it */
            /* an open fd keeps the inode alive after unlink (POSIX; NFS
             * clients rename to .nfsXXXX until the last close) */
            if (unlinkat(ofd, list[i].rel, 0) == 0) {
                total -= list[i].size;
                freed += list[i].size;
                evicted++;
                count--;
            }
        }
    }
    closedir(top);
    free(list);
    pthread_mutex_lock(&c->mu);
    if (!err) {
        c->objects = count;
        c->object_bytes = total;
    }
    c->inst.evictions += evicted;
    c->inst.evicted_bytes += freed;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->scan_mu);
    if (freed_ret)
        *freed_ret = freed;
    return err;
}

int l3cache_rescan(l3cache *c)
{
    if (!c)
        return -EINVAL;
    return scan_objects(c, 0, 0, 0, NULL);
}

int l3cache_gc(l3cache *c, uint64_t *freed_ret)
{
    if (!c)
        return -EINVAL;
    if (c->readonly)
        return -EROFS;
    return scan_objects(c, 1, 1, 0, freed_ret);
}

/* Calls fn for every entry but . and .. of each fan-out directory objects/XX/,
 * with sfd the descriptor of objects/XX; with rmdir_sub, removes each XX/
 * afterwards (it stays when not empty). */
typedef void walk_fn(struct l3cache *c, int sfd, const char *sub, const char *name,
                     void *arg);
static void walk_fanout(struct l3cache *c, int rmdir_sub, walk_fn *fn, void *arg)
{
    int ofd = openat(c->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ofd < 0)
        return;
    DIR *top = fdopendir(ofd);
    if (!top) {
        close(ofd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(top))) {
        if (!is_hex2(de->d_name))
            continue;
        int sfd = openat(ofd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *sd = sfd >= 0 ? fdopendir(sfd) : NULL;
        if (!sd) {
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(sd)))
            if (strcmp(fe->d_name, ".") && strcmp(fe->d_name, ".."))
                fn(c, sfd, de->d_name, fe->d_name, arg);
        closedir(sd);
        if (rmdir_sub)
            unlinkat(ofd, de->d_name, AT_REMOVEDIR);
    }
    closedir(top);
}

struct verify_count {
    uint64_t checked, bad;
};

static void verify_one(struct l3cache *c, int sfd, const char *sub, const char *name,
                       void *arg)
{
    struct verify_count *v = arg;
    if (strlen(name) != 33 || strcmp(name + 30, ".l3") != 0)
        return;
    int fd = openat(sfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    struct stat st;
    int r = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 0 : 1;
    if (r == 0)
        r = check_object(c, fd, (uint64_t)st.st_size, 0);
    if (r == 0)
        r = check_object(c, fd, (uint64_t)st.st_size, 1);
    close(fd);
    if (r < 0)
        return;
    v->checked++;
    if (r) {
        v->bad++;
        char rel[64];
        snprintf(rel, sizeof(rel), "objects/%.2s/%.33s", sub, name);
        if (!c->readonly)
            remove_if_same(c, rel, &st);
        pthread_mutex_lock(&c->mu);
        c->inst.corrupt_repaired++;
        pthread_mutex_unlock(&c->mu);
    }
}

int l3cache_verify_all(l3cache *c, uint64_t *checked_ret, uint64_t *bad_ret)
{
    if (!c)
        return -EINVAL;
    struct verify_count v = {0, 0};
    walk_fanout(c, 0, verify_one, &v);
    if (checked_ret)
        *checked_ret = v.checked;
    if (bad_ret)
        *bad_ret = v.bad;
    return 0;
}

static void clear_one(struct l3cache *c, int sfd, const char *sub, const char *name,
                      void *arg)
{
    (void)c;
    (void)sub;
    int *err = arg;
    if (unlinkat(sfd, name, 0) != 0 && errno != ENOENT &&
        strncmp(name, ".nfs", 4) != 0) /* NFS: open elsewhere */
        *err = -errno;
}

int l3cache_clear(l3cache *c)
{
    if (!c)
        return -EINVAL;
    if (c->readonly || !c->log_writable)
        return -EROFS;
    pthread_mutex_lock(&c->scan_mu);
    int err = 0;
    walk_fanout(c, 1, clear_one, &err);
    pthread_mutex_lock(&c->mu);
    if (ftruncate(c->logfd, 0) != 0 && !err)
        err = -errno;
    index_reset(c);
    memset(&c->inst, 0, sizeof(c->inst));
    memset(&c->flushed, 0, sizeof(c->flushed));
    c->objects = c->object_bytes = 0;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->scan_mu);
    return err;
}

/* ------------------------------------------------- background and open */

static void *background(void *arg)
{
    struct l3cache *c = arg;
    scan_objects(c, 1, c->first_sweep, 0, NULL);
    pthread_mutex_lock(&c->mu);
    c->scanned = 1;
    pthread_cond_broadcast(&c->flight_cv);
    pthread_mutex_unlock(&c->mu);
    uint64_t next_flush = now_ms() + c->in.flush_interval_ms;
    uint64_t next_scan = now_ms() + c->in.scan_interval_ms;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        uint64_t t = now_ms();
        uint64_t wake = next_flush < next_scan ? next_flush : next_scan;
        if (!c->bg_kick && t < wake) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t wait = wake - t;
            ts.tv_sec += (time_t)(wait / 1000);
            ts.tv_nsec += (long)(wait % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c->bg_cv, &c->mu, &ts);
            continue;
        }
        int kick = c->bg_kick;
        c->bg_kick = 0;
        pthread_mutex_unlock(&c->mu);
        t = now_ms();
        if (t >= next_flush) {
            flush_stats(c);
            next_flush = t + c->in.flush_interval_ms;
        }
        if (kick || t >= next_scan) {
            scan_objects(c, 1, 0, 0, NULL);
            next_scan = now_ms() + c->in.scan_interval_ms;
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Rewrites the log with the live entries and one stats record. Only with
 * the directory lock held exclusively (no other process has the log open). */
static void compact_log(struct l3cache *c)
{
    char tmpname[160];
    if (l3cache_temp_name(tmpname, sizeof(tmpname)) < 0)
        return;
    int fd = openat(c->dirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t cap = c->nused * L3CACHE_REC_ENTRY_SIZE + L3CACHE_REC_STATS_SIZE;
    uint8_t *buf = malloc(cap);
    int r = buf ? 0 : -ENOMEM;
    size_t len = 0;
    if (buf) {
        for (size_t i = 0; i < c->nslots; i++)
            if (c->slots[i].used)
                len += l3cache_rec_encode_entry(&c->slots[i].e, buf + len);
        if (!counters_zero(&c->persisted))
            len += l3cache_rec_encode_stats(0, &c->persisted, buf + len);
        r = write_all(fd, buf, len);
    }
    free(buf);
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(c->dirfd, tmpname, c->dirfd, LOG_NAME) == 0) {
        fsync(c->dirfd);
        int nfd = openat(c->dirfd, LOG_NAME, O_RDWR | O_APPEND | O_CLOEXEC);
        if (nfd >= 0) {
            close(c->logfd);
            c->logfd = nfd;
            c->log_off = (uint64_t)len;
            c->log_records = c->nused + (counters_zero(&c->persisted) ? 0 : 1);
            c->log_bad_bytes = 0;
        }
    } else {
        unlinkat(c->dirfd, tmpname, 0);
    }
}

static void sweep_root_temps(struct l3cache *c)
{
    /* compaction temp files in the directory itself */
    int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        char host[64];
        struct stat st;
        if (l3cache_temp_parse(de->d_name, &pid, host, sizeof(host)) != 0 ||
            fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        int dead = strcmp(host, c->host) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (dead || now - st.st_mtim.tv_sec >= (time_t)c->in.stale_temp_s)
            unlinkat(c->dirfd, de->d_name, 0);
    }
    closedir(d);
}

static const char cachedir_tag[] =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by l3fs (l3cache).\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n";

int l3cache_open(const struct l3cache_options *opts, l3cache **cache_ret)
{
    return l3cache_open_internal(opts, NULL, cache_ret);
}

int l3cache_open_internal(const struct l3cache_options *opts,
                          const struct l3cache_internal *internal,
                          l3cache **cache_ret)
{
    if (!opts || !opts->dir || !opts->dir[0] || !cache_ret)
        return -EINVAL;
    if (opts->fsync_policy < L3CACHE_FSYNC_NONE || opts->fsync_policy > L3CACHE_FSYNC_ALL)
        return -EINVAL;
    *cache_ret = NULL;
    struct l3cache *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->dirfd = c->lockfd = c->logfd = -1;
    c->opts = *opts;
    c->dir = strdup(opts->dir);
    c->opts.dir = c->dir;
    if (internal)
        c->in = *internal;
    if (!c->in.encode)
        c->in.encode = l3cache_default_encode;
    if (!c->in.check)
        c->in.check = l3cache_default_check;
    if (!c->in.format_version)
        c->in.format_version = L3_FORMAT_VERSION;
    if (!c->in.flush_interval_ms)
        c->in.flush_interval_ms = 10000;
    if (!c->in.scan_interval_ms)
        c->in.scan_interval_ms = 60000;
    if (!c->in.touch_interval_s)
        c->in.touch_interval_s = 60;
    if (!c->in.reenable_after_s)
        c->in.reenable_after_s = 60;
    if (!c->in.stale_temp_s)
        c->in.stale_temp_s = 15 * 60;
    c->readonly = (opts->flags & L3CACHE_READONLY) != 0;
    if (opts->flags & L3CACHE_VERIFY_FULL)
        c->in.verify_full = 1;
    c->params_id = l3cache_params_id(c->in.format_version, &c->opts.encode);
    l3cache_host_name(c->host, sizeof(c->host));
    c->instance_id = l3cache_random_u64() | 1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->scan_mu, NULL);
    pthread_cond_init(&c->flight_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&c->bg_cv, &ca);
    pthread_condattr_destroy(&ca);
    int r = 0;
    if (!c->dir) {
        r = -ENOMEM;
        goto fail;
    }

    if (!c->readonly && mkdir(c->dir, 0755) != 0 && errno != EEXIST) {
        if (errno != EROFS && errno != EACCES && errno != EPERM) {
            r = -errno;
            goto fail;
        }
    }
    c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0) {
        r = -errno;
        goto fail;
    }

    /* The lock file: shared by every user of the directory for its
     * lifetime, exclusive only for log compaction at open. */
    int writable = !c->readonly;
    if (writable) {
        c->lockfd = openat(c->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (c->lockfd < 0) {
            if (errno != EROFS && errno != EACCES && errno != EPERM && errno != ENOSPC &&
                errno != EDQUOT) {
                r = -errno;
                goto fail;
            }
            writable = 0; /* degrade: a read-only cache directory */
        }
    }
    if (c->lockfd < 0)
        c->lockfd = openat(c->dirfd, LOCK_NAME, O_RDONLY | O_CLOEXEC);
    int exclusive = 0;
    if (c->lockfd >= 0 && writable) {
        exclusive = flock(c->lockfd, LOCK_EX | LOCK_NB) == 0;
    }

    if (writable) {
        c->logfd = openat(c->dirfd, LOG_NAME, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (c->logfd < 0 && errno != EROFS && errno != EACCES && errno != EPERM &&
            errno != ENOSPC && errno != EDQUOT) {
            r = -errno;
            goto fail;
        }
        if (c->logfd >= 0)
            c->log_writable = 1;
        else
            writable = 0;
    }
    if (c->logfd < 0)
        c->logfd = openat(c->dirfd, LOG_NAME, O_RDONLY | O_CLOEXEC);
    index_tail(c);

    if (exclusive) {
        /* nobody else uses the directory: compact a grown log */
        uint64_t live = c->nused;
        if (c->log_bad_bytes > 0 || c->log_records > 2 * live + 1024)
            compact_log(c);
        sweep_root_temps(c);
    }
    if (c->lockfd >= 0)
        flock(c->lockfd, LOCK_SH); /* blocks while another opener compacts */
    if (exclusive == 0 && c->log_writable) {
        /* the log may have been replaced by a compacting opener meanwhile */
        struct stat a, b;
        if (fstat(c->logfd, &a) == 0 && fstatat(c->dirfd, LOG_NAME, &b, 0) == 0 &&
            (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
            int nfd = openat(c->dirfd, LOG_NAME, O_RDWR | O_APPEND | O_CLOEXEC);
            if (nfd >= 0) {
                close(c->logfd);
                c->logfd = nfd;
                index_reset(c);
                index_tail(c);
            }
        }
    }

    if (writable) {
        int tfd = openat(c->dirfd, "CACHEDIR.TAG", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (tfd >= 0) {
            if (write_all(tfd, cachedir_tag, sizeof(cachedir_tag) - 1) != 0)
                unlinkat(c->dirfd, "CACHEDIR.TAG", 0);
            close(tfd);
        }
    } else if (!c->readonly) {
        c->inst.write_failures++;
        c->writes_disabled = 1;
        c->disabled_at = time(NULL);
    }
    /* The first walk of objects/ (stale temp files, object count, the cap)
     * runs in the background thread so that opening a large cache on a
     * slow filesystem does not wait for it. */
    c->first_sweep = writable;
    if (!c->in.no_background &&
        pthread_create(&c->bg, NULL, background, c) == 0) {
        c->bg_started = 1;
    } else {
        scan_objects(c, 0, c->first_sweep, exclusive, NULL);
        c->scanned = 1;
    }
    *cache_ret = c;
    return 0;

fail:
    l3cache_close(c);
    return r;
}

void l3cache_close(l3cache *c)
{
    if (!c)
        return;
    if (c->bg_started) {
        pthread_mutex_lock(&c->mu);
        c->closing = 1;
        pthread_cond_signal(&c->bg_cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->bg, NULL);
    }
    if (c->logfd >= 0)
        flush_stats(c);
    while (c->flights) { /* only left when a caller misused the API */
        struct flight *f = c->flights;
        c->flights = f->next;
        if (f->result_fd >= 0)
            close(f->result_fd);
        free(f);
    }
    if (c->logfd >= 0)
        close(c->logfd);
    if (c->lockfd >= 0)
        close(c->lockfd);
    if (c->dirfd >= 0)
        close(c->dirfd);
    free(c->slots);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->scan_mu);
    pthread_cond_destroy(&c->flight_cv);
    pthread_cond_destroy(&c->bg_cv);
    free(c->dir);
    free(c);
}
