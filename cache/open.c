/* open.c — opening a cache directory (creating it, the shared lock, the
 * index log and its compaction, the cache tag), the background thread
 * (first walk, periodic statistics flush and eviction scans), and close. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

static const char cachedir_tag[] =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by l3fs (l3cache).\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n";

/* --------------------------------------------------------- background */

static void first_scan(struct l3cache *c, int evict)
{
    scan_objects(c, evict, c->first_sweep, NULL);
    pthread_mutex_lock(&c->mu);
    c->scanned = 1;
    pthread_cond_broadcast(&c->flight_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits (mu held) until `wake` (l3cache_now_ms time) or a kick. */
static void bg_sleep_locked(struct l3cache *c, uint64_t wake)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wait = wake - l3cache_now_ms();
    ts.tv_sec += (time_t)(wait / 1000);
    ts.tv_nsec += (long)(wait % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->bg_cv, &c->mu, &ts);
}

static void *background(void *arg)
{
    struct l3cache *c = arg;
    first_scan(c, 1);
    uint64_t next_flush = l3cache_now_ms() + c->in.flush_interval_ms;
    uint64_t next_scan = l3cache_now_ms() + c->in.scan_interval_ms;
    uint64_t next_beat = l3cache_now_ms() + c->in.claim_beat_ms;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        uint64_t t = l3cache_now_ms();
        uint64_t wake = next_flush < next_scan ? next_flush : next_scan;
        if (c->claims && next_beat < wake)
            wake = next_beat;
        if (!c->bg_kick && t < wake) {
            bg_sleep_locked(c, wake);
            continue;
        }
        int kick = c->bg_kick;
        c->bg_kick = 0;
        pthread_mutex_unlock(&c->mu);
        t = l3cache_now_ms();
        if (t >= next_beat) {
            claims_beat(c);
            next_beat = t + c->in.claim_beat_ms;
        }
        if (t >= next_flush) {
            stats_flush(c);
            next_flush = t + c->in.flush_interval_ms;
        }
        if (kick || t >= next_scan) {
            scan_objects(c, 1, 0, NULL);
            next_scan = l3cache_now_ms() + c->in.scan_interval_ms;
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---------------------------------------------------------------- open */

/* Compaction temp files in the directory itself. */
static void sweep_root_temps(struct l3cache *c)
{
    int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)))
        sweep_temp(c, c->dirfd, de->d_name, now);
    closedir(d);
}

static int degrade_errno(int e)
{
    return e == EROFS || e == EACCES || e == EPERM || e == ENOSPC || e == EDQUOT;
}

static struct l3cache *handle_new(const struct l3cache_options *opts,
                                  const struct l3cache_internal *internal)
{
    struct l3cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->dirfd = c->lockfd = c->logfd = -1;
    c->opts = *opts;
    c->dir = strdup(opts->dir);
    c->opts.dir = c->dir;
    if (internal)
        c->in = *internal;
    if (!c->in.encode)
        c->in.encode = l3cache_default_encode;
    if (!c->in.check) {
        c->in.check = l3cache_default_check;
        if (!c->in.payload)
            c->in.payload = l3cache_default_payload;
    }
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
    if (opts->flags & L3CACHE_NO_BACKGROUND)
        c->in.no_background = 1;
    c->readonly = (opts->flags & L3CACHE_READONLY) != 0;
    if (opts->flags & L3CACHE_VERIFY_FULL)
        c->in.verify_full = 1;
    c->verify = c->in.verify_full ? VERIFY_ALWAYS
                : (opts->flags & L3CACHE_TRUST_STORAGE) ? VERIFY_TRUST
                                                        : VERIFY_AUTO;
    c->shared = (opts->flags & L3CACHE_SHARED) != 0;
    c->read_checks = (opts->flags & L3CACHE_READ_CHECKS) != 0;
    c->dir_mode = c->shared ? 0755 : 0700;
    c->file_mode = c->shared ? 0644 : 0600;
    if (!c->in.claim_beat_ms)
        c->in.claim_beat_ms = 1000;
    if (!c->in.claim_stale_ms)
        c->in.claim_stale_ms = 10000;
    if (!c->in.claim_wait_ms)
        c->in.claim_wait_ms = 120000;
    c->verified = calloc(L3CACHE_VSLOTS, sizeof(*c->verified));
    c->held_max = c->in.buffer_budget ? c->in.buffer_budget : (uint64_t)64 << 20;
    c->params_id = l3cache_params_id(c->in.format_version, &c->opts.encode);
    l3cache_host_name(c->host, sizeof(c->host));
    c->instance_id = l3cache_random_u64() | 1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->scan_mu, NULL);
    pthread_mutex_init(&c->pool_mu, NULL);
    pthread_cond_init(&c->flight_cv, NULL);
    pthread_cond_init(&c->bg_cv, NULL);
    if (!c->dir || !c->verified) {
        l3cache_close(c);
        return NULL;
    }
    return c;
}

/* The lock file (shared by every user of the directory for its lifetime,
 * exclusive only for compaction at open) and the index log. Sets *writable
 * to 0 when the directory cannot be written (a degraded, read-only cache);
 * returns whether this opener got the lock exclusively, or -errno. */
static int open_lock_and_log(struct l3cache *c, int *writable)
{
    if (*writable) {
        c->lockfd = openat(c->dirfd, L3CACHE_LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC,
                           c->file_mode);
        if (c->lockfd < 0 && !degrade_errno(errno))
            return -errno;
        if (c->lockfd < 0) {
            c->write_error = errno;
            *writable = 0;
        }
    }
    if (c->lockfd < 0)
        c->lockfd = openat(c->dirfd, L3CACHE_LOCK_NAME, O_RDONLY | O_CLOEXEC);
    int exclusive = c->lockfd >= 0 && *writable && flock(c->lockfd, LOCK_EX | LOCK_NB) == 0;
    if (*writable) {
        c->logfd = openat(c->dirfd, L3CACHE_LOG_NAME, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC,
                          c->file_mode);
        if (c->logfd < 0 && !degrade_errno(errno))
            return -errno;
        if (c->logfd < 0)
            c->write_error = errno;
        c->log_writable = c->logfd >= 0;
        *writable = c->log_writable;
    }
    if (c->logfd < 0)
        c->logfd = openat(c->dirfd, L3CACHE_LOG_NAME, O_RDONLY | O_CLOEXEC);
    return exclusive;
}

/* After the shared lock: the log may have been replaced by a compacting
 * opener meanwhile. */
static void follow_compacted_log(struct l3cache *c)
{
    struct stat a, b;
    if (fstat(c->logfd, &a) != 0 || fstatat(c->dirfd, L3CACHE_LOG_NAME, &b, 0) != 0 ||
        (a.st_ino == b.st_ino && a.st_dev == b.st_dev))
        return;
    int nfd = openat(c->dirfd, L3CACHE_LOG_NAME, O_RDWR | O_APPEND | O_CLOEXEC);
    if (nfd < 0)
        return;
    close(c->logfd);
    c->logfd = nfd;
    index_reset(c);
    index_tail(c);
}

/* A private cache that an earlier version made readable by others
 * (directories 0755, files 0644): what the cache owns is made private now,
 * objects/ 0700 (which puts every object out of others' reach), index.log
 * and lock 0600. Only entries of this user; the directory itself, which the
 * user may have made, is left as it is. */
static void make_private(struct l3cache *c)
{
    int ofd = openat(c->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fds[3] = {ofd, c->logfd, c->lockfd};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (fds[i] >= 0 && fstat(fds[i], &st) == 0 && st.st_uid == geteuid() &&
            (st.st_mode & 077) != 0)
            fchmod(fds[i], st.st_mode & 0700);
    }
    if (ofd >= 0)
        close(ofd);
}

static void write_cachedir_tag(struct l3cache *c)
{
    int tfd = openat(c->dirfd, "CACHEDIR.TAG", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    /* (the tag says only what the directory is: readable by all) */
    if (tfd < 0)
        return;
    if (l3cache_write_all(tfd, cachedir_tag, sizeof(cachedir_tag) - 1) != 0)
        unlinkat(c->dirfd, "CACHEDIR.TAG", 0);
    close(tfd);
}

int l3cache_open(const struct l3cache_options *opts, l3cache **cache_ret)
{
    return l3cache_open_internal(opts, NULL, cache_ret);
}

int l3cache_open_internal(const struct l3cache_options *opts,
                          const struct l3cache_internal *internal, l3cache **cache_ret)
{
    if (!opts || !opts->dir || !opts->dir[0] || !cache_ret)
        return -EINVAL;
    if (opts->fsync_policy < L3CACHE_FSYNC_NONE || opts->fsync_policy > L3CACHE_FSYNC_ALL)
        return -EINVAL;
    *cache_ret = NULL;
    struct l3cache *c = handle_new(opts, internal);
    if (!c)
        return -ENOMEM;
    int r = 0;
    if (!c->readonly && mkdir(c->dir, c->dir_mode) != 0 && errno != EEXIST &&
        errno != EROFS && errno != EACCES && errno != EPERM) {
        r = -errno;
        goto fail;
    }
    c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0) {
        r = -errno;
        goto fail;
    }
    int writable = !c->readonly;
    int exclusive = open_lock_and_log(c, &writable);
    if (exclusive < 0) {
        r = exclusive;
        goto fail;
    }
    index_tail(c);
    if (exclusive) {
        /* nobody else uses the directory: compact a grown log */
        if (c->log_bad_bytes > 0 || c->log_records > 2 * (uint64_t)c->nused + 1024)
            index_compact(c);
        sweep_root_temps(c);
    }
    if (c->lockfd >= 0) {
        /* exclusive to shared through an unlock: GlusterFS grants a waiting
         * shared lock at an unlock but not at a conversion (another opener
         * would wait until this one closes) */
        if (exclusive)
            flock(c->lockfd, LOCK_UN);
        flock(c->lockfd, LOCK_SH); /* blocks while another opener compacts */
    }
    if (c->log_writable)
        follow_compacted_log(c); /* another opener may have compacted meanwhile */
    if (writable && !c->shared)
        make_private(c);
    if (writable)
        write_cachedir_tag(c);
    else if (!c->readonly)
        stats_write_failure(c, c->write_error ? c->write_error : EROFS);
    /* The first walk of objects/ (stale temp files, object count, the cap)
     * runs in the background thread so that opening a large cache on a
     * slow filesystem does not wait for it. */
    c->first_sweep = writable;
    if (!c->in.no_background && pthread_create(&c->bg, NULL, background, c) == 0)
        c->bg_started = 1;
    else
        first_scan(c, 0);
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
        stats_flush(c);
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
    while (c->claims) { /* only left when a caller misused the API */
        struct claim *cl = c->claims;
        c->claims = cl->next;
        close(cl->fd);
        free(cl);
    }
    free(c->slots);
    free(c->verified);
    for (int i = 0; i < c->npool; i++)
        free(c->pool[i].buf);
    pthread_mutex_destroy(&c->pool_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->scan_mu);
    pthread_cond_destroy(&c->flight_cv);
    pthread_cond_destroy(&c->bg_cv);
    free(c->dir);
    free(c);
}
