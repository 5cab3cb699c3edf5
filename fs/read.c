/* read.c — reads of an open .l3: checked bytes, repair, read-ahead.
 *
 * An open .l3 serves one object (struct fobj: its descriptor and
 * l3cache_reader). Every read is checked since the bytes left the disk; a
 * read that finds the object corrupt, or its descriptor failing, swaps in a
 * correct copy for the handle (descriptor and reader as one) and
 * reads again. After the reply the reader checks the next range ahead.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon.h"

/* The object an open .l3 serves: its descriptor and checked-read state
 * (l3cache_reader: range checksums loaded once; it maps the object itself
 * only when it must check it whole). */
struct fobj {
    int fd;
    l3cache_reader *rd;
};

struct fobj *fobj_new(struct l3fs_daemon *d, const struct l3cache_key *key, int fd)
{
    struct fobj *o = calloc(1, sizeof *o);
    if (!o) {
        close(fd);
        return NULL;
    }
    o->fd = fd;
    if (l3cache_reader_open(d->cache, key, fd, NULL, &o->rd) != 0) {
        close(fd);
        free(o);
        return NULL;
    }
    return o;
}

void fobj_free(struct fobj *o)
{
    if (!o)
        return;
    l3cache_reader_free(o->rd);
    close(o->fd);
    free(o);
}

/* Before a read of a .l3: the bytes it serves are checked since they left
 * the disk (l3cache_reader_read); a corrupt object (-EBADMSG), or one whose
 * descriptor fails (ENOENT, ESTALE: on a network filesystem another host
 * removed it before this host's open reached the server, as GlusterFS's
 * deferred opens allow), is replaced by a correct copy for this handle, whose
 * bytes are checked in turn. The object read (*obj_ret) and *n_ret: 0 (splice
 * from its descriptor) or the count of checked bytes at view->data (call
 * l3cache_reader_done when served); or -EIO. */
static int fh_read(struct l3fs_daemon *d, struct fh *h, off_t off, size_t size,
                   struct l3cache_scratch *scratch, struct l3cache_view *view, ssize_t *n_ret,
                   struct fobj **obj_ret)
{
    for (int attempt = 0;; attempt++) {
        struct fobj *o = __atomic_load_n(&h->obj, __ATOMIC_ACQUIRE);
        ssize_t r = l3cache_reader_read(o->rd, (uint64_t)off, size, scratch, view);
        if (r >= 0) {
            *n_ret = r;
            *obj_ret = o;
            return 0;
        }
        if (attempt == 2)
            return -EIO;
        pthread_mutex_lock(&h->lock);
        int ok = 1, nfd = -1;
        struct fobj *no;
        if (__atomic_load_n(&h->obj, __ATOMIC_ACQUIRE) != o) {
            /* another read repaired it meanwhile */
        } else if (h->nold < 4 &&
                   l3_reopen(d, h->node, &h->key, h->size, r == -EBADMSG, &nfd) == 0 &&
                   (no = fobj_new(d, &h->key, nfd))) {
            h->old[h->nold++] = o;
            __atomic_store_n(&h->obj, no, __ATOMIC_RELEASE);
        } else {
            ok = 0;
        }
        pthread_mutex_unlock(&h->lock);
        if (!ok)
            return -EIO;
    }
}

/* Each worker thread's memory for checked reads (freed when it exits). */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_release(void *p)
{
    l3cache_scratch_free(p);
    free(p);
}

static void scratch_key_make(void)
{
    if (pthread_key_create(&scratch_key, scratch_release) != 0)
        abort();
}

static struct l3cache_scratch *read_scratch(void)
{
    pthread_once(&scratch_once, scratch_key_make);
    struct l3cache_scratch *s = pthread_getspecific(scratch_key);
    if (!s && (s = calloc(1, sizeof *s)) && pthread_setspecific(scratch_key, s) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

void splice_reply(fuse_req_t req, int fd, off_t off, size_t size)
{
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void read_l3(fuse_req_t req, struct l3fs_daemon *d, struct fh *h, size_t size, off_t off)
{
    struct l3cache_scratch *scratch = read_scratch();
    struct l3cache_view view;
    struct fobj *o = NULL;
    ssize_t n = 0;
    int r = scratch ? fh_read(d, h, off, size, scratch, &view, &n, &o) : -ENOMEM;
    if (r < 0) {
        fuse_reply_err(req, -r);
        return;
    }
    if ((uint64_t)off < h->size) {
        uint64_t k = h->size - (uint64_t)off;
        COUNT(d, bytes_served, k < size ? k : size);
    }
    if (n > 0) { /* read for this reply and checked: these bytes */
        fuse_reply_buf(req, view.data, (size_t)n);
        l3cache_reader_done(o->rd, &view);
        /* the next range of a sequential reader, checked while the
         * kernel hands this reply over and asks for it */
        l3cache_reader_ahead(o->rd, (uint64_t)off + (uint64_t)n, size);
        return;
    }
    splice_reply(req, o->fd, off, size);
}
