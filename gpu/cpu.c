/* cpu.c — formats, statuses, the per-pixel conversion reference
 * (l3gpu_cpu_convert, l3cv_prepare) and the host side of the GPU plan with
 * its CPU emulation. The CPU batch decoder is cpu_batch.c.
 */
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_tile.h"
#include "l3gpu.h"
#include "l3_convert.h"
#include "l3gpu_kernels.h"

const char *l3gpu_strerror(int status)
{
    switch (status) {
    case L3GPU_OK: return "success";
    case L3GPU_ERR_INVALID_ARG: return "invalid argument";
    case L3GPU_ERR_NOMEM: return "out of memory";
    case L3GPU_ERR_NO_DRIVER: return "no CUDA driver (or one too old for this build)";
    case L3GPU_ERR_NO_DEVICE: return "no CUDA device (or device index out of range)";
    case L3GPU_ERR_CUDA: return "CUDA error";
    case L3GPU_ERR_IMAGE: return "one or more images of the batch failed";
    case L3GPU_ERR_OUTPUT_TOO_SMALL: return "output buffer too small for the batch";
    case L3GPU_ERR_SCRATCH_TOO_SMALL: return "scratch buffer too small for the batch";
    case L3GPU_ERR_NOT_BUILT: return "built without CUDA support";
    case L3GPU_ERR_THREAD: return "could not start worker threads";
    case L3GPU_ERR_BUSY: return "two batches are in flight on the context: finish one first";
    default: return "unknown l3gpu status";
    }
}

const char *l3gpu_image_strerror(int st)
{
    switch (st) {
    case L3GPU_IMG_SHAPE: return "output shape differs from the rest of the batch";
    case L3GPU_IMG_ABORTED: return "not decoded: the batch failed";
    case L3GPU_IMG_PENDING: return "decode pending (batch not finished)";
    default: return l3_strerror(st);
    }
}

void l3gpu_format_init(struct l3gpu_format *fmt)
{
    memset(fmt, 0, sizeof *fmt);
    fmt->layout = L3GPU_HWC;
    fmt->dtype = L3GPU_U8;
    for (int c = 0; c < 4; c++) {
        fmt->scale[c] = 1.0f;
        fmt->std[c] = 1.0f;
    }
}

size_t l3gpu_dtype_size(int dtype)
{
    switch (dtype) {
    case L3GPU_U8: return 1;
    case L3GPU_U16: return 2;
    case L3GPU_F32: return 4;
    case L3GPU_F16: return 2;
    default: return 0;
    }
}

int l3gpu_format_check(const struct l3gpu_format *fmt)
{
    if (!fmt)
        return L3GPU_ERR_INVALID_ARG;
    if (fmt->layout != L3GPU_HWC && fmt->layout != L3GPU_CHW)
        return L3GPU_ERR_INVALID_ARG;
    if (!l3gpu_dtype_size(fmt->dtype))
        return L3GPU_ERR_INVALID_ARG;
    if (fmt->channels != 0 && fmt->channels != 1 && fmt->channels != 3 &&
        fmt->channels != 4)
        return L3GPU_ERR_INVALID_ARG;
    if (fmt->normalize) {
        if (fmt->dtype != L3GPU_F32 && fmt->dtype != L3GPU_F16)
            return L3GPU_ERR_INVALID_ARG;
        for (int c = 0; c < 4; c++) {
            /* finite values, non-zero std (x != x: NaN; inf - inf: NaN) */
            float s = fmt->scale[c], m = fmt->mean[c], d = fmt->std[c];
            if (s - s != 0.0f || m - m != 0.0f || d - d != 0.0f || d == 0.0f)
                return L3GPU_ERR_INVALID_ARG;
        }
    }
    return L3GPU_OK;
}

int l3cv_prepare(const struct l3_info *info, const struct l3gpu_format *fmt,
                 struct l3cv_image *im)
{
    if (!info || !im || l3gpu_format_check(fmt))
        return L3GPU_ERR_INVALID_ARG;
    unsigned planes = l3_planes(info->color);
    if (!planes || info->width == 0 || info->height == 0)
        return L3GPU_ERR_INVALID_ARG;
    if (info->bit_depth != 1 && info->bit_depth != 2 && info->bit_depth != 4 &&
        info->bit_depth != 8 && info->bit_depth != 16)
        return L3GPU_ERR_INVALID_ARG;
    memset(im, 0, sizeof *im);
    im->width = info->width;
    im->height = info->height;
    im->color = info->color;
    im->planes = (uint8_t)planes;
    im->depth = info->bit_depth;
    im->dtype = (uint8_t)fmt->dtype;
    im->layout = (uint8_t)fmt->layout;
    im->normalize = fmt->normalize ? 1 : 0;
    for (int c = 0; c < 4; c++) {
        im->scale[c] = fmt->normalize ? fmt->scale[c] : 1.0f;
        im->mean[c] = fmt->normalize ? fmt->mean[c] : 0.0f;
        im->std[c] = fmt->normalize ? fmt->std[c] : 1.0f;
    }
    im->srcmax = info->bit_depth == 16 ? 65535u : (1u << info->bit_depth) - 1u;
    unsigned C = fmt->channels ? (unsigned)fmt->channels : planes;
    im->out_channels = (uint8_t)C;
    unsigned color = info->color;
    if (color == L3_COLOR_PALETTE) {
        if (fmt->channels == 0) {
            im->srcmax = 255u; /* the index, as an 8-bit sample */
        } else {
            im->expand = 1;
            im->srcmax = 255u;
            memcpy(im->palette, info->palette, sizeof im->palette);
            /* entries past palette_len are zero in l3_info; keep them so */
            color = L3_COLOR_RGBA;
        }
    }
    if ((color == L3_COLOR_GRAY || color == L3_COLOR_RGB) && info->has_trns_key) {
        im->has_key = 1;
        for (int k = 0; k < 3; k++) im->key[k] = info->trns_key[k];
    }
    static const uint8_t A = L3CV_SEL_ALPHA, L = L3CV_SEL_LUMA;
    uint8_t map[4] = {0, 1, 2, 3};
    if (fmt->channels != 0) {
        switch (color) {
        case L3_COLOR_GRAY:
        case L3_COLOR_GRAY_ALPHA: {
            uint8_t a = color == L3_COLOR_GRAY ? A : 1;
            if (C == 1) { map[0] = 0; }
            else if (C == 3) { map[0] = map[1] = map[2] = 0; }
            else { map[0] = map[1] = map[2] = 0; map[3] = a; }
            break;
        }
        case L3_COLOR_RGB:
        case L3_COLOR_RGBA: {
            uint8_t a = color == L3_COLOR_RGB ? A : 3;
            if (C == 1) map[0] = L;
            else if (C == 4) map[3] = a;
            break;
        }
        default: return L3GPU_ERR_INVALID_ARG;
        }
    }
    for (unsigned c = C; c < 4; c++) map[c] = 0;
    memcpy(im->map, map, 4);
    im->direct = !im->expand;
    for (unsigned c = 0; c < C; c++)
        if (map[c] != c)
            im->direct = 0;
    return L3GPU_OK;
}

int l3gpu_output_shape(const struct l3_info *info, const struct l3gpu_format *fmt,
                       uint32_t shape_ret[3], size_t *bytes_ret)
{
    if (!info || l3gpu_format_check(fmt))
        return L3GPU_ERR_INVALID_ARG;
    unsigned planes = l3_planes(info->color);
    if (!planes)
        return L3GPU_ERR_INVALID_ARG;
    uint32_t C = fmt->channels ? (uint32_t)fmt->channels : planes;
    if (shape_ret) {
        if (fmt->layout == L3GPU_HWC) {
            shape_ret[0] = info->height;
            shape_ret[1] = info->width;
            shape_ret[2] = C;
        } else {
            shape_ret[0] = C;
            shape_ret[1] = info->height;
            shape_ret[2] = info->width;
        }
    }
    if (bytes_ret) {
        /* width, height <= 2^20 and C <= 4, dtype <= 4: fits in 64 bits */
        uint64_t b = (uint64_t)info->width * info->height * C * l3gpu_dtype_size(fmt->dtype);
        if (b > SIZE_MAX)
            return L3GPU_ERR_INVALID_ARG;
        *bytes_ret = (size_t)b;
    }
    return L3GPU_OK;
}

int l3gpu_cpu_convert(const struct l3_info *info, const void *pixels, size_t stride,
                      const struct l3gpu_format *fmt, void *out)
{
    struct l3cv_image *im = malloc(sizeof *im);
    if (!im)
        return L3GPU_ERR_NOMEM;
    int st = (!pixels || !out) ? L3GPU_ERR_INVALID_ARG : l3cv_prepare(info, fmt, im);
    if (st) {
        free(im);
        return st;
    }
    size_t sb = info->bit_depth == 16 ? 2 : 1;
    if (!stride)
        stride = (size_t)info->width * im->planes * sb;
    for (uint32_t y = 0; y < info->height; y++) {
        const uint8_t *row = (const uint8_t *)pixels + (size_t)y * stride;
        for (uint32_t x = 0; x < info->width; x++) {
            uint32_t px[4] = {0, 0, 0, 0}, v[4];
            for (unsigned c = 0; c < im->planes; c++) {
                size_t k = (size_t)x * im->planes + c;
                if (sb == 2) {
                    uint16_t s;
                    memcpy(&s, row + 2 * k, 2);
                    px[c] = s;
                } else {
                    px[c] = row[k];
                }
            }
            l3cv_map(im, px, v);
            l3cv_store(im, out, x, y, v);
        }
    }
    free(im);
    return L3GPU_OK;
}

/* ---------------- the GPU plan, shared with l3gpu.cu ---------------- */

static size_t align256(size_t v)
{
    return (v + 255) / 256 * 256;
}

void l3g_validate(const size_t *sizes, size_t n, const struct l3gpu_format *fmt, int contiguous,
                  void *const *out_ptrs, struct l3g_host_image *hi, int *status,
                  struct l3g_totals *tot)
{
    uint32_t shape0[3] = {0, 0, 0};
    int have_shape = 0;
    tot->slot = 0;
    tot->in_total = 0;
    for (size_t i = 0; i < n; i++) {
        int st = status[i];
        hi[i].out_bytes = 0;
        hi[i].in_off = 0;
        uint32_t shape[3];
        /* the shape is known as soon as the header reads (failed slots of
         * separate outputs are zeroed with it) */
        if (!st && l3gpu_output_shape(&hi[i].info, fmt, shape, &hi[i].out_bytes))
            st = L3_ERR_UNSUPPORTED;
        if (!st && (hi[i].lay.header_size > sizes[i] ||
                    hi[i].lay.payload_size > sizes[i] - hi[i].lay.header_size))
            st = L3_ERR_TRUNCATED;
        if (!st && contiguous) {
            if (!have_shape) {
                memcpy(shape0, shape, sizeof shape);
                tot->slot = hi[i].out_bytes;
                have_shape = 1;
            } else if (memcmp(shape, shape0, sizeof shape)) {
                st = L3GPU_IMG_SHAPE;
            }
        }
        if (!st && !contiguous && !out_ptrs[i])
            st = L3_ERR_INVALID_ARG;
        status[i] = st;
        if (!st) {
            hi[i].in_off = tot->in_total;
            tot->in_total += align256(hi[i].lay.header_size + (size_t)hi[i].lay.payload_size);
        }
    }
}

void l3g_fill(const struct l3g_host_image *hi, size_t n, int *status,
              const struct l3gpu_format *fmt, void *out, void *const *out_ptrs,
              const uint8_t *const *bases, struct l3g_image *ims, uint64_t *item_start,
              int *dstatus, void *lut_host, const void *lut_dev, struct l3g_totals *tot)
{
    unsigned luts_made = 0; /* bit k: the table of srcmax 2^(2^k) - 1 */
    const struct l3_info *first_ok = NULL;
    for (size_t j = 0; j < n && !first_ok; j++)
        if (!status[j])
            first_ok = &hi[j].info;
    tot->samples = tot->tiles = tot->items = 0;
    tot->max_tiles_x = tot->max_tiles_y = 0;
    tot->channel_mask = 0;
    for (size_t i = 0; i < n; i++) {
        struct l3g_image *im = &ims[i];
        memset(im, 0, sizeof *im);
        item_start[i] = tot->items;
        const struct l3_info *f = &hi[i].info;
        int st = status[i];
        /* a failed image still gets its slot zeroed when its shape is known:
         * contiguous batches use the batch's shape, separate outputs the
         * image's own when its header could be read */
        const struct l3_info *shape_info = NULL;
        if (!st)
            shape_info = f;
        else if (out)
            shape_info = first_ok;
        else if (hi[i].out_bytes && out_ptrs[i])
            shape_info = f;
        if (shape_info && l3cv_prepare(shape_info, fmt, &im->cv) != L3GPU_OK) {
            if (!st)
                st = status[i] = L3_ERR_UNSUPPORTED;
            shape_info = NULL;
        }
        dstatus[i] = st;
        if (shape_info) {
            im->out = out ? (void *)((uint8_t *)out + i * tot->slot) : out_ptrs[i];
            /* the grid the convert kernel walks: the tiles of a decoded
             * image, 64x64 cells over the slot of one that is zero-filled */
            im->tile_w = st ? 64u : f->tile_width;
            im->tile_h = st ? 64u : f->tile_height;
            im->tiles_x = st ? im->cv.width / 64u + (im->cv.width % 64u != 0) : f->tiles_x;
            im->tiles_y = st ? im->cv.height / 64u + (im->cv.height % 64u != 0) : f->tiles_y;
            if (im->tiles_x > tot->max_tiles_x)
                tot->max_tiles_x = im->tiles_x;
            if (im->tiles_y > tot->max_tiles_y)
                tot->max_tiles_y = im->tiles_y;
            tot->channel_mask |= 1u << (im->cv.out_channels - 1u);
        }
        if (st)
            continue;
        const uint32_t sm = im->cv.srcmax;
        const unsigned k = sm == 1u ? 0u : sm == 3u ? 1u : sm == 15u ? 2u : sm == 255u ? 3u : 4u;
        if ((fmt->dtype == L3GPU_F32 || fmt->dtype == L3GPU_F16) && k < 4u) {
            uint8_t *t = (uint8_t *)lut_host + k * L3G_LUT_SLOT;
            if (!(luts_made >> k & 1u)) /* the format's arithmetic on every sample */
                for (unsigned c = 0; c < 4; c++)
                    for (uint32_t v = 0; v < 256; v++)
                        l3cv_put(fmt->dtype, &im->cv, t, c * 256u + v, c, v);
            luts_made |= 1u << k;
            im->lut = (const uint8_t *)lut_dev + k * L3G_LUT_SLOT;
        }
        const uint8_t *base = bases[i];
        im->payload = base + hi[i].lay.header_size;
        im->table = base + hi[i].lay.table_offset;
        im->payload_size = hi[i].lay.payload_size;
        im->tiles = hi[i].lay.tile_count;
        im->scratch_off = tot->samples;
        im->tile_base = tot->tiles;
        tot->samples += (uint64_t)im->tiles * im->cv.planes * im->tile_w * im->tile_h;
        tot->tiles += im->tiles;
        tot->items += (uint64_t)im->tiles * im->cv.planes;
    }
    item_start[n] = tot->items;
}

int l3g_emulate_batch(const struct l3gpu_input *in, size_t n, const struct l3gpu_format *fmt,
                      void *out, size_t out_size, void *const *out_ptrs, int *status_ret)
{
    if ((n && (!in || !status_ret)) || (!out == !out_ptrs) || l3gpu_format_check(fmt))
        return L3GPU_ERR_INVALID_ARG;
    if (n == 0)
        return L3GPU_OK;
    struct l3g_host_image *hi = calloc(n, sizeof *hi);
    size_t *sizes = calloc(n, sizeof *sizes);
    const uint8_t **bases = calloc(n, sizeof *bases);
    struct l3g_image *ims = calloc(n, sizeof *ims);
    uint64_t *item_start = calloc(n + 1, sizeof *item_start);
    int *dstatus = calloc(n, sizeof *dstatus);
    void *lut = malloc(L3G_LUT_BYTES);
    uint16_t *scratch = NULL;
    uint8_t *flags = NULL;
    int ret = L3GPU_ERR_NOMEM;
    if (!hi || !sizes || !bases || !ims || !item_start || !dstatus || !lut)
        goto done;
    for (size_t i = 0; i < n; i++) {
        sizes[i] = in[i].size;
        bases[i] = in[i].data;
        status_ret[i] = in[i].data ? l3_read_layout(in[i].data, in[i].size, &hi[i].info,
                                                    &hi[i].lay, NULL)
                                   : L3_ERR_INVALID_ARG;
    }
    struct l3g_totals tot;
    l3g_validate(sizes, n, fmt, out != NULL, out_ptrs, hi, status_ret, &tot);
    if (out && tot.slot && n > out_size / tot.slot) {
        ret = L3GPU_ERR_OUTPUT_TOO_SMALL;
        goto done;
    }
    l3g_fill(hi, n, status_ret, fmt, out, out_ptrs, bases, ims, item_start, dstatus, lut, lut,
             &tot);
    if (out && tot.slot == 0) /* no image readable: zero it all, as the GPU does */
        memset(out, 0, out_size);
    scratch = malloc((size_t)tot.samples * 2 + 1);
    flags = malloc((size_t)tot.tiles + 1);
    if (!scratch || !flags)
        goto done;
    for (uint64_t k = 0; k < tot.items; k++)
        l3g_decode_item(ims, item_start, (uint32_t)n, k, scratch, flags, dstatus);
    for (size_t i = 0; i < n; i++) { /* the convert kernel's blocks and threads */
        const struct l3g_image *im = &ims[i];
        if (!im->out)
            continue;
        for (uint32_t ty = 0; ty < im->tiles_y; ty++)
            for (uint32_t tx = 0; tx < im->tiles_x; tx++)
                for (uint32_t ly = 0; ly < L3G_CONVERT_BY; ly++)
                    for (uint32_t lx = 0; lx < L3G_CONVERT_BX; lx++)
                        l3g_convert_tile(im, dstatus[i], tx, ty, lx, ly, fmt->layout,
                                         fmt->dtype, im->cv.out_channels, scratch, flags);
    }
    ret = L3GPU_OK;
    for (size_t i = 0; i < n; i++) {
        status_ret[i] = dstatus[i];
        if (dstatus[i])
            ret = L3GPU_ERR_IMAGE;
    }
done:
    free(hi);
    free(sizes);
    free(bases);
    free(ims);
    free(item_start);
    free(dstatus);
    free(scratch);
    free(flags);
    free(lut);
    return ret;
}
