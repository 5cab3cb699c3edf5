/* enc_tile.c — one tile from pixels to its coded planes, in five stages:
 *   l3_gather_planes   pixels -> one plane of samples per channel (enc_gather.c)
 *   choose_predictor   the tile's predictor, decided on the reference plane
 *   choose_transform   R, B or R-G, B-G (RGB and RGBA); the other planes' plans
 *   lz_probe           whether LZ planes are worth trying in this tile
 *   write_planes       each plane's smallest stream (LZ, predicted, raw, const)
 * Plans come from enc_rice.c, LZ streams from enc_lz.c. At the default
 * effort the predictor and the transform are chosen on sampled rows, and a
 * plane is planned in full only when it is not coded with LZ (its estimate
 * stands in until then). */
#include <string.h>

#include "enc_bits.h"
#include "enc_lz.h"
#include "enc_predict.h"
#include "enc_rice.h"
#include "enc_simd.h"
#include "enc_tile.h"

/* Rows of a tile that l3_plane_estimate looks at: every EST_STEP-th row for
 * the predictor of the reference plane (a noisier choice tips tiles to MED,
 * which decodes more slowly), every EST_STEP_XFORM-th for the colour
 * transform and the other planes (8 rather than 4: 1/8 less encode time,
 * 0.1% larger). */
#define EST_STEP 4u
#define EST_STEP_XFORM 8u

/* Candidate planes of a tile, each a slot of the worker's scratch with its
 * samples, its residuals and its group symbols. */
enum {
    SLOT_R = 0,     /* channels 0..3 (R, G, B, A; gray, alpha; index) */
    SLOT_G = 1,
    SLOT_B = 2,
    SLOT_RG = 4,    /* R-G (mod 2^depth) */
    SLOT_BG = 5,    /* B-G */
    SLOT_SPARE = 6, /* residuals and symbols of a second prediction of a
                       plane, swapped into that plane's slot when it wins */
    NSLOTS = 7
};

/* Stream buffers of a worker (enc.wbuf). */
enum {
    WBUF_RICE = 0,   /* the predicted stream of the plane being written */
    WBUF_LZ_REF = 1, /* the reference plane's LZ stream from lz_probe */
    WBUF_LZ = 2,     /* another plane's LZ stream (LEFT residuals) */
    WBUF_LZ_OWN = 3, /* ... with the plane's own predictor (effort >= 2) */
    NWBUF = L3_TILE_STREAM_BUFS
};

/* One tile being encoded by one worker. */
struct tile {
    const struct enc *e;
    uint32_t x0, y0, w, h;
    size_t n;                 /* w * h */
    unsigned depth, planes;
    size_t g16;               /* a syms buffer: groups of 16 first, then of 8 */
    uint64_t raw;             /* bytes of a raw plane */
    uint16_t *sample[NSLOTS]; /* the candidate planes */
    uint16_t *resid[NSLOTS];  /* their residuals under their plans */
    uint8_t *syms[NSLOTS];    /* their group symbols */
    struct plan plan[NSLOTS];
    int deferred[NSLOTS];     /* plan[] is an estimate, not yet planned */
    unsigned use[4];          /* slot coded as plane c */
    unsigned ref;             /* reference plane: G, or the first channel */
    unsigned pred;            /* the tile's predictor */
    int sampled;              /* choices made on sampled rows */
    uint32_t flags;           /* L3_TILE_* */
    uint8_t *wbuf[NWBUF];
};

size_t l3_tile_groups(uint32_t tile_w, uint32_t tile_h)
{
    return (size_t)tile_h * ((tile_w + L3_GROUP - 1) / L3_GROUP) +
           (size_t)tile_h * ((tile_w + L3_GROUP_SHORT - 1) / L3_GROUP_SHORT);
}

size_t l3_tile_scratch_elems(uint32_t tile_w, uint32_t tile_h)
{
    const size_t area = (size_t)tile_w * tile_h;
    /* samples and residuals of every slot, then the symbols (bytes) */
    return 2 * NSLOTS * area + (NSLOTS * l3_tile_groups(tile_w, tile_h) + 1) / 2 + 1;
}

size_t l3_tile_stream_bytes(uint32_t tile_w, uint32_t tile_h, unsigned depth)
{
    const size_t area = (size_t)tile_w * tile_h;
    /* worst predicted stream: every code escaped, plus group symbols */
    size_t b = (area * (L3_ESCAPE + depth) + l3_tile_groups(tile_w, tile_h) * 8) / 8 + 16;
    return b + l3_lz_stream_extra(area);
}

/* The tile's rectangle and its views of the worker's scratch. */
static void tile_bind(struct tile *t, const struct enc *e, unsigned worker, uint64_t tile)
{
    const struct l3_info *info = e->info;
    t->e = e;
    l3_tile_rect(info->width, info->height, info->tile_width, info->tile_height, tile,
                 &t->x0, &t->y0, &t->w, &t->h);
    t->n = (size_t)t->w * t->h;
    t->depth = info->bit_depth;
    t->planes = e->planes;
    t->g16 = (size_t)info->tile_height * ((info->tile_width + L3_GROUP - 1) / L3_GROUP);
    t->raw = ((uint64_t)t->n * t->depth + 7) / 8;
    const size_t area = e->area, groups = l3_tile_groups(info->tile_width, info->tile_height);
    uint16_t *sc = e->scratch + e->scratch_per * worker;
    uint8_t *symbase = (uint8_t *)(sc + 2 * NSLOTS * area);
    for (unsigned s = 0; s < NSLOTS; s++) {
        t->sample[s] = sc + s * area;
        t->resid[s] = sc + (NSLOTS + s) * area;
        t->syms[s] = symbase + s * groups;
        t->deferred[s] = 0;
    }
    for (unsigned c = 0; c < 4; c++)
        t->use[c] = c;
    t->ref = t->planes >= 3 ? SLOT_G : SLOT_R;
    t->pred = L3_PLANE_MED;
    t->sampled = !e->exact && t->h >= 8;
    t->flags = 0;
    uint8_t *wb = e->wbuf + NWBUF * e->wbuf_per * worker;
    for (unsigned b = 0; b < NWBUF; b++)
        t->wbuf[b] = wb + b * e->wbuf_per;
}

/* ---- plans ---- */

/* Full plan of slot s with predictor pred (residuals and symbols into the
 * slot's own buffers, or into the spare's). */
static struct plan plan_slot(const struct tile *t, unsigned s, unsigned into, unsigned pred)
{
    const struct enc *e = t->e;
    return l3_plan_plane(t->sample[s], t->w, t->h, t->depth, t->resid[into], t->syms[into],
                         e->exact, pred, t->g16, e->short_bias, e->simd);
}

/* A second plan of slot s was made in the spare: make it slot s's plan by
 * swapping the two slots' residual and symbol buffers. */
static void take_spare(struct tile *t, unsigned s, struct plan cand)
{
    t->plan[s] = cand;
    uint16_t *tz = t->resid[s];
    t->resid[s] = t->resid[SLOT_SPARE];
    t->resid[SLOT_SPARE] = tz;
    uint8_t *ts = t->syms[s];
    t->syms[s] = t->syms[SLOT_SPARE];
    t->syms[SLOT_SPARE] = ts;
}

/* A plane other than the reference plane, with the tile's predictor; after
 * LEFT2 (a dither pattern seen in the reference plane) MED is tried too,
 * since colour differences of dithered images are often smooth. */
static void plan_other(struct tile *t, unsigned s)
{
    t->plan[s] = plan_slot(t, s, s, t->pred);
    if (t->pred == L3_PLANE_LEFT2 && t->plan[s].mode >= L3_PLANE_MED) {
        struct plan m = plan_slot(t, s, SLOT_SPARE, L3_PLANE_MED);
        if (m.mode >= L3_PLANE_MED && m.bytes < t->plan[s].bytes)
            take_spare(t, s, m);
    }
}

static uint64_t estimate(const struct tile *t, unsigned s, unsigned pred, uint32_t step)
{
    if (t->e->simd)
        return l3_simd_estimate(t->sample[s], t->w, t->h, t->depth, pred,
                                t->resid[SLOT_SPARE], step);
    return l3_plane_estimate(t->sample[s], t->w, t->h, t->depth, pred,
                             t->resid[SLOT_SPARE], step);
}

/* Slot s's plan from estimated bits: a constant plane is planned at once,
 * any other is deferred to write_planes. */
static void plan_deferred(struct tile *t, unsigned s, uint64_t bits, unsigned kind,
                          uint32_t step)
{
    if (l3_plane_const(t->sample[s], t->n)) {
        t->plan[s] = (struct plan){L3_PLANE_CONST, t->pred, (t->depth + 7) / 8};
    } else {
        t->deferred[s] = 1;
        t->plan[s] = l3_plan_estimated(bits, kind, t->w, t->h, t->depth, step);
    }
}

/* ---- stage 2: choose the predictor ---- */

/* The gradient predictor decodes faster (shorter serial chain) and is
 * taken unless MED saves more than grad_bias/32; LEFT2 (period-2 patterns,
 * dithered renders) is tried where coding is costly (over depth/4 bits a
 * sample). From every EST_STEP-th row. */
static void choose_predictor_sampled(struct tile *t)
{
    const unsigned r = t->ref;
    const uint64_t em = estimate(t, r, L3_PLANE_MED, EST_STEP);
    const uint64_t eg = estimate(t, r, L3_PLANE_GRAD, EST_STEP);
    uint64_t eb = em;
    if (eg * 32 <= em * (32 + t->e->grad_bias)) {
        t->pred = L3_PLANE_GRAD;
        eb = eg;
    }
    if (l3_plane_const(t->sample[r], t->n)) {
        t->plan[r] = (struct plan){L3_PLANE_CONST, t->pred, (t->depth + 7) / 8};
        return;
    }
    const uint64_t rows = (t->h + EST_STEP - 2) / EST_STEP;
    if (eb * 4 > rows * t->w * t->depth) {
        const uint64_t el = estimate(t, r, L3_PLANE_LEFT2, EST_STEP);
        if (el < eb) {
            t->pred = L3_PLANE_LEFT2;
            eb = el;
        }
    }
    t->deferred[r] = 1;
    t->plan[r] = l3_plan_estimated(eb, t->pred, t->w, t->h, t->depth, EST_STEP);
}

/* The same choices from full plans (effort >= 2, or tiles under 8 rows). */
static void choose_predictor_planned(struct tile *t)
{
    const unsigned r = t->ref;
    t->plan[r] = plan_slot(t, r, r, L3_PLANE_MED);
    if (L3_PLANE_KIND(t->plan[r].mode) == L3_PLANE_MED) {
        struct plan g = plan_slot(t, r, SLOT_SPARE, L3_PLANE_GRAD);
        if (L3_PLANE_KIND(g.mode) == L3_PLANE_GRAD &&
            g.bytes * 32 <= t->plan[r].bytes * (32 + t->e->grad_bias)) {
            t->pred = L3_PLANE_GRAD;
            take_spare(t, r, g);
        }
    }
    const unsigned kind = L3_PLANE_KIND(t->plan[r].mode);
    if ((kind == L3_PLANE_MED || kind == L3_PLANE_GRAD) &&
        t->plan[r].bytes * 4 > (uint64_t)t->n * t->depth / 8) {
        struct plan l2 = plan_slot(t, r, SLOT_SPARE, L3_PLANE_LEFT2);
        if (L3_PLANE_KIND(l2.mode) == L3_PLANE_LEFT2 && l2.bytes < t->plan[r].bytes) {
            t->pred = L3_PLANE_LEFT2;
            take_spare(t, r, l2);
        }
    }
}

/* ---- stage 3: choose the colour transform, plan the other planes ---- */

L3_CLONES static void color_differences(struct tile *t)
{
    const uint32_t mask = (1u << t->depth) - 1;
    const uint16_t *r = t->sample[SLOT_R], *g = t->sample[SLOT_G], *b = t->sample[SLOT_B];
    uint16_t *rg = t->sample[SLOT_RG], *bg = t->sample[SLOT_BG];
    for (size_t i = 0; i < t->n; i++) {
        rg[i] = (uint16_t)((r[i] - g[i]) & mask);
        bg[i] = (uint16_t)((b[i] - g[i]) & mask);
    }
}

static void use_differences(struct tile *t)
{
    t->flags = L3_TILE_XFORM_G;
    t->use[SLOT_R] = SLOT_RG;
    t->use[SLOT_B] = SLOT_BG;
}

/* R, B against R-G, B-G from every EST_STEP_XFORM-th row; the two planes
 * taken are deferred. */
static void choose_transform_sampled(struct tile *t)
{
    static const unsigned cand[4] = {SLOT_R, SLOT_B, SLOT_RG, SLOT_BG};
    uint64_t bits[NSLOTS];
    unsigned kind[NSLOTS];
    for (unsigned i = 0; i < 4; i++) {
        const unsigned s = cand[i];
        bits[s] = estimate(t, s, t->pred, EST_STEP_XFORM);
        kind[s] = t->pred;
        if (t->pred == L3_PLANE_LEFT2) { /* as in plan_other */
            const uint64_t m = estimate(t, s, L3_PLANE_MED, EST_STEP_XFORM);
            if (m < bits[s]) {
                bits[s] = m;
                kind[s] = L3_PLANE_MED;
            }
        }
    }
    if (bits[SLOT_RG] + bits[SLOT_BG] < bits[SLOT_R] + bits[SLOT_B])
        use_differences(t);
    for (unsigned c = SLOT_R; c <= SLOT_B; c += 2) {
        const unsigned s = t->use[c];
        plan_deferred(t, s, bits[s], kind[s], EST_STEP_XFORM);
    }
}

static void choose_transform_planned(struct tile *t)
{
    plan_other(t, SLOT_R);
    plan_other(t, SLOT_B);
    plan_other(t, SLOT_RG);
    plan_other(t, SLOT_BG);
    if (t->plan[SLOT_RG].bytes + t->plan[SLOT_BG].bytes <
        t->plan[SLOT_R].bytes + t->plan[SLOT_B].bytes)
        use_differences(t);
}

/* The planes not planned yet: alpha, or the second plane of gray + alpha. */
static void plan_remaining(struct tile *t)
{
    for (unsigned c = 0; c < t->planes; c++)
        if (c != t->ref && !(t->planes >= 3 && (c == SLOT_R || c == SLOT_B)))
            plan_other(t, c);
}

/* ---- stage 4: the LZ probe ---- */

/* LZ planes are tried in stages, so that tiles without repeats (photos,
 * most renders) cost little: the reference plane (or the first plane that
 * is not constant) goes through l3_lz_gated's probe of its first quarter,
 * and its LZ stream must be lz_bias/32 smaller than its plan or estimate;
 * only then are the other planes tried. effort >= 2 tries every plane.
 * Returns whether to try LZ on the planes; the probed plane into *probed
 * (planes: none) and its stream's length into *probed_len (the stream is in
 * WBUF_LZ_REF). */
static int lz_probe(struct tile *t, struct lz_state *lz, unsigned *probed, size_t *probed_len)
{
    const struct enc *e = t->e;
    *probed = t->planes;
    *probed_len = 0;
    if (!e->lz || t->n < 64)
        return 0;
    if (e->exact)
        return 1;
    unsigned c = t->ref; /* the first of ref, 0, 1, ... not constant */
    for (unsigned i = 0; i < t->planes && t->plan[t->use[c]].mode == L3_PLANE_CONST; i++)
        c = i;
    const unsigned s = t->use[c];
    if (t->plan[s].mode == L3_PLANE_CONST)
        return 0;
    const uint64_t plan = t->plan[s].mode == L3_PLANE_RAW ? t->raw : t->plan[s].bytes;
    const size_t len = l3_lz_gated(lz, t->sample[s], t->resid[SLOT_SPARE], t->w, t->h, t->depth,
                                   plan, plan * (32 - e->lz_bias) / 32, t->wbuf[WBUF_LZ_REF]);
    if (!len)
        return 0;
    *probed = c;
    *probed_len = len;
    return 1;
}

/* ---- stage 5: write the planes ---- */

/* A plane's stream: its mode byte and, for predicted and LZ modes, the
 * coded bytes in one of the stream buffers. */
struct stream {
    unsigned mode;
    uint64_t len;
    const uint8_t *bytes;
};

/* LZ streams of plane c (slot s) below lz_bias/32 of its plan's size (an
 * estimate): LEFT residuals, and with effort >= 2 also the plane's own
 * predictor. Returns whether one won (then into *out). */
static int lz_plane(struct tile *t, struct lz_state *lz, unsigned c, unsigned probed,
                    size_t probed_len, struct stream *out)
{
    const struct enc *e = t->e;
    const unsigned s = t->use[c];
    uint64_t limit = (t->plan[s].mode >= L3_PLANE_MED ? t->plan[s].bytes : t->raw) *
                     (32 - e->lz_bias) / 32;
    if (c == probed) {
        if (probed_len >= limit)
            return 0;
        *out = (struct stream){L3_PLANE_LEFT | L3_PLANE_LZ, probed_len, t->wbuf[WBUF_LZ_REF]};
        return 1;
    }
    int won = 0;
    size_t l = l3_lz_try(lz, t->sample[s], t->resid[SLOT_SPARE], L3_PLANE_LEFT, t->w, t->h,
                         t->depth, limit, e->exact ? LZ_CHAIN_MAX : LZ_CHAIN,
                         t->wbuf[WBUF_LZ]);
    if (l) {
        *out = (struct stream){L3_PLANE_LEFT | L3_PLANE_LZ, l, t->wbuf[WBUF_LZ]};
        limit = l;
        won = 1;
    }
    if (e->exact && t->plan[s].kind != L3_PLANE_LEFT) {
        l = l3_lz_try(lz, NULL, t->resid[s], t->plan[s].kind, t->w, t->h, t->depth, limit,
                      LZ_CHAIN_MAX, t->wbuf[WBUF_LZ_OWN]);
        if (l) {
            *out = (struct stream){t->plan[s].kind | L3_PLANE_LZ, l, t->wbuf[WBUF_LZ_OWN]};
            won = 1;
        }
    }
    return won;
}

/* The plan of slot s without LZ: a deferred plan is made now; a predicted
 * plane is written (its plan's size is an estimate) and kept when smaller
 * than raw. */
static struct stream planned_stream(struct tile *t, unsigned s)
{
    if (t->deferred[s])
        t->plan[s] = l3_plan_plane(t->sample[s], t->w, t->h, t->depth, t->resid[s],
                                   t->syms[s], 0, t->plan[s].kind, t->g16, t->e->short_bias,
                                   t->e->simd);
    struct stream st = {t->plan[s].mode, t->raw, NULL};
    if (st.mode == L3_PLANE_CONST) {
        st.len = t->plan[s].bytes;
    } else if (st.mode >= L3_PLANE_MED) {
        const int sh = (st.mode & L3_PLANE_SHORT) != 0;
        uint8_t *wb = t->wbuf[WBUF_RICE];
        const uint8_t *syms = t->syms[s] + (sh ? t->g16 : 0);
        const uint32_t gs = sh ? L3_GROUP_SHORT : L3_GROUP;
        uint8_t *end = t->e->simd && t->depth <= 8
                           ? l3_simd_write_rice(t->resid[s], syms, t->w, t->h, t->depth, wb, gs)
                           : l3_plane_write_rice(t->resid[s], syms, t->w, t->h, t->depth, wb, gs);
        size_t l = (size_t)(end - wb);
        if (l < t->raw) {
            st.bytes = wb;
            st.len = l;
        } else {
            st.mode = L3_PLANE_RAW;
        }
    }
    return st;
}

/* n samples of depth bits, LSB first (8 and 16 bits: bytes, little-endian). */
static uint8_t *plane_write_raw(const uint16_t *src, size_t n, unsigned depth, uint8_t *out)
{
    if (depth == 8) {
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)src[i];
        return out + n;
    }
    if (depth == 16) {
        for (size_t i = 0; i < n; i++) {
            out[2 * i] = (uint8_t)src[i];
            out[2 * i + 1] = (uint8_t)(src[i] >> 8);
        }
        return out + 2 * n;
    }
    struct bw bw = {out, 0, 0};
    for (size_t i = 0; i < n; i++)
        bw_put(&bw, src[i], depth);
    return bw_flush(&bw);
}

/* Every plane's stream into the tile slot, behind the tile header. Returns
 * the tile's size in bytes. */
static uint64_t write_planes(struct tile *t, struct lz_state *lz, int try_lz, unsigned probed,
                             size_t probed_len, uint8_t *out)
{
    out[0] = (uint8_t)t->flags;
    uint8_t *p = out + L3_TILE_HEADER_BYTES(t->planes);
    for (unsigned c = 0; c < t->planes; c++) {
        const unsigned s = t->use[c];
        uint8_t *start = p;
        struct stream st;
        const int lz_won = try_lz && t->plan[s].mode != L3_PLANE_CONST &&
                           lz_plane(t, lz, c, probed, probed_len, &st);
        if (!lz_won)
            st = planned_stream(t, s);
        if (st.mode == L3_PLANE_CONST) {
            *p++ = (uint8_t)t->sample[s][0];
            if (t->depth == 16)
                *p++ = (uint8_t)(t->sample[s][0] >> 8);
        } else if (st.mode == L3_PLANE_RAW) {
            p = plane_write_raw(t->sample[s], t->n, t->depth, p);
        } else {
            memcpy(p, st.bytes, (size_t)st.len);
            p += st.len;
        }
        out[1 + 5 * c] = (uint8_t)st.mode;
        l3_wr_u32le(out + 2 + 5 * c, (uint32_t)(p - start));
    }
    return (uint64_t)(p - out);
}

int l3_encode_tile(struct enc *e, unsigned worker, uint64_t tile)
{
    struct tile t;
    tile_bind(&t, e, worker, tile);
    int st = l3_gather_planes(e, t.x0, t.y0, t.w, t.h, t.sample);
    if (st != L3_OK)
        return st;
    l3_prefetch_tile(e, tile + 1);
    if (t.sampled)
        choose_predictor_sampled(&t);
    else
        choose_predictor_planned(&t);
    if (t.planes >= 3) {
        color_differences(&t);
        if (t.sampled)
            choose_transform_sampled(&t);
        else
            choose_transform_planned(&t);
    }
    plan_remaining(&t);
    struct lz_state *lz = &e->lzs[worker];
    unsigned probed;
    size_t probed_len;
    const int try_lz = lz_probe(&t, lz, &probed, &probed_len);
    e->tile_bytes[tile] = write_planes(&t, lz, try_lz, probed, probed_len,
                                       e->slots + e->slot_size * tile);
    return L3_OK;
}
