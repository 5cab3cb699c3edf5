/* test_lz_planes.c — LZ planes (docs/FORMAT.md) built by hand bit for bit:
 * the spec's example, every kind of token, escapes in SIMD lane pairs,
 * corruption of each field, every mode byte. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"
#include "l3_le.h"
#include "l3_tile.h"
#include "format_shared.h"

/* ---------------------------------------------------------------- LZ planes */

/* A bit writer for hand-built plane streams: LSB first, as the format reads
 * them. */
struct tbits {
    uint8_t b[1024];
    size_t n; /* bits written */
};

static void tb_put(struct tbits *t, uint32_t v, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++, t->n++) {
        cr_assert_lt(t->n, 8 * sizeof t->b);
        if ((v >> i) & 1)
            t->b[t->n / 8] |= (uint8_t)(1u << (t->n % 8));
    }
}

static void tb_zeros(struct tbits *t, unsigned k)
{
    for (unsigned i = 0; i < k; i++)
        tb_put(t, 0, 1);
}

static size_t tb_bytes(const struct tbits *t)
{
    return (t->n + 7) / 8;
}

/* Exp-Golomb order k: q zeros, a one, q + k bits of v - (2^q - 1) * 2^k. */
static void tb_eg(struct tbits *t, uint32_t v, unsigned k)
{
    unsigned q = 0;
    while ((((uint64_t)2 << q) - 1) << k <= v)
        q++;
    tb_zeros(t, q);
    tb_put(t, 1, 1);
    uint32_t low = v - (uint32_t)((((uint64_t)1 << q) - 1) << k);
    tb_put(t, low, q + k);
}

/* Group symbol s after prev: "1" same, "01" +1, "001" -1, "000" + 5 bits. */
static void tb_symbol(struct tbits *t, unsigned s, unsigned *prev)
{
    if (s == *prev)
        tb_put(t, 1, 1);
    else if (s == *prev + 1)
        tb_put(t, 2, 2);
    else if (s + 1 == *prev)
        tb_put(t, 4, 3);
    else
        tb_put(t, s << 3, 8);
    *prev = s;
}

/* Rice code of zigzag value v with parameter k; escape after 16 zeros. */
static void tb_rice(struct tbits *t, uint32_t v, unsigned k, unsigned depth)
{
    uint32_t q = v >> k;
    if (q < 16) {
        tb_zeros(t, q);
        tb_put(t, 1, 1);
        tb_put(t, v & ((1u << k) - 1), k);
    } else {
        tb_zeros(t, 16);
        tb_put(t, v, depth);
    }
}

static uint32_t zz(int r)
{
    return r >= 0 ? 2u * (uint32_t)r : 2u * (uint32_t)(-(r + 1)) + 1;
}

/* GRAD planes of 64 x 4 built by hand, one per lane of two vectors: small
 * residuals and escaped ones (16 zeros, then 8 raw bits) at every position of
 * a group, alone and side by side, somewhere else in every lane. The AVX2
 * lane decoder reads two codes from each 64-bit window, so an escape is the
 * first code of a pair in some lanes and the second in others; every lane
 * must be accepted and give the reference decoder's samples. */
Test(format, simd_lanes_decode_escapes_in_pairs)
{
    if (!l3_simd_available())
        cr_skip_test("no SIMD lane decoder on this CPU");
    enum { W = 64, H = 4, LANES = 16, STRIDE = 1024 + L3_SIMD_SLACK };
    static struct tbits t[LANES];
    static uint16_t want[LANES][W * H];
    static uint8_t out[LANES][W * H];
    uint8_t *buf = calloc(LANES, STRIDE);
    struct l3_simd_lane lanes[LANES];
    unsigned escapes = 0, first = 0;
    for (unsigned l = 0; l < LANES; l++) {
        memset(&t[l], 0, sizeof t[l]);
        unsigned prev = 0;
        uint64_t s = 100 + l;
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x0 = 0; x0 < W; x0 += L3_GROUP) {
                const unsigned k = 2;
                tb_symbol(&t[l], k + 1, &prev);
                for (uint32_t x = x0; x < x0 + L3_GROUP; x++) {
                    int esc = (x + 3 * y + l) % 7 == 0 || (x + l) % 13 == 5 || (x + l) % 13 == 6;
                    uint32_t v = esc ? 64 + (uint32_t)(tc_splitmix64(&s) % 190)
                                     : (uint32_t)(tc_splitmix64(&s) % 12);
                    tb_rice(&t[l], v, k, 8);
                    escapes += esc;
                    first += esc && x % 2 == 0;
                }
            }
        size_t len = tb_bytes(&t[l]);
        cr_assert_lt(len + L3_SIMD_SLACK, (size_t)STRIDE);
        cr_assert_eq(l3_tile_plane_decode(t[l].b, len, L3_PLANE_GRAD, W, H, 8, want[l]), L3_OK,
                     "lane %u: the reference decoder refuses the stream", l);
        memcpy(buf + (size_t)l * STRIDE, t[l].b, len);
        lanes[l].stream = buf + (size_t)l * STRIDE;
        lanes[l].len = (uint32_t)len;
        lanes[l].mode = L3_PLANE_GRAD;
        lanes[l].out = out[l];
        lanes[l].tag = l;
    }
    cr_assert(first > 0 && first < escapes, "escapes %u, first of a pair %u", escapes, first);
    void *scr = aligned_alloc(64, l3_simd_scratch_size(W));
    uint32_t ok[L3_SIMD_MAX_LANES / 32];
    l3_simd_decode_planes(lanes, LANES, W, H, 8, scr, 0, ok);
    cr_assert_eq(ok[0] & 0xffffu, 0xffffu, "lanes left to the reference: %#x",
                 ~ok[0] & 0xffffu);
    for (unsigned l = 0; l < LANES; l++)
        for (int i = 0; i < W * H; i++)
            cr_assert_eq(out[l][i], want[l][i], "lane %u sample %d: %u, expected %u", l, i,
                         out[l][i], want[l][i]);
    free(scr);
    free(buf);
}

/* A token list: a literal run of `run` residuals, then (when count > 0) a copy
 * of `count` residuals from `dist` back. k: Rice parameter of the run's
 * non-zero groups, or -1 for the smallest one that needs no escape. */
struct ltok {
    unsigned run;
    int res[24];
    int k;
    unsigned count, dist;
};

/* Writes the LZ stream of a token list with groups of gs. */
static size_t lz_stream(const struct ltok *tok, size_t ntok, unsigned depth, unsigned gs,
                        struct tbits *t)
{
    memset(t, 0, sizeof *t);
    unsigned prev = 0;
    for (size_t i = 0; i < ntok; i++) {
        tb_eg(t, tok[i].run, L3_LZ_RUN_K);
        for (unsigned g0 = 0; g0 < tok[i].run; g0 += gs) {
            unsigned g = tok[i].run - g0 < gs ? tok[i].run - g0 : gs;
            uint32_t mx = 0;
            for (unsigned j = 0; j < g; j++)
                mx |= zz(tok[i].res[g0 + j]);
            if (!mx) {
                tb_symbol(t, 0, &prev);
                continue;
            }
            unsigned k = 0;
            if (tok[i].k >= 0)
                k = (unsigned)tok[i].k;
            else
                while ((mx >> k) >= 16)
                    k++;
            tb_symbol(t, k + 1, &prev);
            for (unsigned j = 0; j < g; j++)
                tb_rice(t, zz(tok[i].res[g0 + j]), k, depth);
        }
        if (tok[i].count) {
            tb_eg(t, tok[i].count - 3, 4);
            unsigned nb = 0;
            while ((tok[i].dist >> nb) > 1)
                nb++;
            tb_put(t, nb + 1, 5);
            tb_put(t, tok[i].dist, nb); /* the bits below the leading one */
        }
    }
    return tb_bytes(t);
}

/* The prediction of sample (x, y) for a predictor kind, from the samples
 * above and to the left (written out from the format's definitions). */
static uint32_t ref_pred(const uint32_t *s, uint32_t w, uint32_t x, uint32_t y, unsigned kind,
                         uint32_t mask)
{
#define S(xx, yy) s[(yy) * w + (xx)]
    uint32_t first_above = y ? S(0, y - 1) : 0;
    if (kind == L3_PLANE_LEFT2)
        return x >= 2 ? S(x - 2, y) : first_above;
    if (x == 0)
        return first_above;
    if (kind == L3_PLANE_LEFT || y == 0)
        return S(x - 1, y);
    uint32_t a = S(x - 1, y), b = S(x, y - 1), c = S(x - 1, y - 1);
#undef S
    if (kind == L3_PLANE_GRAD)
        return (a + b - c) & mask;
    uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (c >= hi)
        return lo;
    if (c <= lo)
        return hi;
    return a + b - c;
}

/* Expected samples of a token list: residuals in raster order (a copy
 * repeats the residuals `dist` back, one by one), then each sample is its
 * prediction plus its residual modulo 2^depth. */
static void lz_expect(const struct ltok *tok, size_t ntok, uint32_t w, uint32_t h,
                      unsigned depth, unsigned kind, uint32_t *out)
{
    const uint32_t n = w * h, mask = (1u << depth) - 1;
    int res[256];
    uint32_t pos = 0;
    for (size_t i = 0; i < ntok; i++) {
        for (unsigned j = 0; j < tok[i].run; j++)
            res[pos++] = tok[i].res[j];
        for (unsigned j = 0; j < tok[i].count; j++, pos++)
            res[pos] = res[pos - tok[i].dist];
    }
    cr_assert_eq(pos, n, "token list covers %u of %u samples", pos, n);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (ref_pred(out, w, i % w, i / w, kind, mask) + (uint32_t)res[i]) & mask;
}

/* Decodes a token list's stream as every LZ mode (4 kinds, both group
 * sizes, where the tokens do not depend on them) and compares with the
 * expectation. */
static void lz_check(const char *name, const struct ltok *tok, size_t ntok, uint32_t w,
                     uint32_t h, unsigned depth)
{
    static const unsigned kinds[] = {L3_PLANE_MED, L3_PLANE_GRAD, L3_PLANE_LEFT2,
                                     L3_PLANE_LEFT};
    for (unsigned sh = 0; sh < 2; sh++) {
        struct tbits t;
        size_t len = lz_stream(tok, ntok, depth, sh ? L3_GROUP_SHORT : L3_GROUP, &t);
        uint8_t *heap = malloc(len); /* exact size: ASan sees overreads */
        memcpy(heap, t.b, len);
        for (size_t k = 0; k < 4; k++) {
            unsigned mode = kinds[k] | L3_PLANE_LZ | (sh ? L3_PLANE_SHORT : 0);
            uint32_t exp[256] = {0};
            uint16_t got[257];
            lz_expect(tok, ntok, w, h, depth, kinds[k], exp);
            got[w * h] = 0xbeef;
            int st = l3_tile_plane_decode(heap, len, mode, w, h, depth, got);
            cr_assert_eq(st, L3_OK, "%s mode %#x: %s", name, mode, l3_strerror(st));
            for (uint32_t i = 0; i < w * h; i++)
                cr_assert_eq(got[i], exp[i], "%s mode %#x: sample %u (%u,%u) is %u, expected %u",
                             name, mode, i, i % w, i / w, got[i], exp[i]);
            cr_assert_eq(got[w * h], 0xbeef, "%s: wrote past w*h", name);
            /* one byte more or less: the stream end rule */
            uint8_t *longer = calloc(1, len + 1);
            memcpy(longer, heap, len);
            cr_assert_eq(l3_tile_plane_decode(longer, len + 1, mode, w, h, depth, got),
                         L3_ERR_CORRUPT, "%s mode %#x: a byte too many", name, mode);
            cr_assert_eq(l3_tile_plane_decode(heap, len - 1, mode, w, h, depth, got),
                         L3_ERR_CORRUPT, "%s mode %#x: a byte too few", name, mode);
            free(longer);
        }
        free(heap);
    }
}

/* The worked example of docs/FORMAT.md section 6.7: a literal run of 2 and a
 * copy at distance 1 that fills the plane (nothing follows it). */
Test(format, spec_example_lz_plane)
{
    const uint8_t stream[8] = {0x06, 0x21, 0x73, 0x04};
    uint16_t out[6];
    cr_assert_eq(l3_tile_plane_decode(stream, 4, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], 10 + 2 * i, "sample %d: %u", i, out[i]);
    /* the same bits from the test's writer */
    const struct ltok tok[] = {{2, {10, 2}, 3, 4, 1}};
    struct tbits t;
    cr_assert_eq(lz_stream(tok, 1, 8, L3_GROUP, &t), 4);
    cr_assert_eq(t.n, 31);
    cr_assert(memcmp(t.b, stream, 4) == 0, "writer: %02x %02x %02x %02x", t.b[0], t.b[1],
              t.b[2], t.b[3]);
    /* a fifth byte, or only three */
    const uint8_t longer[8] = {0x06, 0x21, 0x73, 0x04, 0x01};
    cr_assert_eq(l3_tile_plane_decode(longer, 5, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(stream, 3, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_ERR_CORRUPT);
}

/* An 8x2 plane with the left predictor, worked out by hand: a literal run,
 * an overlapping copy (dist 2 < count 7) that crosses into the second row
 * (where x = 0 predicts from the sample above), a final literal run with an
 * escaped value and a wrap modulo 256. */
Test(format, lz_plane_by_hand)
{
    const struct ltok tok[] = {
        {3, {5, 3, -2}, -1, 7, 2},
        {6, {0, 1, -1, 2, 0, -128}, 2, 0, 0}, /* k = 2: 255 >> 2 >= 16, escaped */
    };
    struct tbits t;
    size_t len = lz_stream(tok, 2, 8, L3_GROUP, &t);
    uint16_t out[16];
    cr_assert_eq(l3_tile_plane_decode(t.b, len, L3_PLANE_LEFT | L3_PLANE_LZ, 8, 2, 8, out),
                 L3_OK);
    static const uint16_t want[16] = {5, 8, 6, 9, 7, 10, 8, 11, 3, 6, 6, 7, 6, 8, 8, 136};
    for (int i = 0; i < 16; i++)
        cr_assert_eq(out[i], want[i], "sample %d: %u, expected %u", i, out[i], want[i]);
    /* the independent expectation agrees with the hand-worked values */
    uint32_t exp[16] = {0};
    lz_expect(tok, 2, 8, 2, 8, L3_PLANE_LEFT, exp);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(exp[i], want[i]);
    lz_check("8x2", tok, 2, 8, 2, 8);
}

/* MED/GRAD/LEFT2/LEFT on a 6x3 plane: copies that cross rows (so copied
 * residuals land on x = 0, predicted from above), an empty literal run
 * between two copies, a copy that reaches back to sample 0, and a stream
 * that ends with a copy. */
Test(format, lz_planes_every_kind)
{
    const struct ltok b[] = {
        {4, {100, -3, 7, 0}, -1, 5, 3},   /* copy of samples 1..5 to 4..8 */
        {0, {0}, -1, 3, 9},               /* copy of 0..2 to 9..11 */
        {2, {-50, 12}, -1, 4, 7},         /* copy of 7..10 to 14..17: the end */
    };
    lz_check("6x3 copies", b, 3, 6, 3, 8);
    /* one long run over a row boundary: groups of 16 vs 8 + 3, dist 1 copy,
     * an all-zero group (symbol 0) at the end */
    const struct ltok d[] = {
        {11, {3, -1, 4, 1, -5, 9, -2, 6, 5, -3, 5}, -1, 4, 1},
        {3, {0, 0, 0}, -1, 0, 0},
    };
    lz_check("6x3 long run", d, 2, 6, 3, 8);
    /* 16 bits: residuals at both ends of the range (escapes), a copy of 20
     * (length code with a longer prefix) */
    const struct ltok e[] = {
        {5, {30000, -20000, 1, -1, -32768}, -1, 20, 4},
        {7, {0, 5, -5, 32767, 2, 2, 2}, 1, 0, 0},
    };
    lz_check("8x4 depth 16", e, 2, 8, 4, 16);
    /* sub-byte depths: every residual of the range */
    const struct ltok f[] = {
        {4, {1, -1, -2, 1}, -1, 6, 3},
        {5, {0, 1, -2, 0, -1}, -1, 0, 0},
    };
    lz_check("5x3 depth 2", f, 2, 5, 3, 2);
    const struct ltok g[] = {
        {5, {-1, 0, -1, -1, 0}, -1, 8, 5},
        {3, {0, -1, 0}, 0, 0, 0},
    };
    lz_check("4x4 depth 1", g, 2, 4, 4, 1);
    /* a copy distance with a long bit-length field (dist 37 = nb 6) */
    const struct ltok l[] = {
        {20, {9, -8, 7, -6, 5, -4, 3, -2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, -1, 20, 20},
        {0, {0}, -1, 3, 37},
        {5, {-7, 7, -7, 7, -7}, 3, 0, 0},
    };
    lz_check("16x3 far copy", l, 3, 16, 3, 8);
}

/* Every way an LZ stream can break gives L3_ERR_CORRUPT. */
Test(format, lz_plane_corruption)
{
    const unsigned LZL = L3_PLANE_LEFT | L3_PLANE_LZ;
    struct tbits t;
    uint16_t out[64];
    size_t len;
#define DECODES(mode, w, h, depth) \
    l3_tile_plane_decode(t.b, tb_bytes(&t), (mode), (w), (h), (depth), out)
    /* copy distance: dist == pos is the first sample, dist > pos is not there */
    const struct ltok ok[] = {{3, {1, 2, 3}, -1, 7, 3}, {6, {0}, -1, 0, 0}};
    lz_stream(ok, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_OK);
    const struct ltok far[] = {{3, {1, 2, 3}, -1, 7, 4}, {6, {0}, -1, 0, 0}};
    lz_stream(far, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "dist > pos");
    const struct ltok first[] = {{0, {0}, -1, 3, 1}, {13, {0}, -1, 0, 0}};
    lz_stream(first, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "copy at position 0");
    /* copy and run lengths: up to the end of the plane, not past it */
    const struct ltok to_end[] = {{3, {1, 2, 3}, -1, 13, 1}};
    lz_stream(to_end, 1, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_OK);
    const struct ltok past[] = {{3, {1, 2, 3}, -1, 14, 1}};
    lz_stream(past, 1, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "count > n - pos");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 17, 0); /* a literal run of 17 in a plane of 16 */
    tb_put(&t, 1, 1);
    tb_zeros(&t, 17 * 8);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "run > n - pos");
    /* Exp-Golomb prefixes: 18 zeros are invalid (in a run and in a copy length) */
    memset(&t, 0, sizeof t);
    tb_zeros(&t, 18);
    tb_put(&t, 1, 1);
    tb_zeros(&t, 40);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "run prefix of 18 zeros");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 0, 0);
    tb_zeros(&t, 18);
    tb_put(&t, 1, 1);
    tb_zeros(&t, 22);
    tb_put(&t, 2, 5);
    tb_put(&t, 0, 1);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "length prefix of 18 zeros");
    /* distance bit-length field: 0 and 18 are invalid; 17 reaches past any
     * tile (dist >= 65536); 2 bits for dist 3 with a first sample is fine */
    for (unsigned nb = 0; nb < 32; nb++) {
        memset(&t, 0, sizeof t);
        tb_eg(&t, 3, 0);
        unsigned prev = 0;
        tb_symbol(&t, 1, &prev); /* k = 0: three zero residuals */
        tb_put(&t, 7, 3);
        tb_eg(&t, 0, 4); /* count 3 */
        tb_put(&t, nb, 5);
        tb_zeros(&t, nb ? nb - 1 : 0); /* dist = 2^(nb-1) */
        tb_eg(&t, 10, 0);
        tb_symbol(&t, 0, &prev);
        int st = DECODES(LZL, 8, 2, 8);
        if (nb >= 1 && nb <= 2)
            cr_assert_eq(st, L3_OK, "nb %u", nb);
        else
            cr_assert_eq(st, L3_ERR_CORRUPT, "nb %u", nb);
    }
    /* stream end: the valid stream with a byte more, a byte less, empty */
    len = lz_stream(ok, 2, 8, L3_GROUP, &t);
    cr_assert_eq(l3_tile_plane_decode(t.b, len + 1, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(t.b, len - 1, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(t.b, 0, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    /* a Rice value >= 2^depth inside a run (k = 7, q = 2: 256 at depth 8; k = 2,
     * q = 1: 4 at depth 2) */
    for (int depth = 2; depth <= 8; depth += 6) {
        unsigned k = depth == 8 ? 7 : 2;
        for (uint32_t v = (1u << depth) - 2; v <= (1u << depth); v++) {
            memset(&t, 0, sizeof t);
            unsigned prev = 0;
            tb_eg(&t, 16, 0);
            tb_symbol(&t, k + 1, &prev);
            for (int i = 0; i < 16; i++)
                tb_rice(&t, i == 9 ? v : 0, k, (unsigned)depth);
            int st = DECODES(LZL, 8, 2, (unsigned)depth);
            cr_assert_eq(st, v >> depth ? L3_ERR_CORRUPT : L3_OK, "depth %d value %u", depth, v);
        }
    }
    /* group symbols: above depth + 1, and one below 0 */
    memset(&t, 0, sizeof t);
    tb_eg(&t, 16, 0);
    tb_put(&t, 10u << 3, 8);
    tb_zeros(&t, 16 * 10);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "symbol 10 at depth 8");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 16, 0);
    tb_put(&t, 4, 3); /* prev - 1 with prev = 0 */
    tb_zeros(&t, 8);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "symbol below 0");
    /* an LZ plane of one sample per tile row in a 1x1 plane: a run of 1 */
    memset(&t, 0, sizeof t);
    tb_eg(&t, 1, 0);
    {
        unsigned prev = 0;
        tb_symbol(&t, 3, &prev);
        tb_rice(&t, zz(-9), 2, 8);
    }
    cr_assert_eq(DECODES(LZL, 1, 1, 8), L3_OK);
    cr_assert_eq(out[0], 247);
#undef DECODES
}

/* Which mode bytes are valid: CONST and RAW without flags; MED, GRAD, LEFT2
 * with any of SHORT and LZ; LEFT only with LZ; nothing else. The tile header
 * parser and the plane decoder agree. */
static int spec_mode_valid(unsigned m)
{
    unsigned kind = m & 0x0f, fl = m & 0xf0;
    if (fl & ~0x30u)
        return 0;
    if (kind <= 1)
        return fl == 0;
    if (kind <= 4)
        return 1;
    return kind == 5 && (fl & 0x20);
}

Test(format, lz_mode_bytes)
{
    /* a 1-plane tile: flags byte, mode byte, stream length 0 */
    for (unsigned m = 0; m < 256; m++) {
        uint8_t tile[6] = {0, (uint8_t)m, 0, 0, 0, 0};
        struct l3_tile_header th;
        int st = l3_tile_parse(tile, sizeof tile, 1, &th);
        cr_assert_eq(st, spec_mode_valid(m) ? L3_OK : L3_ERR_CORRUPT, "mode byte %#x", m);
        cr_assert_eq(l3_plane_mode_valid(m), spec_mode_valid(m), "mode byte %#x", m);
    }
    /* invalid modes are refused by the plane decoder even on streams that
     * are valid for the mode without the offending bits */
    const uint8_t med[8] = {0x10, 0x59, 0x30};     /* section 6.4: MED 4x1 */
    const uint8_t raw[16] = {1, 2, 3, 4, 5, 6, 7, 8}; /* 8x1 depth 8 RAW */
    const uint8_t cst[8] = {7};
    struct tbits t;
    const struct ltok ok[] = {{3, {1, 2, 3}, -1, 7, 3}, {6, {0}, -1, 0, 0}};
    size_t len = lz_stream(ok, 2, 8, L3_GROUP, &t);
    uint16_t out[16];
    cr_assert_eq(l3_tile_plane_decode(med, 3, L3_PLANE_MED, 4, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(raw, 8, L3_PLANE_RAW, 8, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(cst, 1, L3_PLANE_CONST, 8, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(t.b, len, L3_PLANE_LEFT | L3_PLANE_LZ, 8, 2, 8, out),
                 L3_OK);
    static const unsigned bad[] = {
        L3_PLANE_LEFT, L3_PLANE_LEFT | L3_PLANE_SHORT,     /* LEFT without LZ */
        L3_PLANE_RAW | L3_PLANE_LZ, L3_PLANE_RAW | L3_PLANE_SHORT,
        L3_PLANE_CONST | L3_PLANE_LZ | L3_PLANE_SHORT, L3_PLANE_CONST | L3_PLANE_LZ,
        0x40 | L3_PLANE_MED, 0x80 | L3_PLANE_MED, 0x40 | L3_PLANE_LZ | L3_PLANE_LEFT,
        0x80 | L3_PLANE_LZ | L3_PLANE_GRAD, L3_PLANE_LZ | 6, L3_PLANE_LZ | 15, 6, 0xff};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned m = bad[i], kind = L3_PLANE_KIND(m);
        int st;
        if (kind == L3_PLANE_RAW)
            st = l3_tile_plane_decode(raw, 8, m, 8, 1, 8, out);
        else if (kind == L3_PLANE_CONST)
            st = l3_tile_plane_decode(cst, 1, m, 8, 1, 8, out);
        else if (m & L3_PLANE_LZ)
            st = l3_tile_plane_decode(t.b, len, m, 8, 2, 8, out);
        else if (kind == L3_PLANE_LEFT)
            st = l3_tile_plane_decode(t.b, len, m, 8, 2, 8, out);
        else
            st = l3_tile_plane_decode(med, 3, m, 4, 1, 8, out);
        cr_assert_eq(st, L3_ERR_CORRUPT, "mode %#x accepted by the plane decoder", m);
        /* and in a tile header, with the stream that went with it */
        uint8_t tile[64] = {0, (uint8_t)m, 8, 0, 0, 0};
        cr_assert_eq(l3_tile_parse(tile, 6 + 8, 1, &(struct l3_tile_header){0}),
                     L3_ERR_CORRUPT, "mode %#x accepted by the tile parser", m);
        uint32_t flags;
        uint16_t buf[16];
        cr_assert_eq(l3_tile_decode(tile, 6 + 8, 1, 8, 1, 8, buf, &flags), L3_ERR_CORRUPT,
                     "mode %#x accepted by the tile decoder", m);
    }
}
