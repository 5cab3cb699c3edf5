/* stress.h — shared pieces of the stress tool (tests/stress/). */
#ifndef STRESS_H
#define STRESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <png.h>
#include <sys/types.h>
#include <xxhash.h>

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

/* ---- stress_tool.c: clocks, whole-file reads, the hang watchdog ---- */
double now_s(void);
uint64_t now_ns(void);
/* Reads a whole file; returns 0 or -errno (and which step failed). */
int read_all(const char *path, unsigned char **buf, size_t *cap, size_t *len_ret,
             off_t *st_size_ret, const char **step_ret);
/* Every worker publishes when its current operation started (op_start[id],
 * op_path[id]); the watchdog ends the process when one takes longer than
 * hang_limit_s seconds (a hang). */
#define MAXW 256
extern _Atomic uint64_t op_start[MAXW];
extern const char *_Atomic op_path[MAXW];
extern double hang_limit_s;
void start_watchdog(void);

/* ---- oracle.c: the expected bytes of every file of a mount ---- */
enum { K_L3 = 1, K_PASS = 2, K_FIFO = 3 };

struct ent {
    int kind;
    int err;          /* expected errno (EIO) for K_L3, else 0 */
    uint64_t size;
    XXH128_hash_t h;
    char *src;        /* relative to SOURCE */
    char *mnt;        /* relative to MOUNTPOINT */
};

struct oracle {
    struct ent *e;
    size_t n, cap;
    char *srcroot;
};
void oracle_free(struct oracle *o);
int oracle_load(struct oracle *o, const char *file);
int cmd_oracle(int argc, char **argv);

/* ---- verify.c: every file through the mount (pixels: libpng's own decode) ---- */
int cmd_verify(int argc, char **argv);

/* ---- load.c: reader threads with figures; readdir timing ---- */
int cmd_load(int argc, char **argv);
int cmd_lsdir(int argc, char **argv);

/* ---- escape.c: writes refused, reads as another user, stats.json ---- */
int cmd_escape(int argc, char **argv);
int cmd_as_user(int argc, char **argv);
int cmd_json(int argc, char **argv);

#endif
