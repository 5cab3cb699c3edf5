/* test_cli.c — the `l3` command-line tool, run as a separate process.
 *
 * L3_CLI (set by tests/codec/meson.build) is the built binary. Each test works
 * in its own temporary directory.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "l3.h"
#include "tc_file.h"

struct run {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout */
    size_t out_len;
    char *err; /* stderr */
    size_t err_len;
};

static const char *cli_path(void)
{
    const char *p = getenv("L3_CLI");
    cr_assert(p && *p, "L3_CLI is not set (run through meson test)");
    return p;
}

/* Runs l3 with the arguments (NULL-terminated), in dir. */
static struct run run_l3(const char *dir, const char *const *args)
{
    char outp[4200], errp[4200];
    snprintf(outp, sizeof outp, "%s/.stdout", dir);
    snprintf(errp, sizeof errp, "%s/.stderr", dir);
    const char *exe = cli_path(); /* asserts here, never in the child */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || chdir(dir) != 0)
            _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        const char *argv[32];
        int n = 0;
        argv[n++] = exe;
        for (; args[n - 1] && n < 31; n++)
            argv[n] = args[n - 1];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    struct run r;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.out = tc_slurp(outp, &r.out_len);
    cr_assert_not_null(r.out, "%s: %s", outp, strerror(errno));
    r.err = tc_slurp(errp, &r.err_len);
    cr_assert_not_null(r.err, "%s: %s", errp, strerror(errno));
    unlink(outp);
    unlink(errp);
    return r;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Exactly one line on stderr, mentioning `what`, and a failing status. */
static void expect_one_error_line(const struct run *r, const char *what, const char *ctx)
{
    cr_assert_neq(r->status, 0, "%s: exit status 0", ctx);
    cr_assert_lt(r->status, 128, "%s: killed by a signal (%d)", ctx, r->status - 128);
    cr_assert_gt(r->err_len, 0, "%s: nothing on stderr", ctx);
    cr_assert_eq(r->err[r->err_len - 1], '\n', "%s: stderr not a line", ctx);
    cr_assert_null(memchr(r->err, '\n', r->err_len - 1), "%s: more than one line: %s", ctx,
                   r->err);
    if (what)
        cr_assert_not_null(strstr(r->err, what), "%s: '%s' not named in: %s", ctx, what, r->err);
}

static char *make_dir(void)
{
    char *d = strdup("/tmp/l3-cli-test-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

/* Names in dir other than the listed ones (temporary leftovers). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void write_file(const char *dir, const char *name, const void *d, size_t n)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int e = tc_write_file(p, d, n);
    cr_assert_eq(e, 0, "%s: %s", p, strerror(-e));
}

static unsigned char *read_file(const char *dir, const char *name, size_t *n)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return tc_slurp(p, n);
}

static int exists(const char *dir, const char *name)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0;
}

/* A test image written with l3_png_encode. */
static void *make_png(const struct l3_info *info, void **px_ret, size_t *n_ret)
{
    size_t row = (size_t)info->width * info->channels * (info->bit_depth == 16 ? 2 : 1);
    size_t sz = row * info->height;
    unsigned char *px = malloc(sz);
    unsigned maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                    : info->bit_depth == 16         ? 65535u
                                                    : (1u << info->bit_depth) - 1u;
    size_t samples = (size_t)info->width * info->height * info->channels;
    for (size_t i = 0; i < samples; i++) {
        unsigned v = (unsigned)((i * 2654435761u) >> 7) % (maxv + 1);
        if ((i / 50) % 3 == 0)
            v = (unsigned)(i / 3) % (maxv + 1);
        if (info->bit_depth == 16) {
            uint16_t s = (uint16_t)v;
            memcpy(px + 2 * i, &s, 2);
        } else {
            px[i] = (unsigned char)v;
        }
    }
    void *png = NULL;
    cr_assert_eq(l3_png_encode(info, px, 0, &png, n_ret), L3_OK);
    *px_ret = px;
    return png;
}

static struct l3_info rgba8(uint32_t w, uint32_t h)
{
    struct l3_info i;
    memset(&i, 0, sizeof i);
    i.width = w;
    i.height = h;
    i.color = L3_COLOR_RGBA;
    i.channels = 4;
    i.bit_depth = 8;
    return i;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Parses a PAM header; returns the header length. */
static size_t parse_pam(const unsigned char *d, size_t n, unsigned *w, unsigned *h, unsigned *depth,
                        unsigned *maxval, char *tuple)
{
    const char *end = memmem(d, n, "ENDHDR\n", 7);
    cr_assert_not_null(end, "PAM: no ENDHDR");
    cr_assert_eq(memcmp(d, "P7\n", 3), 0);
    char hdr[512];
    size_t hl = (size_t)(end - (const char *)d) + 7;
    cr_assert_lt(hl, sizeof hdr);
    memcpy(hdr, d, hl);
    hdr[hl] = '\0';
    cr_assert_eq(sscanf(strstr(hdr, "WIDTH"), "WIDTH %u", w), 1);
    cr_assert_eq(sscanf(strstr(hdr, "HEIGHT"), "HEIGHT %u", h), 1);
    cr_assert_eq(sscanf(strstr(hdr, "DEPTH"), "DEPTH %u", depth), 1);
    cr_assert_eq(sscanf(strstr(hdr, "MAXVAL"), "MAXVAL %u", maxval), 1);
    cr_assert_eq(sscanf(strstr(hdr, "TUPLTYPE"), "TUPLTYPE %63s", tuple), 1);
    return hl;
}

Test(cli, encode_decode_info_verify)
{
    char *dir = make_dir();
    struct l3_info info = rgba8(70, 45);
    void *px;
    size_t n;
    void *png = make_png(&info, &px, &n);
    write_file(dir, "in.png", png, n);

    struct run r = run_l3(dir, ARGS("encode", "in.png", "out.l3"));
    cr_assert_eq(r.status, 0, "encode failed: %s", r.err);
    cr_assert_eq(r.err_len, 0, "encode wrote to stderr: %s", r.err);
    run_free(&r);
    size_t l3n;
    unsigned char *l3 = read_file(dir, "out.l3", &l3n);
    cr_assert_not_null(l3);
    struct l3_info li;
    cr_assert_eq(l3_read_info(l3, l3n, &li, NULL), L3_OK);
    cr_assert(li.width == 70 && li.height == 45 && li.color == L3_COLOR_RGBA);
    void *dp = NULL;
    size_t dn = 0;
    cr_assert_eq(l3_decode_alloc(l3, l3n, NULL, &dp, &dn, NULL), L3_OK);
    cr_assert(dn == 70 * 45 * 4 && memcmp(dp, px, dn) == 0, "L3 pixels differ from the PNG");
    free(dp);

    /* decode -> PNG: same colour type and depth, same samples. */
    r = run_l3(dir, ARGS("decode", "out.l3", "back.png"));
    cr_assert_eq(r.status, 0, "decode to png failed: %s", r.err);
    run_free(&r);
    size_t bn;
    unsigned char *back = read_file(dir, "back.png", &bn);
    struct l3_info bi;
    cr_assert_eq(l3_png_decode(back, bn, NULL, &bi, &dp, &dn), L3_OK);
    cr_assert(bi.color == L3_COLOR_RGBA && bi.bit_depth == 8 && memcmp(dp, px, dn) == 0);
    free(dp);
    free(back);

    /* decode -> PAM file and -> stdout. */
    r = run_l3(dir, ARGS("decode", "-j", "2", "out.l3", "back.pam"));
    cr_assert_eq(r.status, 0, "decode to pam failed: %s", r.err);
    run_free(&r);
    size_t pn;
    unsigned char *pam = read_file(dir, "back.pam", &pn);
    unsigned w, h, depth, maxval;
    char tuple[64];
    size_t hl = parse_pam(pam, pn, &w, &h, &depth, &maxval, tuple);
    cr_assert(w == 70 && h == 45 && depth == 4 && maxval == 255);
    cr_assert_str_eq(tuple, "RGB_ALPHA");
    cr_assert_eq(pn - hl, 70 * 45 * 4);
    cr_assert(memcmp(pam + hl, px, pn - hl) == 0, "PAM samples differ");
    r = run_l3(dir, ARGS("decode", "out.l3", "-"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(r.out_len == pn && memcmp(r.out, pam, pn) == 0, "stdout PAM differs from file");
    run_free(&r);
    free(pam);

    /* info */
    r = run_l3(dir, ARGS("info", "out.l3"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "70 x 45"), "info output: %s", r.out);
    cr_assert_not_null(strstr(r.out, "RGBA"), "info output: %s", r.out);
    cr_assert_not_null(strstr(r.out, "tiles"), "info output: %s", r.out);
    run_free(&r);

    /* verify, alone and against the source */
    r = run_l3(dir, ARGS("verify", "out.l3"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "OK"));
    run_free(&r);
    r = run_l3(dir, ARGS("verify", "out.l3", "--against", "in.png"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "identical"));
    run_free(&r);

    /* verify against a different image: one line, non-zero. */
    unsigned char *px2 = malloc(70 * 45 * 4);
    memcpy(px2, px, 70 * 45 * 4);
    px2[4 * (70 * 20 + 33) + 2] ^= 1;
    void *png2 = NULL;
    size_t n2 = 0;
    cr_assert_eq(l3_png_encode(&info, px2, 0, &png2, &n2), L3_OK);
    write_file(dir, "other.png", png2, n2);
    r = run_l3(dir, ARGS("verify", "out.l3", "--against", "other.png"));
    expect_one_error_line(&r, "out.l3", "verify against a changed image");
    cr_assert_not_null(strstr(r.err, "(33, 20)"), "mismatch position not named: %s", r.err);
    run_free(&r);
    free(png2);
    free(px2);

    free(l3);
    free(png);
    free(px);
    remove_dir(dir);
}

/* Colour types and depths survive decode to PNG; PAM maps them right. */
Test(cli, formats_png_and_pam)
{
    struct l3_info cases[4];
    memset(cases, 0, sizeof cases);
    cases[0] = rgba8(33, 17);
    cases[0].color = L3_COLOR_GRAY;
    cases[0].channels = 1;
    cases[0].bit_depth = 16;
    cases[1] = cases[0];
    cases[1].bit_depth = 2;
    cases[1].has_trns_key = 1;
    cases[1].trns_key[0] = 1;
    cases[2] = cases[0];
    cases[2].color = L3_COLOR_PALETTE;
    cases[2].bit_depth = 4;
    cases[2].palette_len = 11;
    cases[2].palette_alpha_len = 3;
    for (int i = 0; i < 11; i++) {
        cases[2].palette[i][0] = (uint8_t)(i * 20);
        cases[2].palette[i][1] = (uint8_t)(255 - i);
        cases[2].palette[i][2] = (uint8_t)i;
        cases[2].palette[i][3] = i < 3 ? (uint8_t)(i * 100) : 255;
    }
    cases[3] = cases[0];
    cases[3].color = L3_COLOR_RGB;
    cases[3].channels = 3;
    cases[3].bit_depth = 8;
    const char *tuples[] = {"GRAYSCALE", "GRAYSCALE", "RGB_ALPHA", "RGB"};
    const unsigned depths[] = {1, 1, 4, 3};
    const unsigned maxvals[] = {65535, 3, 255, 255};

    char *dir = make_dir();
    for (int c = 0; c < 4; c++) {
        void *px;
        size_t n;
        void *png = make_png(&cases[c], &px, &n);
        write_file(dir, "in.png", png, n);
        struct run r = run_l3(dir, ARGS("encode", "--tile", "16", "-j", "2", "in.png", "x.l3"));
        cr_assert_eq(r.status, 0, "case %d: %s", c, r.err);
        run_free(&r);
        r = run_l3(dir, ARGS("decode", "x.l3", "x.png"));
        cr_assert_eq(r.status, 0, "case %d: %s", c, r.err);
        run_free(&r);
        size_t bn;
        unsigned char *back = read_file(dir, "x.png", &bn);
        struct l3_info bi;
        void *dp = NULL;
        size_t dn = 0;
        cr_assert_eq(l3_png_decode(back, bn, NULL, &bi, &dp, &dn), L3_OK);
        cr_assert(bi.color == cases[c].color && bi.bit_depth == cases[c].bit_depth,
                  "case %d: PNG written back has another colour type/depth", c);
        cr_assert(bi.palette_len == cases[c].palette_len &&
                      bi.palette_alpha_len == cases[c].palette_alpha_len &&
                      memcmp(bi.palette, cases[c].palette, sizeof bi.palette) == 0,
                  "case %d: palette changed", c);
        cr_assert(bi.has_trns_key == cases[c].has_trns_key &&
                      bi.trns_key[0] == cases[c].trns_key[0],
                  "case %d: tRNS key changed", c);
        size_t sz = l3_decoded_size(&cases[c], 0);
        cr_assert(dn == sz && memcmp(dp, px, sz) == 0, "case %d: samples changed", c);
        free(dp);
        free(back);

        r = run_l3(dir, ARGS("decode", "x.l3", "-"));
        cr_assert_eq(r.status, 0, "case %d: %s", c, r.err);
        unsigned w, h, depth, maxval;
        char tuple[64];
        size_t hl = parse_pam((unsigned char *)r.out, r.out_len, &w, &h, &depth, &maxval, tuple);
        cr_assert(w == 33 && h == 17 && depth == depths[c] && maxval == maxvals[c],
                  "case %d: PAM header %u %u %u %u", c, w, h, depth, maxval);
        cr_assert_str_eq(tuple, tuples[c]);
        const unsigned char *s = (unsigned char *)r.out + hl;
        const unsigned char *p8 = px;
        for (size_t i = 0; i < 33 * 17; i++) {
            if (c == 0) {
                uint16_t v;
                memcpy(&v, p8 + 2 * i, 2);
                cr_assert(s[2 * i] == v >> 8 && s[2 * i + 1] == (v & 255), "16-bit PAM at %zu", i);
            } else if (c == 2) {
                cr_assert(memcmp(s + 4 * i, cases[2].palette[p8[i]], 4) == 0, "palette PAM at %zu",
                          i);
            } else if (c == 1) {
                cr_assert_eq(s[i], p8[i]);
            }
        }
        if (c == 3)
            cr_assert(memcmp(s, px, 33 * 17 * 3) == 0);
        run_free(&r);
        free(png);
        free(px);
    }
    remove_dir(dir);
}

Test(cli, errors_one_line_no_partial_output)
{
    char *dir = make_dir();
    struct l3_info info = rgba8(40, 30);
    void *px;
    size_t n;
    void *png = make_png(&info, &px, &n);
    write_file(dir, "in.png", png, n);
    struct run r = run_l3(dir, ARGS("encode", "in.png", "good.l3"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    size_t l3n;
    unsigned char *l3 = read_file(dir, "good.l3", &l3n);

    /* Missing input. */
    r = run_l3(dir, ARGS("encode", "missing.png", "o.l3"));
    expect_one_error_line(&r, "missing.png", "missing input");
    cr_assert_not_null(strstr(r.err, "No such file"));
    cr_assert(!exists(dir, "o.l3"));
    run_free(&r);
    /* Not a PNG; a truncated PNG. */
    r = run_l3(dir, ARGS("encode", "good.l3", "o.l3"));
    expect_one_error_line(&r, "good.l3", "encode of an L3 file");
    cr_assert(!exists(dir, "o.l3"));
    run_free(&r);
    write_file(dir, "cut.png", png, n / 2);
    r = run_l3(dir, ARGS("encode", "cut.png", "o.l3"));
    expect_one_error_line(&r, "cut.png", "truncated PNG");
    cr_assert(!exists(dir, "o.l3"));
    run_free(&r);

    /* Truncated and corrupted L3: decode fails, the existing output is
     * untouched, no temporary file is left. */
    write_file(dir, "keep.png", "old", 3);
    write_file(dir, "cut.l3", l3, l3n - 5);
    int before = count_entries(dir);
    r = run_l3(dir, ARGS("decode", "cut.l3", "keep.png"));
    expect_one_error_line(&r, "cut.l3", "truncated L3");
    run_free(&r);
    size_t kn;
    unsigned char *keep = read_file(dir, "keep.png", &kn);
    cr_assert(kn == 3 && memcmp(keep, "old", 3) == 0, "failed decode touched the output");
    free(keep);
    cr_assert_eq(count_entries(dir), before, "a temporary file was left behind");
    unsigned char *bad = malloc(l3n);
    memcpy(bad, l3, l3n);
    bad[l3n - 10] ^= 0x55;
    write_file(dir, "bad.l3", bad, l3n);
    free(bad);
    r = run_l3(dir, ARGS("verify", "bad.l3"));
    expect_one_error_line(&r, "bad.l3", "corrupt payload");
    run_free(&r);
    r = run_l3(dir, ARGS("decode", "bad.l3", "new.pam"));
    /* decode without verification may or may not notice a flipped bit in
     * tile data; when it fails, nothing may be left behind. */
    if (r.status != 0) {
        expect_one_error_line(&r, "bad.l3", "decode of corrupt payload");
        cr_assert(!exists(dir, "new.pam"));
    }
    run_free(&r);
    r = run_l3(dir, ARGS("info", "in.png"));
    expect_one_error_line(&r, "in.png", "info on a PNG");
    run_free(&r);
    r = run_l3(dir, ARGS("info", "nope.l3"));
    expect_one_error_line(&r, "nope.l3", "info on a missing file");
    run_free(&r);
    r = run_l3(dir, ARGS("verify", "good.l3", "--against", "cut.png"));
    expect_one_error_line(&r, "cut.png", "verify against a truncated PNG");
    run_free(&r);

    /* Output in a missing directory; output is a directory. */
    r = run_l3(dir, ARGS("encode", "in.png", "no/such/dir/o.l3"));
    expect_one_error_line(&r, "no/such/dir/o.l3", "missing output directory");
    run_free(&r);
    r = run_l3(dir, ARGS("encode", "in.png", "."));
    expect_one_error_line(&r, NULL, "output is a directory");
    run_free(&r);
    r = run_l3(dir, ARGS("decode", "good.l3", "out.jpg"));
    expect_one_error_line(&r, "out.jpg", "unknown output type");
    cr_assert(!exists(dir, "out.jpg"));
    run_free(&r);

    /* Usage errors. */
    r = run_l3(dir, ARGS("frobnicate"));
    expect_one_error_line(&r, "frobnicate", "unknown command");
    cr_assert_eq(r.status, 2);
    run_free(&r);
    r = run_l3(dir, ARGS("encode", "in.png"));
    expect_one_error_line(&r, NULL, "missing argument");
    run_free(&r);
    r = run_l3(dir, ARGS("encode", "--tile", "0", "in.png", "o.l3"));
    expect_one_error_line(&r, "--tile", "bad tile size");
    run_free(&r);
    r = run_l3(dir, ARGS("bench", "missing-dir"));
    expect_one_error_line(&r, "missing-dir", "bench on a missing path");
    run_free(&r);
    cr_assert(!exists(dir, "o.l3"));

    /* No stray temporary files anywhere in the directory. */
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        cr_assert_null(strstr(e->d_name, ".tmp"), "leftover %s", e->d_name);
    closedir(d);

    free(l3);
    free(png);
    free(px);
    remove_dir(dir);
}

Test(cli, help_version_bench)
{
    char *dir = make_dir();
    struct run r = run_l3(dir, ARGS("--help"));
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "l3 encode"));
    cr_assert_not_null(strstr(r.out, "l3 bench"));
    run_free(&r);
    r = run_l3(dir, ARGS("--version"));
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, L3_VERSION_STRING));
    run_free(&r);

    for (int i = 0; i < 2; i++) {
        struct l3_info info = rgba8(50 + 13 * (uint32_t)i, 20);
        void *px;
        size_t n;
        void *png = make_png(&info, &px, &n);
        write_file(dir, i ? "b.png" : "a.png", png, n);
        free(png);
        free(px);
    }
    write_file(dir, "notes.txt", "x", 1); /* ignored: not *.png */
    char arg[4200];
    snprintf(arg, sizeof arg, "%s", dir);
    r = run_l3(dir, ARGS("bench", "-j", "2", "-r", "1", arg));
    cr_assert_eq(r.status, 0, "bench failed: %s", r.err);
    cr_assert_not_null(strstr(r.out, "a.png"));
    cr_assert_not_null(strstr(r.out, "b.png"));
    cr_assert_not_null(strstr(r.out, "summary (2 files"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "x libpng"));
    run_free(&r);
    r = run_l3(dir, ARGS("bench", "--csv", "-r", "1", "a.png"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "file,width,height"));
    cr_assert_not_null(strstr(r.out, "a.png,50,20,3,8,4000,"), "%s", r.out);
    run_free(&r);
    r = run_l3(dir, ARGS("bench", "notes.txt"));
    expect_one_error_line(&r, "notes.txt", "bench on a non-PNG");
    run_free(&r);
    remove_dir(dir);
}
