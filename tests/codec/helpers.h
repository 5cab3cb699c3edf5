/* helpers.h — deterministic image generators and checks for the codec tests. */
#ifndef L3_TEST_HELPERS_H
#define L3_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include "l3.h"
#include "tc_rand.h"

enum th_pattern { TH_NOISE, TH_GRADIENT, TH_FLAT, TH_MAX, TH_MIXED };

/* Fills info (no palette content unless color is palette: a palette of
 * `palette_len` entries is made up) for w x h of the given model/depth. */
void th_info(struct l3_info *info, unsigned color, unsigned depth, uint32_t w,
             uint32_t h);
/* Allocates and fills pixels (tight rows) with a pattern; values always fit
 * the depth (and the palette). */
void *th_image(const struct l3_info *info, enum th_pattern pat, uint64_t seed,
               size_t *size_ret);
/* Encodes, checks read_info/verify, decodes (1 thread and `threads`) and
 * compares with the input; returns 0 on success, else a non-zero code and
 * a message in msg. The encoded file is returned when out_ret != NULL. */
int th_roundtrip(const struct l3_info *info, const void *px,
                 const struct l3_encode_options *eo, unsigned threads, char *msg,
                 size_t msglen, void **out_ret, size_t *out_size_ret);

/* Tallies the plane mode bytes of every tile of an encoded file into
 * counts[256] (not cleared first); returns 0, or -1 when the file or a tile
 * header does not parse. */
int th_plane_modes(const void *l3, size_t n, unsigned counts[256]);
/* Planes with the L3_PLANE_LZ flag in counts[]; with kind != 0 only those of
 * that predictor kind. */
unsigned th_lz_planes(const unsigned counts[256], unsigned kind);

#endif
