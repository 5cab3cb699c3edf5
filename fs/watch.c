/* watch.c — source watching.
 *
 * Directories the kernel knows are watched with inotify (when the source
 * filesystem supports it). A change of an entry invalidates the kernel's
 * dentries of every name it can affect, so the next access looks it up
 * again: changes show at once instead of after the timeouts. Sources on
 * network filesystems changed by other hosts are not seen by inotify and
 * rely on --timeout/--dir-timeout.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "daemon.h"

#define WATCH_MASK                                                                        \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE |   \
     IN_ONLYDIR)

void watch_add_locked(struct l3fs_daemon *d, struct node *n)
{
    struct watcher *w = &d->watch;
    n->wd = -1;
    if (w->fd < 0)
        return;
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", n->fd);
    int wd = inotify_add_watch(w->fd, p, WATCH_MASK);
    if (wd < 0) {
        if (!w->warned) {
            w->warned = 1;
            LOG_W("cannot watch %s for changes (%s): relying on the timeouts there and below",
                  n->relpath[0] ? n->relpath : ".", strerror(errno));
        }
        return;
    }
    n->wd = wd;
    struct node **b = &w->by_wd[(unsigned)wd % L3FS_WD_BUCKETS];
    n->wd_next = *b;
    *b = n;
}

void watch_unlink_locked(struct l3fs_daemon *d, struct node *n, int rm)
{
    struct watcher *w = &d->watch;
    if (n->wd < 0)
        return;
    struct node **pp = &w->by_wd[(unsigned)n->wd % L3FS_WD_BUCKETS];
    while (*pp && *pp != n)
        pp = &(*pp)->wd_next;
    if (*pp)
        *pp = n->wd_next;
    if (rm && w->fd >= 0)
        inotify_rm_watch(w->fd, n->wd);
    n->wd = -1;
}

static void inval_entry(struct l3fs_daemon *d, fuse_ino_t parent, const char *name)
{
    int r = fuse_lowlevel_notify_inval_entry(d->se, parent, name, strlen(name));
    if (r < 0 && r != -ENOENT)
        LOG_D("invalidate %s: %s", name, strerror(-r));
}

/* Every visible name a change of source entry NAME can affect. */
static void inval_names(struct l3fs_daemon *d, fuse_ino_t parent, const char *name)
{
    size_t stem;
    char l3[256];
    char v[8][256];
    inval_entry(d, parent, name);
    if (l3fs_has_png_ext(name, &stem)) {
        if (l3fs_l3_name(name, l3) == 0)
            inval_entry(d, parent, l3);
    } else if (l3fs_has_l3_ext(name, &stem) && l3fs_png_variants(name, stem, v) == 0) {
        for (int k = 0; k < 8; k++)
            inval_entry(d, parent, v[k]);
    }
}

/* One event: the directory node it belongs to (none when the kernel dropped
 * the watch), then the names it can affect. */
static void watch_event(struct l3fs_daemon *d, const struct inotify_event *ev)
{
    struct watcher *w = &d->watch;
    if (ev->mask & IN_Q_OVERFLOW) {
        LOG_D("change notifications overflowed: the timeouts apply");
        return;
    }
    fuse_ino_t parent = 0;
    pthread_mutex_lock(&d->table_lock);
    struct node *n = w->by_wd[(unsigned)ev->wd % L3FS_WD_BUCKETS];
    while (n && n->wd != ev->wd)
        n = n->wd_next;
    if (n && (ev->mask & IN_IGNORED))
        watch_unlink_locked(d, n, 0); /* the kernel dropped the watch */
    else if (n)
        parent = node_id(d, n);
    pthread_mutex_unlock(&d->table_lock);
    if (parent && ev->len && ev->name[0])
        inval_names(d, parent, ev->name);
}

static void *watch_main(void *arg)
{
    struct l3fs_daemon *d = arg;
    struct watcher *w = &d->watch;
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN}, {.fd = w->stop_fd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        ssize_t len = read(w->fd, buf, sizeof buf);
        if (len <= 0)
            continue;
        for (char *q = buf; q < buf + len;) {
            struct inotify_event *ev = (struct inotify_event *)(void *)q;
            q += sizeof *ev + ev->len;
            watch_event(d, ev);
        }
    }
    return NULL;
}

static void watch_close(struct watcher *w)
{
    if (w->fd >= 0)
        close(w->fd); /* drops every watch */
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    w->fd = w->stop_fd = -1;
}

void watch_start(struct l3fs_daemon *d)
{
    struct watcher *w = &d->watch;
    if (d->opts->no_watch)
        return;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (w->fd < 0 || w->stop_fd < 0) {
        LOG_W("no change notifications (%s): relying on the timeouts", strerror(errno));
        goto fail;
    }
    pthread_mutex_lock(&d->table_lock);
    watch_add_locked(d, &d->root);
    pthread_mutex_unlock(&d->table_lock);
    if (pthread_create(&w->thread, NULL, watch_main, d) != 0) {
        LOG_W("cannot start the change watcher: relying on the timeouts");
        goto fail;
    }
    w->running = 1;
    return;
fail:
    pthread_mutex_lock(&d->table_lock);
    watch_unlink_locked(d, &d->root, 0);
    pthread_mutex_unlock(&d->table_lock);
    watch_close(w);
}

void watch_stop(struct l3fs_daemon *d)
{
    struct watcher *w = &d->watch;
    if (w->running) {
        uint64_t one = 1;
        if (write(w->stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
            LOG_W("cannot stop the change watcher");
        pthread_join(w->thread, NULL);
        w->running = 0;
    }
    watch_close(w);
}
