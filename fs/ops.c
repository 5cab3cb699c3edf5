/* ops.c — the FUSE low-level operations of l3fs; the ops table is at the end.
 *
 * Every op finds the daemon through fuse_req_userdata() and works on the
 * nodes of node.c; what is particular to encoded files is in encoded.c, to
 * reading an open .l3 in read.c, to directories in dir.c, to the control
 * files in ctl.c. The filesystem is read-only: every op that would change
 * something answers EROFS.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "daemon.h"

static struct l3fs_daemon *daemon_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static double timeout_for(struct l3fs_daemon *d, int kind)
{
    return kind == NK_L3 ? d->opts->timeout : d->opts->dir_timeout;
}

static void fh_put(struct fh *h)
{
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (h->fd >= 0)
        close(h->fd);
    fobj_free(h->obj);
    for (int i = 0; i < h->nold; i++)
        fobj_free(h->old[i]);
    if (h->kind == NK_L3)
        pthread_mutex_destroy(&h->lock);
    free(h->buf);
    free(h);
}

/* -------------------------------------------------------------- lookup */

/* Which source entry a name in directory p stands for: *srcname_ret and the
 * kind (NK_L3 when a PNG is shown under this .l3 name). -ENOENT for a PNG's
 * own name when it is shown as .l3. */
static int lookup_source_name(struct l3fs_daemon *d, struct node *p, const char *name,
                              char srcbuf[256], const char **srcname_ret)
{
    struct l3fs_probe probe;
    struct probe_ctx pc;
    probe_init(d, &probe, &pc, p->fd, p->relpath);
    *srcname_ret = name;
    if (d->opts->keep_names) { /* a qualifying PNG keeps its name, with L3 bytes */
        int q = l3fs_has_png_ext(name, NULL) && probe.qualifies(probe.ctx, name);
        probe_done(&pc);
        return q ? NK_L3 : NK_SRC;
    }
    if (l3fs_has_l3_ext(name, NULL)) {
        int r = l3fs_resolve_l3(&probe, name, srcbuf);
        if (r < 0)
            return r;
        if (r == L3FS_L3_ENCODED) {
            *srcname_ret = srcbuf;
            return NK_L3;
        }
    } else if (l3fs_has_png_ext(name, NULL) && l3fs_png_shown_as_l3(&probe, name)) {
        return -ENOENT; /* visible as STEM.l3 only */
    }
    return NK_SRC;
}

/* The node of source entry srcname in p (a reference taken), as seen now. */
static int lookup_node(struct l3fs_daemon *d, struct node *p, const char *srcname, int kind,
                       struct seen *sn, struct node **n_ret)
{
    int fd = l3fs_open_entry(p->fd, srcname, sn);
    if (fd < 0)
        return fd;
    if (kind == NK_L3 && !S_ISREG(sn->st.st_mode)) { /* replaced meanwhile */
        close(fd);
        return -ENOENT;
    }
    *n_ret = node_ref(d, fd, sn, kind, p, srcname);
    return *n_ret ? 0 : -ENOMEM;
}

/* Looks NAME up in directory P; fills e and takes a node reference. */
static int do_lookup(struct l3fs_daemon *d, struct node *p, const char *name,
                     struct fuse_entry_param *e)
{
    int r = ctl_lookup(d, p, name, e);
    if (r <= 0)
        return r;
    memset(e, 0, sizeof *e);
    if (p->kind != NK_SRC || !S_ISDIR(p->mode))
        return -ENOTDIR;
    if (strlen(name) > 255)
        return -ENAMETOOLONG;
    char srcbuf[256];
    const char *srcname;
    int kind = lookup_source_name(d, p, name, srcbuf, &srcname);
    if (kind < 0)
        return kind;
    struct seen sn;
    struct node *n;
    if ((r = lookup_node(d, p, srcname, kind, &sn, &n)) < 0)
        return r;
    struct stat st = sn.st;
    if (kind == NK_L3) {
        /* The source changed while the node's version is open: that node
         * stays with its readers; this name gets a node for the new version. */
        if (l3_held_by_readers(n, &sn.id)) {
            node_retire(d, n);
            node_unref(d, n, 1);
            if ((r = lookup_node(d, p, srcname, kind, &sn, &n)) < 0)
                return r;
        }
        if ((r = l3_refresh(d, n, &st)) < 0) {
            node_unref(d, n, 1);
            return r;
        }
    }
    e->ino = node_id(d, n);
    e->attr = st;
    e->attr_timeout = timeout_for(d, kind);
    e->entry_timeout = timeout_for(d, kind);
    return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct l3fs_daemon *d = daemon_of(req);
    struct fuse_entry_param e;
    COUNT(d, lookups, 1);
    int r = do_lookup(d, node_of(d, parent), name, &e);
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct l3fs_daemon *d = daemon_of(req);
    node_unref(d, node_of(d, ino), nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    struct l3fs_daemon *d = daemon_of(req);
    for (size_t i = 0; i < count; i++)
        node_unref(d, node_of(d, f[i].ino), f[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct l3fs_daemon *d = daemon_of(req);
    struct node *n = node_of(d, ino);
    struct stat st;
    if (n->kind == NK_CTL_DIR || n->kind == NK_CTL_FILE) {
        ctl_stat(d, n, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    struct seen sn;
    int r = n->kind == NK_L3 ? l3_refresh(d, n, &st) : node_stat(d, n, &sn);
    if (n->kind != NK_L3)
        st = sn.st;
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_attr(req, &st, timeout_for(d, n->kind));
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct l3fs_daemon *d = daemon_of(req);
    struct node *n = node_of(d, ino);
    if (n->kind != NK_SRC || !S_ISLNK(n->mode)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    char buf[PATH_MAX + 1];
    struct seen sn;
    int fd = node_open_path(d, n, &sn);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    ssize_t r = readlinkat(fd, "", buf, sizeof buf);
    int e = errno;
    close(fd);
    if (r < 0) {
        fuse_reply_err(req, e);
        return;
    }
    if ((size_t)r >= sizeof buf) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    buf[r] = '\0';
    fuse_reply_readlink(req, buf);
}

/* ---------------------------------------------------------------- open */

static int open_ctl(struct l3fs_daemon *d, struct node *n, struct fh *h,
                    struct fuse_file_info *fi)
{
    if (!(h->buf = ctl_render(d, n->ctl_id)))
        return -ENOMEM;
    h->len = strlen(h->buf);
    fi->direct_io = 1; /* content changes at every open */
    return 0;
}

static int open_src(struct l3fs_daemon *d, struct node *n, struct fh *h)
{
    if (!S_ISREG(n->mode))
        return S_ISDIR(n->mode) ? -EISDIR : -EACCES;
    struct seen sn;
    h->fd = node_open_rdonly(d, n, &sn);
    return h->fd < 0 ? h->fd : 0;
}

/* An encoded file: serve the object whose size the kernel knows. */
static int open_l3(struct l3fs_daemon *d, struct node *n, struct fh *h,
                   struct fuse_file_info *fi)
{
    COUNT(d, l3_opens, 1);
    int miss = 0, keep = 0, fd = -1;
    pthread_mutex_init(&h->lock, NULL);
    int r = l3_open(d, n, &fd, &h->size, &h->key, &miss, &keep);
    if (r < 0)
        return r;
    if (!(h->obj = fobj_new(d, &h->key, fd))) {
        l3_closed(d, n);
        return -ENOMEM;
    }
    h->node = n;
    if (miss)
        COUNT(d, l3_open_misses, 1);
    else
        COUNT(d, l3_open_hits, 1);
    fi->keep_cache = keep;
    return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct l3fs_daemon *d = daemon_of(req);
    struct node *n = node_of(d, ino);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_APPEND | O_CREAT))) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (n->kind == NK_CTL_DIR) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    struct fh *h = calloc(1, sizeof *h);
    if (!h) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    h->kind = n->kind;
    h->fd = -1;
    h->refs = 1;
    int r = n->kind == NK_CTL_FILE ? open_ctl(d, n, h, fi)
            : n->kind == NK_SRC    ? open_src(d, n, h)
                                   : open_l3(d, n, h, fi);
    if (r < 0) {
        fh_put(h);
        fuse_reply_err(req, -r);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted: no RELEASE will come */
        if (h->node)
            l3_closed(d, h->node);
        fh_put(h);
    }
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct l3fs_daemon *d = daemon_of(req);
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (h->kind == NK_CTL_FILE) {
        /* The reader may close (and RELEASE arrive) as soon as the kernel
         * has the reply, before fuse_reply_buf returns: hold the buffer. */
        __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
        size_t o = (size_t)off < h->len ? (size_t)off : h->len;
        size_t k = h->len - o < size ? h->len - o : size;
        fuse_reply_buf(req, h->buf + o, k);
        fh_put(h);
        return;
    }
    if (h->kind == NK_L3) {
        /* held past the reply (RELEASE may come as soon as the kernel has
         * it): the buffer it came from is handed back and read ahead after */
        __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
        read_l3(req, d, h, size, off);
        fh_put(h);
        return;
    }
    COUNT(d, passthrough_bytes, size); /* upper bound; the file may be shorter */
    splice_reply(req, h->fd, off, size);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct l3fs_daemon *d = daemon_of(req);
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (h && h->node)
        l3_closed(d, h->node);
    if (h)
        fh_put(h);
    fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------- readdir */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct l3fs_daemon *d = daemon_of(req);
    struct dirh *dh;
    int err = dirh_open(d, node_of(d, ino), &dh);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)dh;
    fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
}

static void reply_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
                          int plus)
{
    struct l3fs_daemon *d = daemon_of(req);
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = dirh_read(d, (struct dirh *)(uintptr_t)fi->fh, req, buf, size, off, plus);
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)ino;
    reply_readdir(req, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)ino;
    reply_readdir(req, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    dirh_free((struct dirh *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs sv;
    if (fstatvfs(daemon_of(req)->root.fd, &sv) < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_statfs(req, &sv);
}

/* ------------------------------------------------------ read-only: EROFS */

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int to_set,
                       struct fuse_file_info *fi)
{
    (void)ino, (void)a, (void)to_set, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t r)
{
    (void)p, (void)n, (void)m, (void)r;
    fuse_reply_err(req, EROFS);
}
static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
    (void)p, (void)n, (void)m;
    fuse_reply_err(req, EROFS);
}
static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
    (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
    (void)l, (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np,
                      const char *nn, unsigned int f)
{
    (void)p, (void)n, (void)np, (void)nn, (void)f;
    fuse_reply_err(req, EROFS);
}
static void op_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn)
{
    (void)i, (void)np, (void)nn;
    fuse_reply_err(req, EROFS);
}
static void op_write(fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o,
                     struct fuse_file_info *fi)
{
    (void)i, (void)b, (void)s, (void)o, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s,
                        int f)
{
    (void)i, (void)n, (void)v, (void)s, (void)f;
    fuse_reply_err(req, EROFS);
}
static void op_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
    (void)i, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
                      struct fuse_file_info *fi)
{
    (void)p, (void)n, (void)m, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_fallocate(fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l,
                         struct fuse_file_info *fi)
{
    (void)i, (void)m, (void)o, (void)l, (void)fi;
    fuse_reply_err(req, EROFS);
}

/* ---------------------------------------------------------------- init */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
    if (conn->capable & FUSE_CAP_READDIRPLUS) {
        conn->want |= FUSE_CAP_READDIRPLUS;
        conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO; /* sizes from the index in one pass */
    }
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
        conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    /* RELEASE (and async READ) are background requests; with the kernel's
     * default of 12 in flight, releases queue up behind a stream of opens
     * and every queued one keeps an object descriptor open here (thousands
     * under 64 readers, up to EMFILE). */
    conn->max_background = 256;
    conn->congestion_threshold = 192;
}

const struct fuse_lowlevel_ops l3fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_unlink,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .write = op_write,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
    .create = op_create,
    .fallocate = op_fallocate,
};
