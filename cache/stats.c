/* stats.c — the cache's counters: this handle's, their persistence as
 * statistics records in index.log, the directory's totals, and the
 * write-failure state (writes disabled for a while after a failure). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "handle.h"

void counters_add(struct l3cache_counters *a, const struct l3cache_counters *b, int sign)
{
#define ONE(name, desc) a->name = sign > 0 ? a->name + b->name : a->name - b->name;
    L3CACHE_COUNTERS(ONE)
#undef ONE
}

int counters_zero(const struct l3cache_counters *a)
{
#define ONE(name, desc) +(a->name != 0)
    return (0 L3CACHE_COUNTERS(ONE)) == 0;
#undef ONE
}

void stats_count(struct l3cache *c, uint64_t *counter, uint64_t v)
{
    pthread_mutex_lock(&c->mu);
    *counter += v;
    pthread_mutex_unlock(&c->mu);
}

void stats_flush(struct l3cache *c)
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
    s->write_error = c->writes_disabled ? c->write_error : 0;
    s->index_entries = c->nused;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void stats_write_failure(struct l3cache *c, int err)
{
    c->inst.write_failures++;
    /* a directory another client removed meanwhile (ENOENT, ESTALE) or a
     * name taken (EEXIST) is not a storage that refuses writes */
    if (err == ENOENT || err == ESTALE || err == EEXIST || err == EINTR || err == EAGAIN)
        return;
    c->writes_disabled = 1;
    c->write_error = err;
    c->disabled_at = time(NULL);
}

int stats_writes_allowed(struct l3cache *c)
{
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
