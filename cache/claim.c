/* claim.c — one encode per key for every process sharing the directory,
 * through the filesystem alone (no daemon-to-daemon protocol).
 *
 * Before encoding a key that is not stored, a process creates the claim file
 * objects/ab/<rest of the key>.claim with O_EXCL, writes its owner (host, pid,
 * instance) into it, and keeps it alive with a heartbeat: the background
 * thread moves its mtime every claim_beat_ms. It removes the claim after
 * storing the object (or failing). Another process that finds the claim waits
 * for the object, polling, and
 *   - serves it once it is stored;
 *   - claims the key itself when the claim disappears without an object;
 *   - takes the claim over when it is stale: its owner is a dead process of
 *     this host, or its mtime did not move for claim_stale_ms of the
 *     waiter's own clock (so no two hosts' clocks are compared);
 *   - gives up after claim_wait_ms and encodes anyway.
 * A claim that cannot be created at all (read-only or full filesystem) means
 * encoding without one. kill -9 of a claimant loses nothing: its claim goes
 * stale, its temp file is swept, and the waiters encode. Races between two
 * waiters taking over, or a claim removed by `cache clear`, can cost a
 * second encode of the same key, never a wrong object (objects are named by
 * their content).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

#define POLL_MIN_MS 5
#define POLL_MAX_MS 100

static void claim_paths(const struct l3cache_key *key, char rel[64], char sub[16])
{
    char hex[33];
    l3cache_key_hex(key, hex);
    snprintf(rel, 64, "objects/%.2s/%s.claim", hex, hex + 2);
    snprintf(sub, 16, "objects/%.2s", hex);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* 1 when the claim's owner is a process of this host that no longer exists. */
static int owner_dead(struct l3cache *c, const char *rel)
{
    int fd = openat(c->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char host[80];
    long pid;
    if (sscanf(buf, "l3cache-claim 1 %79s %ld", host, &pid) != 2 || pid <= 0)
        return 0;
    return strcmp(host, c->host) == 0 && pid != getpid() && kill((pid_t)pid, 0) != 0 &&
           errno == ESRCH;
}

/* Removes a stale claim: renamed aside first (only one of several waiters
 * that judge it stale at once succeeds), then unlinked. */
static void take_over(struct l3cache *c, const char *rel, const struct stat *seen)
{
    struct stat now;
    if (fstatat(c->dirfd, rel, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != seen->st_ino ||
        now.st_dev != seen->st_dev)
        return; /* gone or replaced by a live claim meanwhile */
    char aside[96];
    snprintf(aside, sizeof aside, "%s.stale-%016llx", rel,
             (unsigned long long)l3cache_random_u64());
    if (renameat(c->dirfd, rel, c->dirfd, aside) == 0) {
        unlinkat(c->dirfd, aside, 0);
        stats_count(c, &c->inst.claim_takeovers, 1);
    }
}

static int claim_create(struct l3cache *c, const char *sub, const char *rel,
                        struct claim **claim_ret)
{
    int fd = object_create(c, sub, rel, O_RDWR);
    if (fd < 0)
        return fd;
    char owner[160];
    int n = snprintf(owner, sizeof owner, "l3cache-claim 1 %s %ld %016llx\n", c->host,
                     (long)getpid(), (unsigned long long)c->instance_id);
    struct stat st;
    struct claim *cl = calloc(1, sizeof *cl);
    if (!cl || l3cache_write_all(fd, owner, (size_t)n) != 0 || fstat(fd, &st) != 0) {
        free(cl);
        close(fd);
        unlinkat(c->dirfd, rel, 0);
        return -EIO;
    }
    cl->fd = fd;
    cl->dev = st.st_dev;
    cl->ino = st.st_ino;
    snprintf(cl->rel, sizeof cl->rel, "%s", rel);
    pthread_mutex_lock(&c->mu);
    cl->next = c->claims;
    c->claims = cl;
    pthread_cond_signal(&c->bg_cv); /* the heartbeat starts now */
    pthread_mutex_unlock(&c->mu);
    *claim_ret = cl;
    return 0;
}

/* What a waiter remembers of the claim it watches. */
struct watch {
    struct stat seen;
    uint64_t seen_at;  /* l3cache_now_ms() when seen's mtime/inode was first seen */
    int have;
};

/* 1 when the claim at rel is stale (the owner is gone or silent). */
static int claim_stale(struct l3cache *c, const char *rel, const struct stat *st,
                       struct watch *w, uint64_t now)
{
    if (!w->have || st->st_ino != w->seen.st_ino || st->st_dev != w->seen.st_dev ||
        st->st_mtim.tv_sec != w->seen.st_mtim.tv_sec ||
        st->st_mtim.tv_nsec != w->seen.st_mtim.tv_nsec) {
        w->seen = *st;
        w->seen_at = now;
        w->have = 1;
        return owner_dead(c, rel);
    }
    return now - w->seen_at >= c->in.claim_stale_ms || owner_dead(c, rel);
}

int claim_acquire(struct l3cache *c, const struct l3cache_key *key, struct claim **claim_ret,
                  int *fd_ret, uint64_t *size_ret)
{
    *claim_ret = NULL;
    if (c->in.no_claims || c->readonly)
        return CLAIM_NONE;
    char rel[64], sub[16];
    claim_paths(key, rel, sub);
    uint64_t start = l3cache_now_ms();
    unsigned poll = POLL_MIN_MS;
    struct watch w = {.have = 0};
    int waited = 0;
    for (;;) {
        int r = claim_create(c, sub, rel, claim_ret);
        if (r == 0) {
            /* the previous owner may have stored it and let go just before */
            if (object_open(c, key, fd_ret, size_ret) != 0)
                return CLAIM_OWNED;
            claim_release(c, *claim_ret);
            *claim_ret = NULL;
            return CLAIM_STORED;
        }
        if (r != -EEXIST)
            return CLAIM_NONE; /* cannot claim here: encode without */
        if (!waited) {
            waited = 1;
            stats_count(c, &c->inst.claim_waits, 1);
        }
        if (object_open(c, key, fd_ret, size_ret) == 0)
            return CLAIM_STORED;
        struct stat st;
        uint64_t now = l3cache_now_ms();
        if (fstatat(c->dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT || now - start >= c->in.claim_wait_ms)
                return CLAIM_NONE;
            continue; /* released without an object: claim it */
        }
        if (claim_stale(c, rel, &st, &w, now)) {
            take_over(c, rel, &st);
            w.have = 0;
            continue;
        }
        if (now - start >= c->in.claim_wait_ms)
            return CLAIM_NONE;
        sleep_ms(poll);
        poll = poll * 2 > POLL_MAX_MS ? POLL_MAX_MS : poll * 2;
    }
}

void claim_release(struct l3cache *c, struct claim *cl)
{
    if (!cl)
        return;
    pthread_mutex_lock(&c->mu);
    for (struct claim **pp = &c->claims; *pp; pp = &(*pp)->next)
        if (*pp == cl) {
            *pp = cl->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    struct stat now;
    if (fstatat(c->dirfd, cl->rel, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == cl->ino &&
        now.st_dev == cl->dev)
        unlinkat(c->dirfd, cl->rel, 0); /* still ours (not taken over, not cleared) */
    close(cl->fd);
    free(cl);
}

void claims_beat(struct l3cache *c)
{
    struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    pthread_mutex_lock(&c->mu);
    for (struct claim *cl = c->claims; cl; cl = cl->next)
        futimens(cl->fd, ts);
    pthread_mutex_unlock(&c->mu);
}
