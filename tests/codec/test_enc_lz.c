/* test_enc_lz.c — the LZ match finder (codec/enc_lz.c) carries nothing from
 * one plane to the next: its hash heads are not cleared between planes but
 * stamped (entries of earlier planes read as empty, and the table is cleared
 * when the stamps would wrap). A plane must give the same LZ stream on a
 * fresh state, after other planes, and across the wrap; otherwise a tile's
 * bytes would depend on which worker encoded which tiles before it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "enc_lz.h"
#include "enc_tile.h"
#include "l3_internal.h"

#define W 64u
#define H 64u
#define DEPTH 8u

/* A plane with repeats (so that the parse finds copies) and noise. */
static void make_plane(uint16_t *p, uint32_t seed, unsigned period)
{
    uint32_t s = seed;
    uint16_t motif[64];
    for (unsigned i = 0; i < period; i++) {
        s = s * 1664525u + 1013904223u;
        motif[i] = (uint16_t)(s >> 24);
    }
    for (uint32_t i = 0; i < W * H; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (s >> 28) == 0 ? (uint16_t)(s >> 20 & 0xff) : motif[i % period];
    }
}

struct finder {
    struct lz_state lz;
    uint32_t *mem;
    uint16_t z[W * H];
    uint8_t *out;
    size_t out_bytes;
};

static void finder_init(struct finder *f)
{
    unsigned hash_bits;
    size_t words = l3_lz_words(W * H, &hash_bits);
    f->mem = malloc(words * sizeof(uint32_t));
    cr_assert(f->mem != NULL);
    memset(f->mem, 0xa5, words * sizeof(uint32_t)); /* l3_lz_init must clear what it needs */
    l3_lz_init(&f->lz, f->mem, W * H, hash_bits);
    f->out_bytes = l3_tile_stream_bytes(W, H, DEPTH);
    f->out = malloc(f->out_bytes);
    cr_assert(f->out != NULL);
}

static void finder_free(struct finder *f)
{
    free(f->mem);
    free(f->out);
}

/* The plane's LZ stream (LEFT residuals) into *len; returns the bytes. */
static const uint8_t *stream(struct finder *f, const uint16_t *plane, size_t *len)
{
    *len = l3_lz_try(&f->lz, plane, f->z, L3_PLANE_LEFT, W, H, DEPTH, (uint64_t)1 << 40,
                     LZ_CHAIN, f->out);
    cr_assert(*len > 0 && *len < f->out_bytes, "no LZ stream (%zu bytes)", *len);
    return f->out;
}

static void assert_same(struct finder *a, const uint16_t *plane, struct finder *b,
                        const char *what)
{
    size_t na, nb;
    const uint8_t *sa = stream(a, plane, &na), *sb = stream(b, plane, &nb);
    cr_assert(na == nb && memcmp(sa, sb, na) == 0, "%s: %zu bytes vs %zu on a fresh state",
              what, na, nb);
}

Test(enc_lz, plane_after_other_planes_as_on_a_fresh_state)
{
    static uint16_t a[W * H], b[W * H], c[W * H];
    make_plane(a, 1, 37);
    make_plane(b, 2, 23);
    make_plane(c, 3, 64);
    struct finder used, fresh;
    finder_init(&used);
    size_t n;
    stream(&used, a, &n);
    stream(&used, c, &n);
    finder_init(&fresh);
    assert_same(&used, b, &fresh, "after two other planes");
    /* the same plane twice in a row: the second parse must not see the first */
    finder_free(&fresh);
    finder_init(&fresh);
    assert_same(&used, b, &fresh, "after itself");
    finder_free(&used);
    finder_free(&fresh);
}

Test(enc_lz, stamps_wrap)
{
    static uint16_t a[W * H], b[W * H];
    make_plane(a, 4, 29);
    make_plane(b, 5, 41);
    struct finder used;
    finder_init(&used);
    size_t n;
    stream(&used, a, &n); /* stale entries that the wrap must clear */
    /* stamps just below the wrap: this plane fits, the next does not */
    used.lz.top = UINT32_MAX - (uint32_t)(W * H) - 1;
    for (int i = 0; i < 3; i++) {
        struct finder fresh;
        finder_init(&fresh);
        assert_same(&used, i == 1 ? a : b, &fresh, i == 0 ? "below the wrap" : "across the wrap");
        finder_free(&fresh);
    }
    cr_assert_lt(used.lz.top, (uint32_t)(4 * W * H), "the stamps did not wrap (top %u)",
                 used.lz.top);
    finder_free(&used);
}
