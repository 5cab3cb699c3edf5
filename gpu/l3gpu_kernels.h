/* l3gpu_kernels.h — the CUDA batch decoder's plan and per-thread bodies,
 * written as C that compiles for host and device (L3CV_FN), so that the host
 * can run the very same indexing (tests: l3g_emulate_batch) and the kernels
 * in l3gpu.cu stay thin wrappers. Not installed.
 *
 * Device memory of a batch (one upload):
 *   struct l3g_image ims[n]   per-image descriptors
 *   uint64_t item_start[n+1]  prefix sums of tiles*planes (decode work items)
 *   int status[n]             0, a host validation error, or a kernel error
 *   [tables]                  L3G_LUT_BYTES: float outputs of <= 8-bit samples
 *   [input bytes]             packed .l3 files (host inputs)
 * Scratch: uint16 planes of every tile (tile after tile, plane after plane,
 * each plane tile_w*tile_h samples with row stride = the tile's real width),
 * then one flags byte per tile.
 */
#ifndef L3GPU_KERNELS_H
#define L3GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "l3.h"
#include "l3_tile.h"
#include "l3gpu.h"
#include "l3_convert.h"

struct l3g_image {
    const uint8_t *payload;  /* as the kernel sees it (device address) */
    const uint8_t *table;    /* tile table (u64 end offsets) */
    uint64_t payload_size;
    uint64_t scratch_off;    /* uint16 elements: tile 0, plane 0 */
    uint64_t tile_base;      /* index of tile 0 in the batch's flag array */
    uint32_t tiles;          /* 0 when the image is not decoded */
    /* the tile grid: the image's own, or, for an image that is only
     * zero-filled (tiles == 0), 64x64 cells over its output (the convert
     * kernel walks this grid) */
    uint32_t tiles_x, tiles_y;
    uint32_t tile_w, tile_h;
    void *out;               /* output slot, NULL: nothing to write */
    const void *lut;         /* float dtype, samples of at most 8 bits: the
                              * batch's table for this srcmax, else NULL */
    struct l3cv_image cv;
};

/* Host-side facts about one image of a batch. */
struct l3g_host_image {
    struct l3_info info;
    struct l3_layout lay;
    size_t in_off;    /* offset of its bytes among the packed inputs */
    size_t out_bytes; /* 0 when the output shape is unknown */
};

/* Float outputs of samples of at most 8 bits (srcmax 1, 3, 15 or 255) read
 * their values from a table per srcmax: 4 channels x 256 samples of the
 * output dtype (stride L3G_LUT_SLOT bytes), computed on the host by
 * l3cv_put() itself, so a table entry is the bits the arithmetic gives. */
#define L3G_LUT_SLOT (4u * 256u * 4u)
#define L3G_LUT_BYTES (4u * L3G_LUT_SLOT)

struct l3g_totals {
    uint64_t samples;    /* scratch uint16 elements */
    uint64_t tiles;
    uint64_t items;      /* decode work items (tile planes) */
    uint32_t max_tiles_x, max_tiles_y; /* largest tile grid of an output (convert grid) */
    uint32_t channel_mask; /* bit C-1: some output has C channels (one convert kernel each) */
    size_t slot;         /* contiguous output: bytes per image */
    size_t in_total;     /* packed input bytes (host inputs) */
};

#ifdef __cplusplus
extern "C" {
#endif
/* Host. Validates each image whose header was read (status[i] holds
 * l3_read_layout's result, hi[i].info/lay its output; `sizes` the full input
 * sizes): truncation, output shape, contiguous shape agreement, out_ptrs.
 * Fills status[], hi[].out_bytes/in_off, tot->slot and tot->in_total. */
void l3g_validate(const size_t *sizes, size_t n, const struct l3gpu_format *fmt, int contiguous,
                  void *const *out_ptrs, struct l3g_host_image *hi, int *status,
                  struct l3g_totals *tot);
/* Host. Fills the descriptors (ims, item_start, dstatus) and the tables
 * (lut_host, L3G_LUT_BYTES; the kernels see them at lut_dev) from the
 * validated images; bases[i] is where image i's bytes are as the kernel
 * reads them. status[] may change (L3_ERR_UNSUPPORTED); tot gets the sizes. */
void l3g_fill(const struct l3g_host_image *hi, size_t n, int *status,
              const struct l3gpu_format *fmt, void *out, void *const *out_ptrs,
              const uint8_t *const *bases, struct l3g_image *ims, uint64_t *item_start,
              int *dstatus, void *lut_host, const void *lut_dev, struct l3g_totals *tot);
/* Runs the GPU plan on the host, single-threaded, with the kernel bodies
 * below: what the device computes, for tests. Same contract as
 * l3gpu_cpu_decode_batch. */
int l3g_emulate_batch(const struct l3gpu_input *in, size_t n, const struct l3gpu_format *fmt,
                      void *out, size_t out_size, void *const *out_ptrs, int *status_ret);
#ifdef __cplusplus
}
#endif

/* Records the first error of an image. */
L3CV_FN void l3g_fail(int *status, uint32_t img, int st)
{
#if defined(__CUDA_ARCH__)
    atomicCAS(status + img, 0, st);
#else
    int zero = 0;
    __atomic_compare_exchange_n(status + img, &zero, st, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

L3CV_FN int l3g_status(const int *status, uint32_t img)
{
#if defined(__CUDA_ARCH__)
    return *(const volatile int *)(status + img);
#else
    return __atomic_load_n(status + img, __ATOMIC_RELAXED);
#endif
}

/* Decode work item k: one plane of one tile of one image. Items are ordered
 * image by image, plane-major inside an image, so that neighbouring threads
 * decode the same plane of neighbouring tiles. */
L3CV_FN void l3g_decode_item(const struct l3g_image *ims, const uint64_t *item_start, uint32_t n,
                             uint64_t k, uint16_t *scratch, uint8_t *tile_flags, int *status)
{
    uint32_t lo = 0, hi = n; /* last image with item_start <= k */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (item_start[mid] <= k) lo = mid;
        else hi = mid;
    }
    const struct l3g_image *im = ims + lo;
    if (l3g_status(status, lo) || im->tiles == 0)
        return;
    /* local < tiles * planes, planes <= 4: the plane by three comparisons
     * (a division is a long instruction sequence on the device, and the
     * 64-bit one a call whose register convention made the kernel spill) */
    const uint64_t local = k - item_start[lo], nt = im->tiles;
    const uint32_t plane = (uint32_t)(local >= nt) + (uint32_t)(local >= 2 * nt) +
                           (uint32_t)(local >= 3 * nt);
    const uint32_t t = (uint32_t)(local - plane * nt);
    uint64_t begin, end;
    l3_tile_span(im->table, t, &begin, &end);
    if (begin > end || end > im->payload_size) {
        l3g_fail(status, lo, L3_ERR_CORRUPT);
        return;
    }
    const unsigned planes = im->cv.planes;
    const uint8_t *tile = im->payload + begin;
    uint32_t flags = 0, off = 0, len = 0, mode = 0;
    int st = l3_tile_parse_plane(tile, (size_t)(end - begin), planes, plane, &flags, &off, &len,
                                 &mode);
    if (st) {
        l3g_fail(status, lo, st);
        return;
    }
    uint32_t x0, y0, w, h;
    l3_tile_rect(im->cv.width, im->cv.height, im->tile_w, im->tile_h, t, &x0, &y0, &w, &h);
    const size_t area = (size_t)im->tile_w * im->tile_h;
    uint16_t *dst = scratch + im->scratch_off + ((size_t)t * planes + plane) * area;
    /* the flags first: nothing but the status is live across the decode (a
     * failed image is zero-filled, whatever its flags) */
    if (plane == 0)
        tile_flags[im->tile_base + t] = (uint8_t)flags;
    int *const img_status = status + lo;
    st = l3_tile_plane_decode(tile + off, len, mode, w, h, im->cv.depth, dst);
    if (st)
        l3g_fail(img_status, 0, st);
}

/* The convert kernel's block: 32 x 8 threads on one tile, a warp on 32
 * consecutive pixels of a tile row. */
#define L3G_CONVERT_BX 32u
#define L3G_CONVERT_BY 8u

/* How l3g_convert_rows stores a sample (a constant in each instance). */
#define L3G_STORE_ARITH 0 /* l3cv_put: the conversion arithmetic */
#define L3G_STORE_RAW 1   /* integer dtype, no rescale: the sample as it is */
#define L3G_STORE_LUT 2   /* float dtype: the image's table (im->lut) */

/* Rows lane_y, lane_y + L3G_CONVERT_BY, ... of a decoded tile (w x h at
 * (x0, y0), planes `area` apart in buf, rows `w` apart), columns lane_x,
 * lane_x + L3G_CONVERT_BX, ...: undo the colour transform, map, store.
 * direct: the image's map is the identity (cv.direct), so the samples are
 * what l3cv_map would return; store: L3G_STORE_*, each giving the bits
 * l3cv_put gives. */
L3CV_FORCE void l3g_convert_rows(const struct l3g_image *im, const uint16_t *buf, size_t area,
                                 uint32_t flags, uint32_t x0, uint32_t y0, uint32_t w,
                                 uint32_t h, uint32_t lane_x, uint32_t lane_y, size_t pstep,
                                 size_t cstep, unsigned dtype, unsigned C, int direct, int store)
{
    const uint32_t W = im->cv.width;
    const unsigned planes = im->cv.planes, depth = im->cv.depth;
    void *const out = im->out;
    const void *const lut = im->lut;
    for (uint32_t ly = lane_y; ly < h; ly += L3G_CONVERT_BY) {
        size_t o = ((size_t)(y0 + ly) * W + x0 + lane_x) * pstep;
        const uint16_t *p = buf + (size_t)ly * w + lane_x;
        for (uint32_t lx = lane_x; lx < w;
             lx += L3G_CONVERT_BX, p += L3G_CONVERT_BX, o += L3G_CONVERT_BX * pstep) {
            uint32_t px[4], v[4];
            l3_tile_pixel(p, area, 0, planes, depth, flags, px);
            if (direct) {
                for (unsigned c = 0; c < 4u; c++)
                    v[c] = px[c];
            } else {
                l3cv_map(&im->cv, px, v);
            }
            for (unsigned c = 0; c < 4u && c < C; c++) {
                const size_t e = o + c * cstep;
                const uint32_t k = c * 256u + (v[c] & 255u);
                if (store == L3G_STORE_RAW && dtype == L3GPU_U8)
                    ((uint8_t *)out)[e] = (uint8_t)v[c];
                else if (store == L3G_STORE_RAW)
                    ((uint16_t *)out)[e] = (uint16_t)v[c];
                else if (store == L3G_STORE_LUT && dtype == L3GPU_F32)
                    ((float *)out)[e] = ((const float *)lut)[k];
                else if (store == L3G_STORE_LUT)
                    ((uint16_t *)out)[e] = ((const uint16_t *)lut)[k];
                else
                    l3cv_put(dtype, &im->cv, out, e, c, v[c]);
            }
        }
    }
}

/* Tile (tx, ty) of an image's output, the pixels of thread (lane_x, lane_y)
 * of the block: columns lane_x, lane_x + L3G_CONVERT_BX, ... of rows lane_y,
 * lane_y + L3G_CONVERT_BY, ... st = the image's final status (non-zero: the
 * tile's output is zero-filled). layout, dtype and C are the format's (C =
 * im->cv.out_channels): constants in each CUDA kernel, so the index math is
 * additions and one multiply per row, with no division, and the dtype switch
 * and the channel loop fold away. */
L3CV_FORCE void l3g_convert_tile(const struct l3g_image *im, int st, uint32_t tx, uint32_t ty,
                                 uint32_t lane_x, uint32_t lane_y, unsigned layout,
                                 unsigned dtype, unsigned C, const uint16_t *scratch,
                                 const uint8_t *tile_flags)
{
    const uint32_t W = im->cv.width, tw = im->tile_w, th = im->tile_h;
    const uint32_t x0 = tx * tw, y0 = ty * th;
    const uint32_t w = W - x0 < tw ? W - x0 : tw;
    const uint32_t h = im->cv.height - y0 < th ? im->cv.height - y0 : th;
    /* element steps: from one pixel to the next, from one channel to the next */
    const size_t pstep = layout == L3GPU_HWC ? C : 1u;
    const size_t cstep = layout == L3GPU_HWC ? 1u : (size_t)W * im->cv.height;
    if (st) {
        for (uint32_t ly = lane_y; ly < h; ly += L3G_CONVERT_BY) {
            size_t o = ((size_t)(y0 + ly) * W + x0 + lane_x) * pstep;
            for (uint32_t lx = lane_x; lx < w; lx += L3G_CONVERT_BX, o += L3G_CONVERT_BX * pstep)
                for (unsigned c = 0; c < 4u && c < C; c++)
                    l3cv_put_zero(dtype, im->out, o + c * cstep);
        }
        return;
    }
    const uint32_t t = ty * im->tiles_x + tx;
    const uint32_t flags = tile_flags[im->tile_base + t];
    const size_t area = (size_t)tw * th;
    /* planes of a tile are `area` apart; rows inside a plane `w` apart */
    const uint16_t *buf = scratch + im->scratch_off + (size_t)t * im->cv.planes * area;
    const uint32_t srcmax = im->cv.srcmax;
    const int is_float = dtype == L3GPU_F32 || dtype == L3GPU_F16;
#define L3G_ROWS(direct, store)                                                                 \
    l3g_convert_rows(im, buf, area, flags, x0, y0, w, h, lane_x, lane_y, pstep, cstep, dtype, C, \
                     direct, store)
    if (!is_float && im->cv.direct && srcmax == (dtype == L3GPU_U8 ? 255u : 65535u))
        L3G_ROWS(1, L3G_STORE_RAW);
    else if (is_float && im->lut && im->cv.direct)
        L3G_ROWS(1, L3G_STORE_LUT);
    else if (is_float && im->lut)
        L3G_ROWS(0, L3G_STORE_LUT);
    else
        L3G_ROWS(0, L3G_STORE_ARITH);
#undef L3G_ROWS
}

#endif /* L3GPU_KERNELS_H */
