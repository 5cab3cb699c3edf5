/* ctl.c — the hidden MOUNTPOINT/.l3fs directory: stats.json and metrics,
 * rendered from a snapshot of the counters at each open. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

static const char *const ctl_names[L3FS_CTL_FILES] = {"stats.json", "metrics"};

static void snapshot_fs(struct l3fs_daemon *d, struct l3fs_snapshot *s)
{
#define LOAD(field, prom, help) s->fs.field = __atomic_load_n(&d->c.field, __ATOMIC_RELAXED);
    L3FS_FS_COUNTERS(LOAD)
#undef LOAD
    pthread_mutex_lock(&d->timings_lock);
    s->encode_count = d->timings->count;
    s->encode_max_ns = d->timings->max_ns;
    s->encode_sum_ns = d->timings->sum_ns;
    s->encode_p50_ns = l3fs_timings_percentile(d->timings, 50);
    s->encode_p90_ns = l3fs_timings_percentile(d->timings, 90);
    s->encode_p99_ns = l3fs_timings_percentile(d->timings, 99);
    pthread_mutex_unlock(&d->timings_lock);
}

static void snapshot_cache(struct l3fs_daemon *d, struct l3fs_snapshot *s)
{
    struct l3cache_stats cs;
    if (l3cache_get_stats(d->cache, &cs) != 0)
        return;
    s->have_cache = 1;
    s->cache_instance = cs.instance;
    s->cache_total = cs.total;
    s->objects = cs.objects;
    s->object_bytes = cs.object_bytes;
    s->max_bytes = cs.max_bytes;
    s->writes_disabled = cs.writes_disabled;
}

char *ctl_render(struct l3fs_daemon *d, int id)
{
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = L3FS_VERSION_STRING;
    s.source = d->opts->source;
    s.mountpoint = d->opts->mountpoint;
    s.keep_names = d->opts->keep_names;
    s.cache_dir = d->opts->cache_dir;
    s.uptime_s = (double)l3fs_ns_since(&d->start) / 1e9;
    snapshot_fs(d, &s);
    snapshot_cache(d, &s);
    return id == 0 ? l3fs_render_json(&s) : l3fs_render_prometheus(&s);
}

void ctl_stat(struct l3fs_daemon *d, struct node *n, struct stat *st)
{
    memset(st, 0, sizeof *st);
    fstat(d->root.fd, st); /* owner and times of the source root */
    st->st_ino = 1 + (n == &d->ctl_dir ? 1 : 2 + (ino_t)n->ctl_id);
    st->st_ino |= L3_INO_BIT >> 1;
    if (n == &d->ctl_dir) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        st->st_size = 0;
    } else {
        /* Under allow_other the counters (encodes, bytes served: activity on
         * files some users may not see) are for the mount's owner alone. */
        st->st_mode = S_IFREG | (d->allow_other ? 0400 : 0444);
        if (d->allow_other) {
            st->st_uid = geteuid();
            st->st_gid = getegid();
        }
        st->st_nlink = 1;
        char *s = ctl_render(d, n->ctl_id);
        st->st_size = s ? (off_t)strlen(s) : 0;
        free(s);
    }
    st->st_blocks = 0;
}

int ctl_lookup(struct l3fs_daemon *d, struct node *p, const char *name,
               struct fuse_entry_param *e)
{
    struct node *n = NULL;
    if (p == &d->root && strcmp(name, L3FS_CTL_DIR) == 0) {
        n = &d->ctl_dir;
    } else if (p == &d->ctl_dir) {
        for (int i = 0; i < L3FS_CTL_FILES; i++)
            if (strcmp(name, ctl_names[i]) == 0)
                n = &d->ctl_files[i];
        if (!n)
            return -ENOENT;
    } else {
        return 1;
    }
    memset(e, 0, sizeof *e);
    e->ino = node_id(d, n);
    ctl_stat(d, n, &e->attr);
    return 0;
}

size_t ctl_readdir(struct l3fs_daemon *d, fuse_req_t req, char *buf, size_t size, off_t off,
                   int plus)
{
    size_t used = 0;
    for (off_t i = off; i < L3FS_CTL_FILES; i++) {
        struct stat st;
        ctl_stat(d, &d->ctl_files[i], &st);
        size_t sz;
        if (plus) {
            struct fuse_entry_param e = {.ino = 0, .attr = st};
            sz = fuse_add_direntry_plus(req, buf + used, size - used, ctl_names[i], &e, i + 1);
        } else {
            sz = fuse_add_direntry(req, buf + used, size - used, ctl_names[i], &st, i + 1);
        }
        if (sz > size - used)
            break;
        used += sz;
    }
    return used;
}
