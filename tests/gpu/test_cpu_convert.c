/* test_cpu_convert.c — the CPU batch decoder's fused tile converters
 * (gpu/cpu_convert.c) write the same bytes as the per-pixel reference,
 * l3gpu_cpu_convert() over l3_decode()'s pixels, for every layout x dtype x
 * channel count x normalisation:
 *   - every PngSuite file (each colour type and bit depth, tRNS keys and
 *     palettes), as encoded and tiled into a larger image with partial edge
 *     tiles, through l3gpu_cpu_decode_batch (contiguous and separate outputs);
 *   - the converter alone, with non-temporal stores forced on and off, with
 *     the AVX-512 VBMI, AVX-512, AVX2 and portable steps, into outputs whose rows are
 *     and are not 16- and 32-byte aligned;
 *   - a photo-sized image through the batch decoder, where streaming engages
 *     by itself. */
#include <criterion/criterion.h>
#include "tc_timeout.h"
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3gpu.h"
#include "l3_convert.h"
#include "cpu_convert.h"
#include "tc_file.h"

static const float MEAN[4] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float STD[4] = {0.229f, 0.224f, 0.225f, 0.25f};
static const float SCALE[4] = {1.0f, 2.0f, 255.0f, 0.5f};
static const int CHANNELS[] = {0, 1, 3, 4};

/* Format k of 48: layout x dtype x channels x (floats: normalise or not). */
static int format_at(int k, struct l3gpu_format *f)
{
    int n = 0;
    for (int lay = 0; lay < 2; lay++)
        for (int dt = 0; dt < 4; dt++)
            for (int ch = 0; ch < 4; ch++)
                /* floats: plain, mean/std with scales, mean/std alone */
                for (int nm = 0; nm < (dt >= 2 ? 3 : 1); nm++, n++)
                    if (n == k) {
                        static const float ONE[4] = {1.0f, 1.0f, 1.0f, 1.0f};
                        l3gpu_format_init(f);
                        f->layout = lay;
                        f->dtype = dt;
                        f->channels = CHANNELS[ch];
                        f->normalize = nm != 0;
                        memcpy(f->mean, MEAN, sizeof MEAN);
                        memcpy(f->std, STD, sizeof STD);
                        memcpy(f->scale, nm == 2 ? ONE : SCALE, sizeof SCALE);
                        return 1;
                    }
    return 0;
}

static void format_name(char *buf, size_t len, const struct l3gpu_format *f)
{
    static const char *dt[] = {"u8", "u16", "f32", "f16"};
    snprintf(buf, len, "%s %s ch%d%s%s", f->layout == L3GPU_HWC ? "HWC" : "CHW", dt[f->dtype],
             f->channels, f->normalize ? " norm" : "",
             f->normalize && f->scale[1] == 1.0f ? " (scale 1)" : "");
}

/* A whole file; the test fails when it cannot be read. */
static void *read_file(const char *path, size_t *size)
{
    void *d = tc_slurp(path, size);
    cr_assert_not_null(d, "%s: %s", path, strerror(errno));
    return d;
}

/* The valid PngSuite files (names not starting with 'x'), sorted. */
static size_t pngsuite(char ***files_ret)
{
    const char *c = getenv("L3_CORPUS");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/pngsuite", c && *c ? c : "/var/cache/l3fs-corpus");
    DIR *d = opendir(dir);
    if (!d)
        cr_skip_test("%s absent (scripts/fetch-pngsuite.sh fetches it)", dir);
    char **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".png") || e->d_name[0] == 'x')
            continue;
        v = realloc(v, (n + 1) * sizeof *v);
        cr_assert_not_null(v);
        v[n] = malloc(strlen(dir) + l + 2);
        cr_assert_not_null(v[n]);
        sprintf(v[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen names */
        for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
            char *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    cr_assert_geq(n, 35, "%s: %zu PngSuite files, expected at least 35", dir, n);
    *files_ret = v;
    return n;
}

/* An image: its description, source samples (tight) and L3 encoding. */
struct img {
    struct l3_info info;
    uint8_t *px;
    size_t px_size;
    void *l3;
    size_t l3_size;
    char name[96];
};

static void img_encode(struct img *m, unsigned tile)
{
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = tile;
    cr_assert_eq(l3_encode(&m->info, m->px, 0, &eo, &m->l3, &m->l3_size), L3_OK, "%s",
                 m->name);
    /* the decoder gives the source samples back */
    void *dec = malloc(m->px_size);
    cr_assert_eq(l3_decode(m->l3, m->l3_size, dec, m->px_size, 0, NULL), L3_OK);
    cr_assert(!memcmp(dec, m->px, m->px_size), "%s: l3_decode differs from the source",
              m->name);
    free(dec);
}

/* m tiled to w x h (sample (x, y) = source (x % W, y % H)). */
static void img_tiled(const struct img *src, uint32_t w, uint32_t h, unsigned tile,
                      struct img *m)
{
    memset(m, 0, sizeof *m);
    m->info = src->info;
    m->info.width = w;
    m->info.height = h;
    size_t sb = l3_sample_bytes(&src->info) * src->info.channels;
    m->px_size = (size_t)w * h * sb;
    m->px = malloc(m->px_size);
    cr_assert_not_null(m->px);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            memcpy(m->px + ((size_t)y * w + x) * sb,
                   src->px + ((size_t)(y % src->info.height) * src->info.width +
                              x % src->info.width) * sb,
                   sb);
    snprintf(m->name, sizeof m->name, "%.60s tiled %ux%u/%u", src->name, w, h, tile);
    img_encode(m, tile);
}

static void img_free(struct img *m)
{
    free(m->px);
    free(m->l3);
}

/* Every format of a batch of two copies of m (contiguous, 2 threads; then
 * separate outputs, 1 thread) equals l3gpu_cpu_convert of its pixels. */
static void check_batch(const struct img *m)
{
    struct l3gpu_input in[2] = {{m->l3, m->l3_size}, {m->l3, m->l3_size}};
    struct l3gpu_format f;
    for (int k = 0; format_at(k, &f); k++) {
        char name[64];
        format_name(name, sizeof name, &f);
        size_t bytes;
        uint32_t shape[3];
        cr_assert_eq(l3gpu_output_shape(&m->info, &f, shape, &bytes), L3GPU_OK);
        uint8_t *ref = malloc(bytes), *out = malloc(2 * bytes), *o1 = malloc(bytes + 1);
        cr_assert(ref && out && o1);
        cr_assert_eq(l3gpu_cpu_convert(&m->info, m->px, 0, &f, ref), L3GPU_OK);
        memset(out, 0xA5, 2 * bytes); /* poison: every byte must be written */
        int status[2] = {-1, -1};
        cr_assert_eq(l3gpu_cpu_decode_batch(in, 2, &f, out, 2 * bytes, NULL, status, 2),
                     L3GPU_OK, "%s %s", m->name, name);
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(status[i], 0);
            for (size_t b = 0; b < bytes; b++)
                if (out[i * bytes + b] != ref[b])
                    cr_assert_fail("%s -> %s: slot %d byte %zu is %02x, reference %02x",
                                   m->name, name, i, b, out[i * bytes + b], ref[b]);
        }
        memset(o1, 0x5A, bytes);
        void *ptrs[2] = {o1, out};
        cr_assert_eq(l3gpu_cpu_decode_batch(in, 2, &f, NULL, 0, ptrs, status, 1), L3GPU_OK);
        cr_assert(!memcmp(o1, ref, bytes) && !memcmp(out, ref, bytes),
                  "%s -> %s: separate outputs differ from the reference", m->name, name);
        free(ref);
        free(out);
        free(o1);
    }
}

Test(cpu_convert, pngsuite_every_format_matches_reference, .timeout = TC_TIMEOUT(600))
{
    char **files;
    size_t n = pngsuite(&files);
    unsigned models[5][17] = {{0}}; /* colour x depth seen */
    for (size_t i = 0; i < n; i++) {
        size_t sz;
        void *png = read_file(files[i], &sz);
        struct img src;
        memset(&src, 0, sizeof src);
        snprintf(src.name, sizeof src.name, "%s", strrchr(files[i], '/') + 1);
        void *px = NULL;
        cr_assert_eq(l3_png_decode(png, sz, NULL, &src.info, &px, &src.px_size), L3_OK, "%s",
                     src.name);
        src.px = px;
        models[src.info.color][src.info.bit_depth]++;
        /* as encoded with 16x16 tiles, and tiled to 150x70 with 32x32 tiles
         * (partial edge tiles; rows of odd byte counts) */
        img_encode(&src, 16);
        check_batch(&src);
        struct img big;
        img_tiled(&src, 150, 70, 32, &big);
        check_batch(&big);
        img_free(&big);
        img_free(&src);
        free(png);
        free(files[i]);
    }
    free(files);
    /* every colour type and bit depth PNG has was among them */
    static const unsigned want[][2] = {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {1, 8},
                                       {1, 16}, {2, 8}, {2, 16}, {3, 8}, {3, 16}, {4, 1},
                                       {4, 2}, {4, 4}, {4, 8}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        cr_assert(models[want[k][0]][want[k][1]], "no PngSuite file of colour %u depth %u",
                  want[k][0], want[k][1]);
}

struct conv_sink {
    const struct l3cv_fast *fc;
    uint8_t *out;
    void *scratch;
};

static int conv_sink(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    struct conv_sink *s = arg;
    cr_assert_eq(worker, 0);
    l3cv_fast_tile(s->fc, t, s->out, s->scratch);
    return 0;
}

/* Converts m tile by tile: l3_decode_tiles hands each tile to l3cv_fast_tile. */
static void convert_tiles(const struct img *m, const struct l3cv_fast *fc, uint8_t *out)
{
    void *scratch = aligned_alloc(64, (L3CV_FAST_SCRATCH(m->info.width) + 63) & ~(size_t)63);
    cr_assert_not_null(scratch);
    struct conv_sink s = {fc, out, scratch};
    cr_assert_eq(l3_decode_tiles(m->l3, m->l3_size, NULL, conv_sink, &s), L3_OK);
    free(scratch);
}

Test(cpu_convert, streamed_and_unaligned_outputs_match_reference, .timeout = TC_TIMEOUT(600))
{
    char **files;
    size_t n = pngsuite(&files);
    size_t tested = 0, computed = 0, computed_norm[2] = {0, 0}, computed_rgb = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sz;
        void *png = read_file(files[i], &sz);
        struct img src;
        memset(&src, 0, sizeof src);
        snprintf(src.name, sizeof src.name, "%s", strrchr(files[i], '/') + 1);
        void *px = NULL;
        cr_assert_eq(l3_png_decode(png, sz, NULL, &src.info, &px, &src.px_size), L3_OK);
        src.px = px;
        /* 128 wide (rows of whole 16-byte units) and 77 wide (rows that
         * start anywhere), 64x64 tiles */
        for (int wi = 0; wi < 2; wi++) {
            struct img m;
            img_tiled(&src, wi ? 77 : 128, 45, 64, &m);
            struct l3gpu_format f;
            for (int k = 0; format_at(k, &f); k++) {
                struct l3cv_image cv;
                cr_assert_eq(l3cv_prepare(&m.info, &f, &cv), L3GPU_OK);
                size_t bytes;
                cr_assert_eq(l3gpu_output_shape(&m.info, &f, NULL, &bytes), L3GPU_OK);
                uint8_t *ref = malloc(bytes);
                cr_assert_eq(l3gpu_cpu_convert(&m.info, m.px, 0, &f, ref), L3GPU_OK);
                size_t es = l3gpu_dtype_size(f.dtype);
                uint8_t *mem = malloc(bytes + 128);
                uint8_t *base = (uint8_t *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
                /* output at a line, one element past it, one short of 16, at 16 (not 32) */
                const size_t shifts[4] = {0, es, 16 - es, 16};
                for (int variant = 0; variant < 21; variant++)
                    for (int si = 0; si < 4; si++) {
                        /* plain / streamed stores x lookups at level 0-3 (portable,
                         * AVX2, AVX-512, AVX-512 VBMI: kind 0-3) / computed outputs at
                         * level 1-3 (kind 4-6); variants 14-20: streamed again with
                         * the other choice of l3cv_whole_lines() */
                        int stream = variant >= 14 || (variant & 1);
                        int kind = variant >= 14 ? variant - 14 : variant >> 1;
                        int level = kind >= 4 ? kind - 3 : kind;
                        if (level > l3cv_simd_level())
                            continue;
                        size_t shift = shifts[si];
                        struct l3cv_fast fc;
                        cr_assert_eq(l3cv_fast_prepare(&cv, stream ? 0 : SIZE_MAX, &fc), 0);
                        fc.simd = (uint8_t)level;
                        if (variant >= 14)
                            fc.whole_lines = (uint8_t)!fc.whole_lines;
                        if (kind >= 4) {
                            l3cv_arith_prepare(&fc);
                            computed += fc.arith;
                            if (f.normalize) /* with channel scales / mean and std alone */
                                computed_norm[f.scale[1] == 1.0f] += fc.arith;
                            if (cv.out_channels == 3 && f.layout == L3GPU_HWC &&
                                m.info.bit_depth <= 8) /* from the rows, in registers */
                                computed_rgb += fc.arith;
                        } else {
                            fc.arith = 0; /* the gathers and tables */
                        }
                        cr_assert_eq(fc.stream, stream && m.info.bit_depth <= 8,
                                     "16-bit outputs are never streamed");
                        uint8_t *out = base + shift;
                        memset(out, 0xA5, bytes);
                        convert_tiles(&m, &fc, out);
                        char name[64];
                        format_name(name, sizeof name, &f);
                        static const char *const kinds[7] = {
                            "portable",          "AVX2",
                            "AVX-512",           "AVX-512 VBMI",
                            "AVX2 computed",     "AVX-512 computed",
                            "AVX-512 VBMI computed"};
                        cr_assert(!memcmp(out, ref, bytes),
                                  "%s -> %s, %s stores (whole lines %d), %s lookups, output "
                                  "%zu bytes past a line: differs from the reference",
                                  m.name, name, stream ? "streamed" : "plain", fc.whole_lines,
                                  kinds[kind], shift);
                        tested++;
                    }
                free(mem);
                free(ref);
            }
            img_free(&m);
        }
        free(src.px);
        free(png);
        free(files[i]);
    }
    free(files);
    cr_assert_gt(tested, 0);
    /* the computed outputs took over somewhere (uint16 and float outputs of
     * images without a palette), where this CPU has AVX2 */
    if (l3cv_simd_level() >= 1) {
        cr_assert_gt(computed, 0);
        /* both classes of normalisation (cpu_convert_arith.c, value8) */
        cr_assert_gt(computed_norm[0], 0, "no computed output with channel scales");
        cr_assert_gt(computed_norm[1], 0, "no computed output with mean/std alone");
        cr_assert_gt(computed_rgb, 0, "no computed three-channel HWC output");
    }
}

Test(cpu_convert, photo_sized_batch_streams_and_matches_reference, .timeout = TC_TIMEOUT(600))
{
    /* an 8-bit RGB image (smooth + noisy areas) 1003 x 400: every output of
     * 1 MiB or more streams; 1003 makes most rows start unaligned */
    struct img m;
    memset(&m, 0, sizeof m);
    m.info.width = 1003;
    m.info.height = 400;
    m.info.color = L3_COLOR_RGB;
    m.info.channels = 3;
    m.info.bit_depth = 8;
    snprintf(m.name, sizeof m.name, "rgb8 1003x400");
    m.px_size = (size_t)1003 * 400 * 3;
    m.px = malloc(m.px_size);
    uint64_t s = 1;
    for (size_t i = 0; i < m.px_size; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t p = i / 3;
        m.px[i] = (uint8_t)((p % 1003) / 4 + (p / 1003) / 2 + ((p / 64) % 7 == 0 ? s >> 60 : 0));
    }
    img_encode(&m, 64);
    struct l3cv_image cv;
    struct l3gpu_format f;
    format_at(32 + 8 + 1, &f); /* CHW (after 32 HWC), past u8 and u16: f32 ch0 norm */
    cr_assert(f.layout == L3GPU_CHW && f.dtype == L3GPU_F32 && f.normalize);
    cr_assert_eq(l3cv_prepare(&m.info, &f, &cv), L3GPU_OK);
    struct l3cv_fast fc;
    cr_assert_eq(l3cv_fast_prepare(&cv, L3CV_STREAM_MIN, &fc), 0);
    cr_assert(fc.stream, "a 4.8 MB output is streamed");
    check_batch(&m);
    img_free(&m);
}
