/* stress.h — shared pieces of the stress tool (tests/stress/). */
#ifndef STRESS_H
#define STRESS_H

#include <stddef.h>
#include <stdint.h>

#include "tc_file.h" /* tc_write_file */
#include "tc_rand.h" /* tc_splitmix64 */

struct st_img {
    uint32_t w, h;
    int ctype, depth, channels, interlace;
    int npal, trns;
    uint8_t pal[256][4];
    uint16_t key[3];
};

/* vsnprintf that tolerates truncation (paths are checked by the syscalls) */
int st_fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int st_mkdirs(const char *path);
int st_png_encode(const struct st_img *im, const void *pixels, unsigned char **out_ret,
                  size_t *len_ret);
int st_random_png(uint64_t *seed, int k, uint32_t mindim, uint32_t maxdim,
                  unsigned char **out_ret, size_t *len_ret);

int cmd_gen_tree(int argc, char **argv);
int cmd_gen_hostile(int argc, char **argv);
int cmd_gen_many(int argc, char **argv);
int cmd_gen_variant(int argc, char **argv);
int cmd_churn(int argc, char **argv); /* churn.c */
extern int st_png_level;

#endif
