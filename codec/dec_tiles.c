/* dec_tiles.c — decodes the tiles of a validated L3 file in batches and hands
 * each decoded tile to a sink (struct l3_tile_out: channel planes, colour
 * transform undone); l3_decode's own sink on 8-bit images gets each batch
 * whole instead (l3_store_tiles), with the transform left to it.
 *
 * Work is cut into batches of tiles of the same size (interior tiles, the
 * right column, the bottom row, the corner), numbered without any table:
 * batch b maps to its tiles by arithmetic. A batch's plane streams are decoded
 * together: on x86-64 with AVX2, the predicted 8-bit-or-less planes run in
 * lock-step in SIMD lanes (dec_simd.c), LZ planes with the LEFT predictor go
 * to dec_lz.c; every other plane, and every plane those decoders flag, is
 * decoded by the reference routine of l3_tile.h, which also gives the status.
 * Statuses and samples are the same either way.
 */
#include <stdlib.h>
#include <string.h>

#include "l3_internal.h"

/* Tiles per batch: enough lanes for the SIMD decoder (8 per vector). */
#define BATCH_MAX L3_SIMD_BATCH_TILES

struct dec_tiles {
    const struct l3_hdr *hdr;
    const uint8_t *data;    /* the whole file */
    size_t size;
    const uint8_t *payload;
    uint32_t depth, planes, area;  /* area: tile_width * tile_height */
    uint32_t per_batch;            /* tiles per batch (at most) */
    uint32_t tail_batch;           /* ... in the tail of full tiles */
    /* tile grid split into classes of equal tile size */
    uint32_t fx, fy;       /* full tiles per row / column */
    uint32_t tiles_x, tiles_y;
    uint64_t nbatch[5];    /* batches per class: full, right column, bottom row, corner,
                              the tail of the full tiles */
    uint64_t head;         /* full tiles in class 0 (the rest are the tail) */
    int simd;              /* the SIMD lane decoder may be used */
    int fast;              /* the fast decoders of dec_lz.c may be used */
    int avx512;            /* ... in its AVX-512 build */
    l3_tile_sink sink;
    void *arg;
    uint8_t *scratch;      /* per worker: scratch_per bytes */
    size_t scratch_per;
};

/* Full tiles first .. end (row-major among themselves), at most pb of them. */
static uint32_t full_tiles(const struct dec_tiles *d, uint64_t first, uint64_t end, uint32_t pb,
                           uint32_t tile[BATCH_MAX])
{
    uint32_t n = 0;
    for (uint64_t k = first; k < end && n < pb; k++, n++)
        tile[n] = (uint32_t)((k / d->fx) * d->tiles_x + k % d->fx);
    return n;
}

/* Tile indices of batch b; returns how many. */
static uint32_t batch_tiles(const struct dec_tiles *d, uint64_t b, uint32_t tile[BATCH_MAX])
{
    const uint32_t pb = d->per_batch;
    uint32_t n = 0;
    if (b < d->nbatch[0]) /* full tiles before the tail */
        return full_tiles(d, b * pb, d->head, pb, tile);
    b -= d->nbatch[0];
    if (b < d->nbatch[1]) { /* right column: x = fx, rows 0..fy-1 */
        for (uint64_t k = b * pb; k < d->fy && n < pb; k++, n++)
            tile[n] = (uint32_t)(k * d->tiles_x + d->fx);
        return n;
    }
    b -= d->nbatch[1];
    if (b < d->nbatch[2]) { /* bottom row: y = fy, columns 0..fx-1 */
        for (uint64_t k = b * pb; k < d->fx && n < pb; k++, n++)
            tile[n] = (uint32_t)((uint64_t)d->fy * d->tiles_x + k);
        return n;
    }
    b -= d->nbatch[2];
    if (b < d->nbatch[3]) {
        tile[0] = (uint32_t)((uint64_t)d->fy * d->tiles_x + d->fx); /* corner */
        return 1;
    }
    b -= d->nbatch[3]; /* the tail: the last full tiles in small batches */
    return full_tiles(d, d->head + b * d->tail_batch, (uint64_t)d->fx * d->fy, d->tail_batch,
                      tile);
}

/* Narrows a decoded uint16 plane to bytes (depth <= 8). */
static void narrow(const uint16_t *s, uint8_t *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = (uint8_t)s[i];
}

/* Undoes the colour transform on channel planes: R += G, B += G (mod 2^depth). */
static void unxform8(uint8_t *r, const uint8_t *g, uint8_t *b, size_t n, uint32_t mask)
{
    for (size_t i = 0; i < n; i++) {
        r[i] = (uint8_t)((r[i] + g[i]) & mask);
        b[i] = (uint8_t)((b[i] + g[i]) & mask);
    }
}

static void unxform16(uint16_t *r, const uint16_t *g, uint16_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r[i] = (uint16_t)(r[i] + g[i]);
        b[i] = (uint16_t)(b[i] + g[i]);
    }
}

/* Scratch layout of one worker:
 *   u8 planes  [per_batch][planes][area]   (depth <= 8)
 *   u16 planes [planes][area]              (one tile through the reference decoder)
 *   SIMD state (l3_simd_scratch_size) */
#define ALIGN64(n) (((n) + 63) & ~(size_t)63)
static size_t u8_bytes(uint32_t per_batch, uint32_t planes, uint32_t area)
{
    return ALIGN64((size_t)per_batch * planes * area);
}

static size_t scratch_size(uint32_t per_batch, uint32_t planes, uint32_t area, uint32_t tw)
{
    return u8_bytes(per_batch, planes, area) + ALIGN64((size_t)planes * area * 2) +
           l3_simd_scratch_size(tw);
}

/* Describes tile `t` (planes in `pl`, stride w) for the sink. */
static void tile_out(const struct dec_tiles *d, uint32_t t, uint32_t x0, uint32_t y0,
                     uint32_t w, uint32_t h, void *const pl[4], struct l3_tile_out *to)
{
    to->index = t;
    to->x0 = x0;
    to->y0 = y0;
    to->w = w;
    to->h = h;
    to->channels = d->planes;
    to->bit_depth = d->depth;
    to->stride = w;
    for (unsigned p = 0; p < 4; p++)
        to->plane[p] = p < d->planes ? pl[p] : NULL;
}

/* Orders lanes by predictor and group size (stable), so that most vectors
 * of the lane decoder hold one kind: a vector of GRAD lanes skips the MED
 * clamp, one of MED lanes its selectors, one of 16-sample groups the symbols
 * between groups of 8. */
static void sort_lanes(struct l3_simd_lane *lanes, unsigned n)
{
    struct l3_simd_lane tmp[L3_SIMD_BATCH_LANES];
    unsigned count[8] = {0}, key[L3_SIMD_BATCH_LANES];
    for (unsigned i = 0; i < n; i++) {
        key[i] = (L3_PLANE_KIND(lanes[i].mode) & 3u) * 2u + !!(lanes[i].mode & L3_PLANE_SHORT);
        count[key[i]]++;
    }
    for (unsigned k = 0, at = 0; k < 8; k++) {
        unsigned c = count[k];
        count[k] = at;
        at += c;
    }
    for (unsigned i = 0; i < n; i++)
        tmp[count[key[i]]++] = lanes[i];
    memcpy(lanes, tmp, n * sizeof *lanes);
}

static int decode_batch(void *arg, unsigned worker, uint64_t b)
{
    struct dec_tiles *d = arg;
    const struct l3_info *info = &d->hdr->info;
    uint32_t tile[BATCH_MAX];
    tile[0] = 0; /* batch_tiles sets it: every batch has a tile */
    uint32_t n = batch_tiles(d, b, tile);
    uint8_t *scr = d->scratch + d->scratch_per * worker;
    const uint32_t P = d->planes, A = d->area;
    uint8_t *u8 = scr;
    uint16_t *u16 = (uint16_t *)(void *)(scr + u8_bytes(d->per_batch, P, A));
    uint8_t *simd_scr = scr + u8_bytes(d->per_batch, P, A) + ALIGN64((size_t)P * A * 2);
    uint32_t x0, y0, w, h;
    l3_tile_rect(info->width, info->height, info->tile_width, info->tile_height, tile[0], &x0,
                 &y0, &w, &h);
    const size_t ps = (size_t)w * h; /* every tile of a batch has this size */

    struct l3_tile_header th[BATCH_MAX];
    const uint8_t *tdata[BATCH_MAX];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t tb, te;
        l3_tile_span(d->hdr->table, tile[i], &tb, &te);
        tdata[i] = d->payload + tb;
        if (l3_tile_parse(tdata[i], (size_t)(te - tb), P, &th[i]))
            return L3_ERR_CORRUPT;
    }

    /* Which planes go through the SIMD decoder; done[i] bit p: plane p of
     * tile i is decoded. */
    uint32_t done[BATCH_MAX] = {0};
    if (d->simd) {
        struct l3_simd_lane lanes[L3_SIMD_BATCH_LANES];
        unsigned nl = 0;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t p = 0; p < P; p++) {
                const uint8_t *s = tdata[i] + th[i].off[p];
                if (!l3_simd_lane_ok(th[i].mode[p], s, th[i].len[p], d->data, d->size))
                    continue;
                lanes[nl].stream = s;
                lanes[nl].len = th[i].len[p];
                lanes[nl].mode = th[i].mode[p];
                lanes[nl].out = u8 + ((size_t)i * P + p) * ps;
                lanes[nl].tag = i * 4 + p;
                nl++;
            }
        sort_lanes(lanes, nl);
        /* calls of at most L3_SIMD_MAX_LANES lanes, as even as whole vectors
         * allow (40 lanes: 24 + 16, not 32 + 8: a lone vector runs at
         * nearly the cost of three) */
        const unsigned nvec = (nl + 7) / 8, vmax = L3_SIMD_MAX_LANES / 8;
        const unsigned calls = (nvec + vmax - 1) / vmax;
        for (unsigned c = 0, l0 = 0; c < calls; c++) {
            unsigned nv = nvec / calls + (c < nvec % calls);
            unsigned cn = nl - l0 < nv * 8 ? nl - l0 : nv * 8;
            uint32_t ok[L3_SIMD_MAX_LANES / 32];
            l3_simd_decode_planes(lanes + l0, cn, w, h, d->depth, simd_scr, d->avx512, ok);
            for (unsigned l = 0; l < cn; l++)
                if (ok[l / 32] >> (l % 32) & 1)
                    done[lanes[l0 + l].tag / 4] |= 1u << (lanes[l0 + l].tag % 4);
            l0 += cn;
        }
    }

    /* l3_decode's own sink on 8-bit planes (each tile in its own slot of
     * u8): the whole batch at the end, row by row */
    const int rows = d->sink == l3_store_tile && d->depth <= 8;
    struct l3_tile_out to[BATCH_MAX];
    uint8_t addg[BATCH_MAX];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tx0, ty0, tw, tht;
        l3_tile_rect(info->width, info->height, info->tile_width, info->tile_height, tile[i],
                     &tx0, &ty0, &tw, &tht);
        void *pl[4] = {NULL, NULL, NULL, NULL};
        for (uint32_t p = 0; p < P; p++) {
            if (done[i] >> p & 1) {
                pl[p] = u8 + ((size_t)i * P + p) * ps;
                continue;
            }
            const uint8_t *strm = tdata[i] + th[i].off[p];
            const uint32_t len = th[i].len[p], mode = th[i].mode[p];
            uint8_t *o = u8 + ((size_t)i * P + p) * ps;
            if (d->fast && l3_lz_fast_ok(mode, d->depth, strm, len, d->data, d->size) &&
                l3_lz_decode_u8(strm, len, mode, w, h, d->depth, o)) {
                pl[p] = o; /* else: decoded again below, which gives the status */
                continue;
            }
            if (d->depth <= 8 && mode == L3_PLANE_CONST) {
                /* the reference routine's checks, without the uint16 plane */
                if (len != 1 || strm[0] >> d->depth)
                    return L3_ERR_CORRUPT;
                memset(o, strm[0], ps);
                pl[p] = o;
                continue;
            }
            uint16_t *dst = u16 + (size_t)p * ps;
            int st = l3_tile_plane_decode(strm, len, mode, w, h, d->depth, dst);
            if (st)
                return st;
            if (d->depth <= 8) {
                narrow(dst, o, ps);
                pl[p] = o;
            } else {
                pl[p] = dst;
            }
        }
        addg[i] = rows && d->depth == 8 && (th[i].flags & L3_TILE_XFORM_G);
        if ((th[i].flags & L3_TILE_XFORM_G) && !addg[i]) {
            if (d->depth <= 8)
                unxform8(pl[0], pl[1], pl[2], ps, (1u << d->depth) - 1);
            else
                unxform16(pl[0], pl[1], pl[2], ps);
        }
        tile_out(d, tile[i], tx0, ty0, w, h, pl, &to[i]);
        if (d->sink && !rows) {
            int st = d->sink(d->arg, worker, &to[i]);
            if (st)
                return st;
        }
    }
    if (rows)
        l3_store_tiles(d->arg, to, addg, n);
    return L3_OK;
}

int l3_dec_tiles(const uint8_t *data, size_t size, const struct l3_hdr *hdr, uint32_t flags,
                 unsigned threads, size_t mem_left, l3_tile_sink sink, void *arg)
{
    const struct l3_info *info = &hdr->info;
    struct dec_tiles d;
    memset(&d, 0, sizeof d);
    d.hdr = hdr;
    d.data = data;
    d.size = size;
    d.payload = data + hdr->layout.header_size;
    d.depth = info->bit_depth;
    d.planes = hdr->layout.planes;
    d.area = info->tile_width * info->tile_height;
    d.simd = !(flags & L3_DECODE_SCALAR) && d.depth <= 8 && l3_simd_available();
    d.avx512 = !(flags & L3_DECODE_NO_AVX512);
    d.fast = !(flags & L3_DECODE_SCALAR);
    d.per_batch = d.simd ? l3_simd_tiles_per_batch(d.planes, d.avx512) : 1;
    d.sink = sink;
    d.arg = arg;
    d.tiles_x = info->tiles_x;
    d.tiles_y = info->tiles_y;
    d.fx = info->width / info->tile_width;
    d.fy = info->height / info->tile_height;
    /* Several threads share the batches in order (l3_parallel_tiles): whole
     * batches first (the lane decoder is most efficient on full calls), the
     * edge tiles, then a tail of the full tiles in batches of 8, at least
     * two whole batches per thread of them, so that a thread that finds no
     * whole batch left still has work while the others finish theirs, and
     * the last batch to finish is a small one. (Shrinking every batch
     * instead costs lane-decoder efficiency on the whole image.) */
    const uint64_t full = (uint64_t)d.fx * d.fy;
    const unsigned nt = l3_thread_count(threads, 0);
    d.tail_batch = d.per_batch > 8 ? 8 : d.per_batch;
    uint64_t tail = nt > 1 ? 2ull * nt * d.per_batch : 0;
    if (tail > full)
        tail = full;
    d.head = full - tail;
    uint32_t rx = d.tiles_x - d.fx, ry = d.tiles_y - d.fy; /* 0 or 1 */
    uint64_t pb = d.per_batch;
    d.nbatch[0] = (d.head + pb - 1) / pb;
    d.nbatch[1] = rx ? (d.fy + pb - 1) / pb : 0;
    d.nbatch[2] = ry ? (d.fx + pb - 1) / pb : 0;
    d.nbatch[3] = rx && ry;
    d.nbatch[4] = (tail + d.tail_batch - 1) / d.tail_batch;
    uint64_t batches = d.nbatch[0] + d.nbatch[1] + d.nbatch[2] + d.nbatch[3] + d.nbatch[4];

    threads = l3_thread_count(threads, batches);
    d.scratch_per = scratch_size(d.per_batch, d.planes, d.area, info->tile_width);
    if ((uint64_t)d.scratch_per * threads > mem_left)
        return L3_ERR_LIMIT;
    d.scratch = aligned_alloc(64, d.scratch_per * threads);
    if (!d.scratch)
        return L3_ERR_NOMEM;
    int st = l3_parallel_tiles(batches, threads, decode_batch, &d);
    free(d.scratch);
    return st;
}
