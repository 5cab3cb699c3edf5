/* read.c — reads of an open .l3: checked bytes, repair, read-ahead.
 *
 * An open .l3 serves one object (struct fobj: its descriptor and
 * l3cache_reader). Every read is checked since the bytes left the disk; a
 * read that finds the object corrupt, or its descriptor failing, swaps in a
 * correct copy for the handle (descriptor and reader as one) and
 * reads again. A read on range checksums is served without a copy where it
 * can be (l3cache_reader_splice: the object's pages, held by this worker's
 * pipe and hashed in place, spliced on to the kernel); the others from a
 * buffer of checked bytes, after which the reader checks the next range
 * ahead.
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

/* Each worker thread's memory for checked reads (freed when it exits): a
 * scratch buffer for copied reads, a pipe for the others. */
struct worker_mem {
    struct l3cache_scratch scratch;
    struct l3cache_pipe pipe;
};
static pthread_key_t mem_key;
static pthread_once_t mem_once = PTHREAD_ONCE_INIT;

static void mem_release(void *p)
{
    struct worker_mem *w = p;
    l3cache_scratch_free(&w->scratch);
    l3cache_pipe_free(&w->pipe);
    free(w);
}

static void mem_key_make(void)
{
    if (pthread_key_create(&mem_key, mem_release) != 0)
        abort();
}

/* Before a read of a .l3: the bytes it serves are checked since they left
 * the disk (l3cache_reader_read); a corrupt object (-EBADMSG), or one whose
 * descriptor fails (ENOENT, ESTALE: on a network filesystem another host
 * removed it before this host's open reached the server, as GlusterFS's
 * deferred opens allow), is replaced by a correct copy for this handle, whose
 * bytes are checked in turn. The object read (*obj_ret) and *n_ret: 0 (splice
 * from its descriptor), or the count of checked bytes, held by w->pipe when
 * *piped_ret, else at view->data (call l3cache_reader_done when served); or
 * -EIO. */
static int fh_read(struct l3fs_daemon *d, struct fh *h, off_t off, size_t size,
                   struct worker_mem *w, struct l3cache_view *view, ssize_t *n_ret,
                   int *piped_ret, struct fobj **obj_ret)
{
    for (int attempt = 0;; attempt++) {
        struct fobj *o = __atomic_load_n(&h->obj, __ATOMIC_ACQUIRE);
        ssize_t r = l3cache_reader_splice(o->rd, (uint64_t)off, size, &w->pipe);
        *piped_ret = r > 0;
        if (r == -EOPNOTSUPP)
            r = l3cache_reader_read(o->rd, (uint64_t)off, size, &w->scratch, view);
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

static struct worker_mem *worker_mem(void)
{
    pthread_once(&mem_once, mem_key_make);
    struct worker_mem *w = pthread_getspecific(mem_key);
    if (!w && (w = calloc(1, sizeof *w)) && pthread_setspecific(mem_key, w) != 0) {
        free(w);
        w = NULL;
    }
    return w;
}

void splice_reply(fuse_req_t req, int fd, off_t off, size_t size)
{
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* The n checked bytes that w's pipe holds, spliced on to the kernel with the
 * reply header (libfuse splices them from this pipe into its own, then to
 * /dev/fuse: the kernel copies them from the object's pages to the
 * reader's); what a failed reply left in the pipe is dropped. */
static void pipe_reply(fuse_req_t req, struct worker_mem *w, size_t n)
{
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(n);
    buf.buf[0].flags = FUSE_BUF_IS_FD; /* a pipe: no position */
    buf.buf[0].fd = w->pipe.fd[0];
    fuse_reply_data(req, &buf, 0);
    l3cache_pipe_reset(&w->pipe);
}

void read_l3(fuse_req_t req, struct l3fs_daemon *d, struct fh *h, size_t size, off_t off)
{
    struct worker_mem *w = worker_mem();
    struct l3cache_view view;
    struct fobj *o = NULL;
    ssize_t n = 0;
    int piped = 0;
    int r = w ? fh_read(d, h, off, size, w, &view, &n, &piped, &o) : -ENOMEM;
    if (r < 0) {
        fuse_reply_err(req, -r);
        return;
    }
    if ((uint64_t)off < h->size) {
        uint64_t k = h->size - (uint64_t)off;
        COUNT(d, bytes_served, k < size ? k : size);
    }
    if (piped) { /* the checked pages themselves */
        pipe_reply(req, w, (size_t)n);
        return;
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
