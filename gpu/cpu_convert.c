/* cpu_convert.c — fused tile conversion for the CPU batch decoder (see
 * cpu_convert.h): channel selection a row at a time, then one table load (or
 * a copy) per output sample, in loops specialised per layout, dtype and
 * channel count; 16-bit images take one general loop. */
#include <string.h>

#include "cpu_convert.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#define CV_HAVE_STREAM 1
#endif

#if defined(__GNUC__)
#define CV_INLINE static inline __attribute__((always_inline))
#else
#define CV_INLINE static inline
#endif

int l3cv_fast_prepare(const struct l3cv_image *im, size_t stream_min, struct l3cv_fast *fc)
{
    memset(fc, 0, sizeof *fc);
    fc->im = im;
    const unsigned C = im->out_channels, planes = im->planes;
    if (C < 1 || C > 4 || planes < 1 || planes > 4)
        return -1;
    for (unsigned c = 0; c < C; c++) {
        unsigned s = im->map[c];
        if (im->expand)
            fc->src[c] = L3CV_SRC_PLANE0; /* the table maps the index */
        else if (s < planes)
            fc->src[c] = (uint8_t)(L3CV_SRC_PLANE0 + s);
        else if (s == L3CV_SEL_LUMA && planes >= 3)
            fc->src[c] = L3CV_SRC_LUMA;
        else if (s == L3CV_SEL_ALPHA)
            fc->src[c] = im->has_key ? L3CV_SRC_KEY : L3CV_SRC_OPAQUE;
        else
            return -1; /* l3cv_prepare makes no other map */
    }
    if (im->expand && im->depth > 8)
        return -1;
    size_t bytes = (size_t)im->width * im->height * C * l3gpu_dtype_size(im->dtype);
    fc->tabled = im->depth <= 8;
    fc->stream = fc->tabled && bytes >= stream_min; /* 16-bit: plain stores */
    if (!fc->tabled)
        return 0;
    /* Every output of every channel for every possible sample, computed by
     * the reference arithmetic itself. */
    fc->all_ident = im->dtype == L3GPU_U8;
    for (unsigned c = 0; c < C; c++) {
        void *row = im->dtype == L3GPU_U8    ? (void *)fc->t.u8[c]
                    : im->dtype == L3GPU_F32 ? (void *)fc->t.f32[c]
                                             : (void *)fc->t.u16[c];
        fc->ident[c] = im->dtype == L3GPU_U8;
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t o = v;
            if (im->expand) {
                uint32_t px[4] = {v, 0, 0, 0}, m[4];
                l3cv_map(im, px, m);
                o = m[c];
            }
            l3cv_store_sample(im, row, v, c, o);
            if (im->dtype == L3GPU_U8 && fc->t.u8[c][v] != v)
                fc->ident[c] = 0;
            fc->w32[c][v] = im->dtype == L3GPU_U8 ? fc->t.u8[c][v] : fc->t.u16[c][v];
        }
        if (!fc->ident[c])
            fc->all_ident = 0;
    }
    for (unsigned j = 0; j < 3; j++)
        for (unsigned i = 0; i < 16; i++)
            fc->hwc_off[j][i] = (int32_t)(((16u * j + i) % C) * 256u);
    fc->simd = (uint8_t)l3cv_simd_level();
    fc->whole_lines = (uint8_t)l3cv_whole_lines();
    l3cv_vbmi_prepare(fc); /* cheap: 4 KiB of tables, whatever level runs */
    l3cv_arith_prepare(fc); /* computed instead of gathered where exact */
    return 0;
}

/* ---------------- 8-bit and smaller samples: tables ---------------- */

/* Converted row of channel c (u: w samples) at element i0 of out, elements
 * `step` apart. */
CV_INLINE void put_row(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                       void *out, size_t i0, const size_t step, const int dt)
{
    switch (dt) {
    case L3GPU_U8: {
        uint8_t *o = (uint8_t *)out + i0;
        if (fc->ident[c] && step == 1) {
            memcpy(o, u, w);
        } else if (fc->ident[c]) {
            for (uint32_t x = 0; x < w; x++) o[x * step] = u[x];
        } else {
            const uint8_t *T = fc->t.u8[c];
            for (uint32_t x = 0; x < w; x++) o[x * step] = T[u[x]];
        }
        break;
    }
    case L3GPU_F32: {
        float *o = (float *)out + i0;
        const float *T = fc->t.f32[c];
        for (uint32_t x = 0; x < w; x++) o[x * step] = T[u[x]];
        break;
    }
    default: {
        uint16_t *o = (uint16_t *)out + i0;
        const uint16_t *T = fc->t.u16[c];
        for (uint32_t x = 0; x < w; x++) o[x * step] = T[u[x]];
        break;
    }
    }
}

/* An interleaved (HWC) row of C channels through the tables. */
CV_INLINE void put_hwc(const struct l3cv_fast *fc, const uint8_t *const u[4], uint32_t w,
                       void *out, const unsigned C, const int dt)
{
    switch (dt) {
    case L3GPU_U8: {
        uint8_t *o = (uint8_t *)out;
        if (fc->all_ident) {
            for (uint32_t x = 0; x < w; x++)
                for (unsigned c = 0; c < C; c++) o[x * C + c] = u[c][x];
        } else {
            for (uint32_t x = 0; x < w; x++)
                for (unsigned c = 0; c < C; c++) o[x * C + c] = fc->t.u8[c][u[c][x]];
        }
        break;
    }
    case L3GPU_F32: {
        float *o = (float *)out;
        for (uint32_t x = 0; x < w; x++)
            for (unsigned c = 0; c < C; c++) o[x * C + c] = fc->t.f32[c][u[c][x]];
        break;
    }
    default: {
        uint16_t *o = (uint16_t *)out;
        for (uint32_t x = 0; x < w; x++)
            for (unsigned c = 0; c < C; c++) o[x * C + c] = fc->t.u16[c][u[c][x]];
        break;
    }
    }
}

/* Copies a converted row (n bytes, in cache) to its place in the output with
 * non-temporal stores: the output of a large image is written once and not
 * read back here, so its lines need not be read for ownership first nor
 * evict the tile's planes (measured: float32 NCHW of 2048x1024 photos 17%
 * faster). Only whole 64-byte lines are streamed: the bytes before the first
 * line boundary and after the last (lines shared with a neighbouring tile's
 * row) use ordinary stores, as a streamed part of a line goes out to memory
 * as a partial write. */
CV_INLINE void copy_stream(uint8_t *dst, const uint8_t *src, size_t n)
{
#ifdef CV_HAVE_STREAM
    size_t head = (64 - ((uintptr_t)dst & 63u)) & 63u;
    if (head < n) {
        memcpy(dst, src, head);
        size_t end = head + ((n - head) & ~(size_t)63);
        for (size_t k = head; k < end; k += 16)
            _mm_stream_si128((__m128i *)(void *)(dst + k),
                             _mm_loadu_si128((const __m128i *)(const void *)(src + k)));
        memcpy(dst + end, src + end, n - end);
        return;
    }
#endif
    memcpy(dst, src, n);
}

/* CV_AHEAD rows ahead of the CHW rows being copied (identity uint8
 * channels, copy_stream): the first and last line of each such row asked
 * for, for writing. Where a row does not start and end on a 64-byte line
 * (the planes of an image whose width is no multiple of 64 bytes: 3640
 * pixels) those two lines are shared with the neighbouring tiles, so they
 * are stored, not streamed, and each store would otherwise wait for its line
 * to be read (measured: NCHW uint8 of a 3640x2400 RGBA image 1.4-2x the
 * time of HWC uint8 without this, at par with it). */
#define CV_AHEAD 8
CV_INLINE void chw_ahead(const struct l3cv_fast *fc, const void *out, unsigned C, size_t HW,
                         size_t pix, uint32_t w, size_t es, const int staged)
{
    for (unsigned c = 0; c < C; c++) {
        const uint8_t *d = (const uint8_t *)out + (c * HW + pix) * es, *e = d + (size_t)w * es;
        if (staged && fc->whole_lines && fc->simd && !fc->ident[c] && ((uintptr_t)d & 63)) {
            /* stored, not streamed (kernel below): every line of the row */
            for (const uint8_t *l = (const uint8_t *)((uintptr_t)d & ~(uintptr_t)63); l < e;
                 l += 64)
                __builtin_prefetch(l, 1, 3);
            continue;
        }
        if (!fc->ident[c] && !(staged && ((uintptr_t)d & 15)))
            continue; /* streamed rows: a line in the cache would only slow their stores */
        if ((uintptr_t)d & 63)
            __builtin_prefetch(d, 1, 3);
        if ((uintptr_t)e & 63)
            __builtin_prefetch(e - 1, 1, 3);
    }
}

#ifdef CV_HAVE_STREAM
/* A CHW row of channel c built 16 bytes at a time from the table and
 * streamed straight to dst (16-byte aligned; w a multiple of 16). */
CV_INLINE void stream_row(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                          uint8_t *dst, const int dt)
{
    __m128i *o = (__m128i *)(void *)dst;
    switch (dt) {
    case L3GPU_U8:
        if (fc->ident[c]) {
            for (uint32_t x = 0; x < w; x += 16)
                _mm_stream_si128(o++, _mm_loadu_si128((const __m128i *)(const void *)(u + x)));
        } else {
            const uint8_t *T = fc->t.u8[c];
            for (uint32_t x = 0; x < w; x += 16) {
                uint64_t lo = 0, hi = 0;
                for (unsigned k = 0; k < 8; k++) {
                    lo |= (uint64_t)T[u[x + k]] << (8 * k);
                    hi |= (uint64_t)T[u[x + 8 + k]] << (8 * k);
                }
                _mm_stream_si128(o++, _mm_set_epi64x((long long)hi, (long long)lo));
            }
        }
        break;
    case L3GPU_F32: {
        const float *T = fc->t.f32[c];
        float *of = (float *)(void *)dst;
        for (uint32_t x = 0; x < w; x += 4)
            _mm_stream_ps(of + x, _mm_setr_ps(T[u[x]], T[u[x + 1]], T[u[x + 2]], T[u[x + 3]]));
        break;
    }
    default: {
        const uint16_t *T = fc->t.u16[c];
        for (uint32_t x = 0; x < w; x += 8)
            _mm_stream_si128(o++, _mm_setr_epi16((short)T[u[x]], (short)T[u[x + 1]],
                                                 (short)T[u[x + 2]], (short)T[u[x + 3]],
                                                 (short)T[u[x + 4]], (short)T[u[x + 5]],
                                                 (short)T[u[x + 6]], (short)T[u[x + 7]]));
        break;
    }
    }
}
#endif

/* Streams a staged row (pixel index pix of the image) to the output. */
CV_INLINE void flush_row(void *out, const uint8_t *sg, size_t pix, uint32_t w, size_t HW,
                         const unsigned C, const int layout, const size_t es)
{
    if (layout == L3GPU_CHW) {
        for (unsigned c = 0; c < C; c++)
            copy_stream((uint8_t *)out + (c * HW + pix) * es, sg + c * (size_t)w * es, w * es);
    } else {
        copy_stream((uint8_t *)out + pix * C * es, sg, (size_t)w * C * es);
    }
}

/* The samples of output channel c for row y of the tile: a plane's row, or
 * one computed into its scratch row (luma, key alpha, opaque). Shared by
 * both sample widths (S: uint8_t or uint16_t). */
#define CV_SOURCE_ROWS(S)                                                                    \
    const S *e[4] = {NULL, NULL, NULL, NULL};                                                \
    for (unsigned p = 0; p < planes; p++)                                                    \
        e[p] = (const S *)t->plane[p] + (size_t)y * t->stride;                               \
    const S *u[4] = {tc, tc, tc, tc};                                                        \
    for (unsigned c = 0; c < C; c++) {                                                       \
        unsigned s = fc->src[c];                                                             \
        if (s < 4) {                                                                         \
            u[c] = e[s];                                                                     \
        } else if (s == L3CV_SRC_LUMA) {                                                     \
            const S *r = e[0], *g = e[1], *b = e[2];                                         \
            for (uint32_t x = 0; x < w; x++)                                                 \
                tl[x] = (S)(((uint32_t)r[x] * 19595u + (uint32_t)g[x] * 38470u +             \
                             (uint32_t)b[x] * 7471u + 32768u) >> 16);                        \
            u[c] = tl;                                                                       \
        } else if (s == L3CV_SRC_KEY) {                                                      \
            if (planes >= 3) {                                                               \
                const S *r = e[0], *g = e[1], *b = e[2];                                     \
                for (uint32_t x = 0; x < w; x++)                                             \
                    tk[x] = (S)((r[x] == k0 && g[x] == k1 && b[x] == k2) ? 0u : smax);       \
            } else {                                                                         \
                const S *a = e[0];                                                           \
                for (uint32_t x = 0; x < w; x++) tk[x] = (S)(a[x] == k0 ? 0u : smax);        \
            }                                                                                \
            u[c] = tk;                                                                       \
        }                                                                                    \
    }

CV_INLINE void conv_tile8(const struct l3cv_fast *fc, const struct l3_tile_out *t, void *out,
                          uint8_t *scratch, const unsigned C, const int layout, const int dt)
{
    const struct l3cv_image *im = fc->im;
    const size_t W = im->width, HW = W * im->height;
    const uint32_t w = t->w;
    const unsigned planes = im->planes;
    const uint32_t smax = im->srcmax;
    const uint32_t k0 = im->key[0], k1 = im->key[1], k2 = im->key[2];
    const size_t rs = L3CV_FAST_STRIDE(w);
    uint8_t *tl = scratch, *tk = scratch + rs, *tc = scratch + 2 * rs;
    /* two staging rows of C * w elements (<= 16 w bytes each): row y is
     * converted into one while row y - 1 streams out of the other, so the
     * vector loads of the copy never wait on the scalar stores just made */
    uint8_t *stage[2] = {scratch + 6 * rs, scratch + 22 * rs};
    uint8_t *ilv = scratch + 38 * rs; /* HWC lookups: C interleaved samples per pixel */
    const size_t es = dt == L3GPU_U8 ? 1 : dt == L3GPU_F32 ? 4 : 2;
    const uint8_t *prev = NULL;
    size_t prev_pix = 0;
    memset(tc, (int)smax, w);
    for (uint32_t y = 0; y < t->h; y++) {
        CV_SOURCE_ROWS(uint8_t)
        const size_t pix = (size_t)(t->y0 + y) * W + t->x0;
        if (fc->simd >= 3 && !fc->arith && dt != L3GPU_F32 && layout == L3GPU_CHW) {
            /* byte-plane lookups, any width; identity uint8 rows are copies */
            if (fc->stream && y + CV_AHEAD < t->h)
                chw_ahead(fc, out, C, HW, pix + CV_AHEAD * W, w, es, 0);
            for (unsigned c = 0; c < C; c++) {
                uint8_t *d = (uint8_t *)out + (c * HW + pix) * es;
                if (!fc->ident[c])
                    l3cv_row_vbmi(fc, c, u[c], w, d, fc->stream);
                else if (fc->stream)
                    copy_stream(d, u[c], w);
                else
                    memcpy(d, u[c], w);
            }
            continue;
        }
        if (fc->simd >= 3 && !fc->arith && dt != L3GPU_F32 && layout == L3GPU_HWC && fc->same &&
            !fc->all_ident && !(w & 15)) {
            /* one table: the samples interleaved, then one row of w * C */
            const void *rows[4] = {u[0], u[1], u[2], u[3]};
            if (C == 3)
                l3cv_interleave3_vbmi(fc, u, w, ilv);
            else
                l3cv_interleave_simd(rows, C, 1, w, ilv);
            l3cv_row_vbmi(fc, 0, ilv, w * C, (uint8_t *)out + pix * C * es, fc->stream);
            continue;
        }
        if (layout == L3GPU_HWC && fc->simd && !(w & 15) && C > 1) {
            const void *rows[4] = {u[0], u[1], u[2], u[3]};
            uint8_t *dst = (uint8_t *)out + pix * C * es;
            if (!fc->all_ident && fc->arith && C == 3) { /* computed, from the rows */
                l3cv_hwc3_arith(fc, u, w, dst, fc->stream);
                continue;
            }
            if (!fc->all_ident) {
                /* the samples interleaved, then through the tables in place */
                if (C == 3 && fc->simd >= 3)
                    l3cv_interleave3_vbmi(fc, u, w, ilv);
                else
                    l3cv_interleave_simd(rows, C, 1, w, ilv);
                l3cv_hwc_simd(fc, ilv, C, w, dst, fc->stream);
                continue;
            }
            if (!fc->stream) { /* uint8 as decoded: interleaving is all */
                l3cv_interleave_simd(rows, C, 1, w, dst);
                continue;
            }
            uint8_t *sg = stage[y & 1];
            l3cv_interleave_simd(rows, C, 1, w, sg);
            if (prev)
                flush_row(out, prev, prev_pix, w, HW, C, layout, es);
            prev = sg;
            prev_pix = pix;
            continue;
        }
        if (!fc->stream) {
            if (layout == L3GPU_CHW)
                for (unsigned c = 0; c < C; c++) {
                    if (fc->simd && !fc->ident[c] && !(w & 15))
                        l3cv_row_simd(fc, c, u[c], w, (uint8_t *)out + (c * HW + pix) * es, 0);
                    else
                        put_row(fc, c, u[c], w, out, c * HW + pix, 1, dt);
                }
            else
                put_hwc(fc, u, w, (uint8_t *)out + pix * C * es, C, dt);
            continue;
        }
#ifdef CV_HAVE_STREAM
        if (layout == L3GPU_CHW && !(w & 15)) {
            /* straight to memory where a row starts on 16 bytes (the computed
             * outputs stream in 16-byte halves where it is not on 32); a row
             * that does not (a plane row of 926 16-bit samples) is made in the
             * staging row and streamed by whole lines, its edge lines asked
             * for ahead like the copies' (measured: NCHW uint16 of a 926x823
             * RGBA image 2.05 -> 1.41 ms, scalar stores before). Where a
             * part-line stream costs a memory round trip (fc->whole_lines),
             * a computed row off a 64-byte line is stored instead, all its
             * lines asked for ahead (Zen 4, NCHW uint16 of 3640x2400 RGBA:
             * 15.9 -> 8.8 ms; of 926x823 RGBA: 1.70 -> 1.53 ms) */
            if (y + CV_AHEAD < t->h)
                chw_ahead(fc, out, C, HW, pix + CV_AHEAD * W, w, es, 1);
            for (unsigned c = 0; c < C; c++) {
                uint8_t *d = (uint8_t *)out + (c * HW + pix) * es;
                if (fc->whole_lines && fc->simd && !fc->ident[c] && ((uintptr_t)d & 63))
                    l3cv_row_simd(fc, c, u[c], w, d, 0);
                else if (fc->simd && !fc->ident[c] &&
                    !((uintptr_t)d & (dt == L3GPU_U8 || fc->arith ? 15 : 31)))
                    l3cv_row_simd(fc, c, u[c], w, d, 1);
                else if (fc->ident[c])
                    copy_stream(d, u[c], w);
                else if (((uintptr_t)d & 15) && fc->simd) {
                    l3cv_row_simd(fc, c, u[c], w, stage[0], 0);
                    copy_stream(d, stage[0], (size_t)w * es);
                } else if ((uintptr_t)d & 15)
                    put_row(fc, c, u[c], w, out, c * HW + pix, 1, dt);
                else
                    stream_row(fc, c, u[c], w, d, dt);
            }
            continue;
        }
#endif
        uint8_t *sg = stage[y & 1];
        if (layout == L3GPU_CHW)
            for (unsigned c = 0; c < C; c++) put_row(fc, c, u[c], w, sg, c * (size_t)w, 1, dt);
        else
            put_hwc(fc, u, w, sg, C, dt);
        if (prev)
            flush_row(out, prev, prev_pix, w, HW, C, layout, es);
        prev = sg;
        prev_pix = pix;
    }
    if (prev)
        flush_row(out, prev, prev_pix, w, HW, C, layout, es);
}

/* ---------------- 16-bit samples: the reference arithmetic ---------------- */

static void conv_tile16(const struct l3cv_fast *fc, const struct l3_tile_out *t, void *out,
                        uint8_t *scratch)
{
    const struct l3cv_image *im = fc->im;
    const size_t W = im->width, HW = W * im->height;
    const uint32_t w = t->w;
    const unsigned planes = im->planes, C = im->out_channels;
    const uint32_t smax = im->srcmax; /* 65535 */
    const uint32_t k0 = im->key[0], k1 = im->key[1], k2 = im->key[2];
    const size_t rs = L3CV_FAST_STRIDE(w);
    uint16_t *tl = (uint16_t *)(void *)scratch, *tk = tl + rs, *tc = tl + 2 * rs;
    for (uint32_t x = 0; x < w; x++) tc[x] = (uint16_t)smax;
    for (uint32_t y = 0; y < t->h; y++) {
        CV_SOURCE_ROWS(uint16_t)
        const size_t pix = (size_t)(t->y0 + y) * W + t->x0;
        for (unsigned c = 0; c < C; c++) {
            const size_t step = im->layout == L3GPU_CHW ? 1 : C;
            const size_t i0 = im->layout == L3GPU_CHW ? c * HW + pix : pix * C + c;
            const uint16_t *v = u[c];
            switch (im->dtype) {
            case L3GPU_U8: {
                uint8_t *o = (uint8_t *)out + i0;
                for (uint32_t x = 0; x < w; x++) /* l3cv_rescale(v, 65535, 255) */
                    o[x * step] = (uint8_t)((v[x] * 255u + 32767u) / 65535u);
                break;
            }
            case L3GPU_U16: {
                uint16_t *o = (uint16_t *)out + i0;
                for (uint32_t x = 0; x < w; x++) o[x * step] = v[x]; /* 65535 -> 65535 */
                break;
            }
            case L3GPU_F32: {
                float *o = (float *)out + i0;
                for (uint32_t x = 0; x < w; x++) o[x * step] = l3cv_float(im, v[x], c);
                break;
            }
            default: {
                uint16_t *o = (uint16_t *)out + i0;
                for (uint32_t x = 0; x < w; x++)
                    o[x * step] = l3cv_f16_bits(l3cv_float(im, v[x], c));
                break;
            }
            }
        }
    }
}

#define CV_KEY(layout, dt, C) (((unsigned)(layout) * 4u + (unsigned)(dt)) * 4u + (C) - 1u)
#define CV_CASE(layout, dt, C)                                                               \
    case CV_KEY(layout, dt, C):                                                              \
        conv_tile8(fc, t, out, scratch, C, layout, dt);                                      \
        break;
#define CV_CASES_C(layout, dt)                                                               \
    CV_CASE(layout, dt, 1) CV_CASE(layout, dt, 2) CV_CASE(layout, dt, 3) CV_CASE(layout, dt, 4)
#define CV_CASES(layout)                                                                     \
    CV_CASES_C(layout, L3GPU_U8)                                                             \
    CV_CASES_C(layout, L3GPU_U16) CV_CASES_C(layout, L3GPU_F32) CV_CASES_C(layout, L3GPU_F16)

void l3cv_fast_tile(const struct l3cv_fast *fc, const struct l3_tile_out *t, void *out,
                    void *scratch)
{
    const struct l3cv_image *im = fc->im;
    if (!fc->tabled) {
        conv_tile16(fc, t, out, scratch);
        return;
    }
    /* one channel: HWC and CHW are the same bytes, and CHW has the row loops */
    const int lay = im->out_channels == 1 ? L3GPU_CHW : im->layout;
    switch (CV_KEY(lay, im->dtype, im->out_channels)) {
        CV_CASES(L3GPU_HWC)
        CV_CASES(L3GPU_CHW)
    default: break; /* l3cv_prepare/l3cv_fast_prepare admit no other */
    }
#ifdef CV_HAVE_STREAM
    if (fc->stream)
        _mm_sfence(); /* the tile's streamed stores are visible before it counts as done */
#endif
}
