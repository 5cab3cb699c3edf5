/* transcode.c — PNG -> L3 in one call, with PNG decoding and tile encoding
 * overlapped.
 *
 * A non-interlaced PNG is decoded row by row on the calling thread into one
 * pixel buffer for the whole image; each time a band of tile_height rows is
 * complete, worker threads may encode that band's tiles while the next band
 * is being decoded. Tiles are encoded by the encoder's own per-tile function
 * into the encoder's own slots and assembled by the encoder, so the file is
 * byte for byte the one l3_encode writes for the same pixels and options.
 *
 * Interlaced (Adam7) images only have their final rows after the last pass,
 * palette images may extend their palette after the last row (indices past
 * PLTE), and one thread has nothing to overlap: these are decoded whole and
 * then encoded with l3_encode.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "l3_internal.h"

struct pipe {
    struct l3_enc *enc;
    uint32_t tiles_x, tile_h, height;
    uint64_t tiles;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t rows_ready; /* rows [0, rows_ready) are decoded */
    uint64_t next;       /* next tile to hand out */
    int stop;            /* decoding failed: workers leave */
    int status;          /* first tile error */
};

struct worker {
    struct pipe *p;
    unsigned id;
};

/* Takes tiles in order; waits until the rows under a tile are decoded. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct pipe *p = w->p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->stop || p->status != L3_OK || p->next >= p->tiles)
            break;
        uint64_t t = p->next;
        uint32_t ty = (uint32_t)(t / p->tiles_x);
        uint64_t need = (uint64_t)(ty + 1) * p->tile_h;
        if (need > p->height)
            need = p->height;
        if (p->rows_ready < need) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        p->next++;
        pthread_mutex_unlock(&p->mu);
        int st = l3_enc_tile(p->enc, w->id, t);
        pthread_mutex_lock(&p->mu);
        if (st != L3_OK && p->status == L3_OK) {
            p->status = st;
            pthread_cond_broadcast(&p->cv);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Decodes the rest of the image band by band while `threads` workers encode.
 * Returns a status; on success every tile is encoded. */
static int pipeline(struct l3_png_reader *r, struct l3_enc *enc, unsigned char **rows)
{
    const struct l3_info *ei = l3_enc_info(enc);
    struct pipe p;
    memset(&p, 0, sizeof p);
    p.enc = enc;
    p.tiles_x = ei->tiles_x;
    p.tile_h = ei->tile_height;
    p.height = ei->height;
    p.tiles = l3_enc_tiles(enc);
    if (pthread_mutex_init(&p.mu, NULL) != 0)
        return L3_ERR_THREAD;
    if (pthread_cond_init(&p.cv, NULL) != 0) {
        pthread_mutex_destroy(&p.mu);
        return L3_ERR_THREAD;
    }
    unsigned n = l3_enc_threads(enc);
    pthread_t tid[256];
    struct worker w[256];
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++) {
        w[i].p = &p;
        w[i].id = i;
        if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    int st = L3_OK;
    /* decode on this thread, one band at a time */
    for (uint32_t y = 0; y < p.height && st == L3_OK;) {
        uint32_t k = p.height - y < p.tile_h ? p.height - y : p.tile_h;
        st = l3_png_reader_rows(r, rows + y, k);
        if (st != L3_OK)
            break;
        y += k;
        pthread_mutex_lock(&p.mu);
        p.rows_ready = y;
        if (p.status != L3_OK)
            st = p.status;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
    }
    if (st == L3_OK)
        st = l3_png_reader_finish(r, NULL, 0);
    pthread_mutex_lock(&p.mu);
    if (st != L3_OK)
        p.stop = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    /* no worker could start: encode the tiles here (worker 0's scratch) */
    if (started == 0 && st == L3_OK) {
        w[0].p = &p;
        w[0].id = 0;
        worker_main(&w[0]);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (st == L3_OK)
        st = p.status;
    if (st == L3_OK && p.next < p.tiles)
        st = L3_ERR_THREAD; /* not reached: every worker runs until the last tile */
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    return st;
}

static int transcode(const void *png, size_t png_size, int fd,
                     const struct l3_encode_options *opts, void **out_ret, size_t *size_ret)
{
    struct l3_png_reader *r = NULL;
    int st = l3_png_reader_open(png, png_size, fd, opts ? &opts->limits : NULL, &r);
    if (st != L3_OK)
        return st;
    const struct l3_info *info = l3_png_reader_info(r);
    const size_t row = (size_t)info->width * info->channels * (info->bit_depth == 16 ? 2u : 1u);
    const size_t size = row * info->height;
    unsigned char *pixels = malloc(size);
    unsigned char **rows = malloc(sizeof *rows * info->height);
    if (pixels == NULL || rows == NULL) {
        st = L3_ERR_NOMEM;
        goto out;
    }
    for (uint32_t y = 0; y < info->height; y++)
        rows[y] = pixels + (size_t)y * row;

    const unsigned threads = opts && opts->threads ? opts->threads : 1;
    if (threads >= 2 && !l3_png_reader_interlaced(r) && info->color != L3_COLOR_PALETTE) {
        struct l3_enc *enc = NULL;
        /* the encoder's checks and allocations happen before any pixel data
         * is read, with the same outcome as l3_encode after a full decode
         * (the description of a non-palette image does not change) */
        st = l3_enc_begin(info, pixels, 0, opts, &enc);
        if (st == L3_OK && l3_enc_threads(enc) >= 2) {
            st = pipeline(r, enc, rows);
            if (st == L3_OK)
                st = l3_enc_finish(enc, out_ret, size_ret);
            l3_enc_free(enc);
            goto out;
        }
        l3_enc_free(enc); /* one tile: nothing to overlap */
        if (st != L3_OK) {
            /* l3_encode would only have failed after a full decode: decode
             * first so that a corrupt PNG is still reported as such */
            int rs = l3_png_reader_image(r, rows);
            if (rs == L3_OK)
                rs = l3_png_reader_finish(r, pixels, size);
            if (rs != L3_OK)
                st = rs;
            goto out;
        }
    }
    st = l3_png_reader_image(r, rows);
    if (st == L3_OK)
        st = l3_png_reader_finish(r, pixels, size);
    if (st == L3_OK)
        st = l3_encode(l3_png_reader_info(r), pixels, 0, opts, out_ret, size_ret);
out:
    free(rows);
    free(pixels);
    l3_png_reader_close(r);
    return st;
}

int l3_transcode_png(const void *png, size_t png_size,
                     const struct l3_encode_options *opts, void **out_ret,
                     size_t *size_ret)
{
    if (out_ret == NULL)
        return L3_ERR_INVALID_ARG;
    *out_ret = NULL;
    if (size_ret)
        *size_ret = 0;
    if (png == NULL && png_size != 0)
        return L3_ERR_INVALID_ARG;
    return transcode(png, png_size, -1, opts, out_ret, size_ret);
}

int l3_transcode_png_fd(int fd, const struct l3_encode_options *opts,
                        void **out_ret, size_t *size_ret)
{
    if (out_ret == NULL)
        return L3_ERR_INVALID_ARG;
    *out_ret = NULL;
    if (size_ret)
        *size_ret = 0;
    if (fd < 0)
        return L3_ERR_IO;
    return transcode(NULL, 0, fd, opts, out_ret, size_ret);
}
