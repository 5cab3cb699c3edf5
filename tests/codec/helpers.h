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
/* 128x64 8-bit RGB (malloc'd) whose 64x32 quarters are a period-2 dither on
 * a ramp, sparse dots on flat, a ramp with small noise, and noise: with
 * 32x32 tiles at effort -1 the encoder writes RAW, LEFT2 and short-group
 * planes and uses the colour transform; at the default effort LZ planes. */
uint8_t *th_all_modes_image(void);
/* Repeats for LZ (malloc'd, tight rows): an 8x8 random texture tiled over
 * the image, with one 8x8 block in 16 of noise (so that tiles are not all
 * copies; with more noise, 1-bit planes stay RAW, which costs 1 bit per
 * sample where literals cost about 1.5). Values fit the depth and palette. */
void *th_lz_image(const struct l3_info *info, uint64_t seed);
/* 64 x 32 8-bit gray samples into px on which the LZ coding with the plane's
 * own predictor beats the one with the left predictor, so that a real
 * encoder output (effort 2, 32x32 tiles) exercises each of the decoder's LZ
 * loops. which 0 (MED): interleaved ramps, the bottom half repeating the
 * top; 1 (GRAD): a small texture on curved ramps in x and y (both ramps
 * cancel); 2 (LEFT2): a period-2 pattern whose amplitude changes from row to
 * row on a curved ramp. */
void th_kind_image(int which, uint8_t *px);

/* l3_encode of px with tile x tile tiles (0: the default) at the given
 * effort, default options otherwise; returns its status, the file in
 * *out_ret (malloc'd) and its size in *n_ret. */
int th_encode(const struct l3_info *info, const void *px, uint32_t tile, int effort,
              void **out_ret, size_t *n_ret);

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
struct l3_tile_header;
/* Tile t of a valid L3 file: its bytes (returned) and parsed header; NULL when
 * the layout or the tile header does not parse. */
const uint8_t *th_tile(const void *l3, size_t n, uint32_t t, struct l3_tile_header *th);
/* Planes with the L3_PLANE_LZ flag in counts[]; with kind != 0 only those of
 * that predictor kind. */
unsigned th_lz_planes(const unsigned counts[256], unsigned kind);

#endif
