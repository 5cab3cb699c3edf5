/* scan.c — walks of objects/: counting objects and bytes, removing stale
 * temp files, LRU eviction down to 90% of the cap, `verify` of every object
 * and `clear`. One walk at a time (c->scan_mu). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "handle.h"

struct objinfo {
    int64_t atime_ns;
    uint64_t size;
    char rel[64]; /* "ab/cdef...l3" under objects/ */
};

struct objlist {
    struct objinfo *v;
    size_t n, cap;
    uint64_t bytes;
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

static int is_object_name(const char *name)
{
    return strlen(name) == 33 && strcmp(name + 30, ".l3") == 0;
}

void sweep_temp(struct l3cache *c, int dirfd, const char *name, time_t now)
{
    long pid;
    char host[64];
    struct stat st;
    if (c->readonly || l3cache_temp_parse(name, &pid, host, sizeof(host)) != 0 ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    /* a writer of this host that is gone, or any writer older than the limit
     * (other hosts' live writers are never touched before that) */
    int dead = strcmp(host, c->host) == 0 && pid != getpid() && kill((pid_t)pid, 0) != 0 &&
               errno == ESRCH;
    if (dead || now - st.st_mtim.tv_sec >= (time_t)c->in.stale_temp_s)
        unlinkat(dirfd, name, 0);
}

/* Calls fn for every entry but . and .. of each fan-out directory objects/XX/,
 * with sfd the descriptor of objects/XX; with rmdir_sub, removes each XX/
 * afterwards (it stays when not empty). Returns fn's first error or -errno. */
typedef int walk_fn(struct l3cache *c, int sfd, const char *sub, const char *name, void *arg);
static int walk_fanout(struct l3cache *c, int rmdir_sub, walk_fn *fn, void *arg)
{
    int ofd = openat(c->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ofd < 0)
        return errno == ENOENT ? 0 : -errno;
    DIR *top = fdopendir(ofd);
    if (!top) {
        int e = -errno;
        close(ofd);
        return e;
    }
    int err = 0;
    struct dirent *de;
    while (!err && (de = readdir(top))) {
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
        while (!err && (fe = readdir(sd)))
            if (strcmp(fe->d_name, ".") && strcmp(fe->d_name, ".."))
                err = fn(c, sfd, de->d_name, fe->d_name, arg);
        closedir(sd);
        if (rmdir_sub)
            unlinkat(ofd, de->d_name, AT_REMOVEDIR);
    }
    closedir(top);
    return err;
}

/* ---------------------------------------------------- count and evict */

struct collect {
    struct objlist *list;
    int sweep_temps;
    time_t now;
};

static int collect_one(struct l3cache *c, int sfd, const char *sub, const char *name, void *arg)
{
    struct collect *k = arg;
    if (name[0] == '.') {
        if (k->sweep_temps)
            sweep_temp(c, sfd, name, k->now);
        return 0;
    }
    struct stat st;
    if (!is_object_name(name)) {
        /* a claim left by a crashed process on another host, or one renamed
         * aside by a takeover: the waiters stopped trusting it long ago */
        if (k->sweep_temps && !c->readonly && strstr(name, ".claim") &&
            fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            k->now - st.st_mtim.tv_sec >= (time_t)c->in.stale_temp_s)
            unlinkat(sfd, name, 0);
        return 0;
    }
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return 0;
    struct objlist *l = k->list;
    l->bytes += (uint64_t)st.st_size;
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 1024;
        struct objinfo *nv = realloc(l->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = ncap;
    }
    struct objinfo *o = &l->v[l->n++];
    o->atime_ns = l3cache_ts_ns(&st.st_atim);
    o->size = (uint64_t)st.st_size;
    snprintf(o->rel, sizeof(o->rel), "%.2s/%.33s", sub, name);
    return 0;
}

/* Unlinks least recently used objects until the total is at 90% of the cap
 * (hysteresis); an object used since the walk is kept. */
static void evict_lru(struct l3cache *c, struct objlist *l, uint64_t *freed_ret,
                      uint64_t *evicted_ret)
{
    uint64_t max = c->opts.max_bytes, low = max - max / 10;
    int ofd = openat(c->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ofd < 0)
        return;
    qsort(l->v, l->n, sizeof(*l->v), cmp_atime);
    for (size_t i = 0; i < l->n && l->bytes > low; i++) {
        struct stat st;
        if (fstatat(ofd, l->v[i].rel, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            l3cache_ts_ns(&st.st_atim) != l->v[i].atime_ns)
            continue;
        /* an open fd keeps the inode alive after unlink (POSIX; NFS clients
         * rename to .nfsXXXX until the last close) */
        if (unlinkat(ofd, l->v[i].rel, 0) == 0) {
            l->bytes -= l->v[i].size;
            *freed_ret += l->v[i].size;
            (*evicted_ret)++;
        }
    }
    close(ofd);
}

int scan_objects(struct l3cache *c, int evict, int sweep_temps, uint64_t *freed_ret)
{
    struct objlist l = {0};
    struct collect k = {&l, sweep_temps, time(NULL)};
    uint64_t freed = 0, evicted = 0;
    pthread_mutex_lock(&c->scan_mu);
    int err = walk_fanout(c, 0, collect_one, &k);
    if (!err && evict && c->opts.max_bytes && l.bytes > c->opts.max_bytes && !c->readonly)
        evict_lru(c, &l, &freed, &evicted);
    pthread_mutex_lock(&c->mu);
    if (!err) {
        c->objects = l.n - evicted;
        c->object_bytes = l.bytes;
    }
    c->inst.evictions += evicted;
    c->inst.evicted_bytes += freed;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->scan_mu);
    free(l.v);
    if (freed_ret)
        *freed_ret = freed;
    return err;
}

int l3cache_rescan(l3cache *c)
{
    if (!c)
        return -EINVAL;
    return scan_objects(c, 0, 0, NULL);
}

int l3cache_gc(l3cache *c, uint64_t *freed_ret)
{
    if (!c)
        return -EINVAL;
    if (c->readonly)
        return -EROFS;
    return scan_objects(c, 1, 1, freed_ret);
}

/* -------------------------------------------------------------- verify */

struct verify_count {
    uint64_t checked, bad;
};

/* The key of object objects/SUB/NAME: 1, or 0 when the name is not one. */
static int key_of_name(const char *sub, const char *name, struct l3cache_key *key_ret)
{
    char hex[33];
    snprintf(hex, sizeof hex, "%.2s%.30s", sub, name);
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char ch = hex[2 * i + k];
            unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
                         : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10) : 16;
            if (d == 16)
                return 0;
            v = v << 4 | d;
        }
        key_ret->bytes[i] = (uint8_t)v;
    }
    return 1;
}

static int verify_one(struct l3cache *c, int sfd, const char *sub, const char *name, void *arg)
{
    struct verify_count *v = arg;
    if (!is_object_name(name))
        return 0;
    int fd = openat(sfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    struct stat st;
    int r = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 0 : 1;
    if (r == 0)
        r = object_check(c, fd, (uint64_t)st.st_size, L3CACHE_CHECK_HEADER);
    if (r == 0)
        r = object_check(c, fd, (uint64_t)st.st_size, L3CACHE_CHECK_WHOLE);
    struct l3cache_key key;
    if (r == 0 && key_of_name(sub, name, &key))
        r = ranges_check_object(fd, &key, (uint64_t)st.st_size);
    close(fd);
    if (r < 0)
        return 0;
    v->checked++;
    if (r) {
        v->bad++;
        char rel[64];
        snprintf(rel, sizeof(rel), "objects/%.2s/%.33s", sub, name);
        object_remove_if_same(c, rel, &st);
        stats_count(c, &c->inst.corrupt_repaired, 1);
    }
    return 0;
}

int l3cache_verify_all(l3cache *c, uint64_t *checked_ret, uint64_t *bad_ret)
{
    if (!c)
        return -EINVAL;
    struct verify_count v = {0, 0};
    int r = walk_fanout(c, 0, verify_one, &v);
    if (checked_ret)
        *checked_ret = v.checked;
    if (bad_ret)
        *bad_ret = v.bad;
    return r;
}

/* --------------------------------------------------------------- clear */

static int clear_one(struct l3cache *c, int sfd, const char *sub, const char *name, void *arg)
{
    (void)sub;
    int *err = arg;
    long pid;
    char host[64];
    if (l3cache_temp_parse(name, &pid, host, sizeof(host)) == 0) {
        /* not an object yet: a live writer's temp file stays (it becomes
         * an object, or its writer removes it); stale ones go */
        sweep_temp(c, sfd, name, time(NULL));
        return 0;
    }
    if (unlinkat(sfd, name, 0) != 0 && errno != ENOENT &&
        strncmp(name, ".nfs", 4) != 0) /* NFS: open elsewhere */
        *err = -errno;
    return 0;
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
