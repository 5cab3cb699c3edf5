/* l3 — command-line tool for the L3 lossless image format.
 *
 *   l3 encode IN.png OUT.l3 [--tile N] [--effort E] [-j N]
 *   l3 decode IN.l3 OUT.png|OUT.pam|- [-j N]
 *   l3 info FILE.l3
 *   l3 verify FILE.l3 [--against SRC.png]
 *   l3 bench [-j N] [-r N] [--tile N] [--effort E] [--cpu-time] [--csv] FILES...|DIR
 *
 * Errors: one line on stderr naming the file and the reason, exit status 1
 * (2 for a usage error). Output files are written through a temporary file
 * and rename(), so a failed run leaves no partial output.
 */
#include <errno.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "l3_tile.h"

static const char usage_text[] =
    "usage: l3 COMMAND [ARGS]\n"
    "\n"
    "  l3 encode IN.png OUT.l3 [--tile N] [--effort E] [-j N]\n"
    "        PNG (any colour type, bit depth, interlacing) to L3, losslessly.\n"
    "        --tile N: N x N tiles (default 64); --effort E: -1 fastest (no LZ\n"
    "        planes), 0 default, 2 smallest and slowest; -j N: encoder threads.\n"
    "  l3 decode IN.l3 OUT.png|OUT.pam|- [-j N]\n"
    "        L3 to PNG (the source's colour type and bit depth) or to PAM\n"
    "        (netpbm P7; palette images expanded to RGB/RGB_ALPHA); '-' writes\n"
    "        PAM to standard output.\n"
    "  l3 info FILE.l3\n"
    "        Header fields and tile layout, without decoding.\n"
    "  l3 verify FILE.l3 [--against SRC.png]\n"
    "        Checks header and payload checksums and decodes every tile; with\n"
    "        --against, also compares every sample with libpng's decode of SRC.\n"
    "  l3 bench [-j N] [-r N] [--tile N] [--effort E] [--cpu-time] [--csv] FILES...|DIR\n"
    "        PNG files (or every *.png in DIR) read into memory first, then\n"
    "        measured side by side: L3 size vs PNG, L3 encode from pixels, L3\n"
    "        decode with 1 and N threads, and libpng decode (MB/s of decoded\n"
    "        pixels, best of -r runs, default 3). --cpu-time times the\n"
    "        single-threaded runs with the thread's CPU clock (steadier on a\n"
    "        busy machine); --csv prints one row per file.\n"
    "\n"
    "  l3 --help | --version\n"
    "\n"
    "-j N defaults to the number of online CPUs. Exit status: 0 success,\n"
    "1 failure (one line on stderr naming the file and the reason), 2 usage.\n";

static int usage_error(const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    cli_error(NULL, "%s (see 'l3 --help')", msg);
    return 2;
}

static const char *color_name(unsigned c)
{
    static const char *names[] = {"gray", "gray+alpha", "RGB", "RGBA", "palette"};
    return c < 5 ? names[c] : "unknown";
}

/* Reads a whole file or reports the error. */
static int read_or_report(const char *path, unsigned char **d, size_t *n)
{
    int e = cli_read_file(path, d, n);
    if (e) {
        cli_error(path, "%s", strerror(e));
        return 1;
    }
    return 0;
}

static int write_or_report(const char *path, const void *d, size_t n)
{
    int e = cli_write_atomic(path, d, n);
    if (e) {
        cli_error(path, "cannot write: %s", strerror(e));
        return 1;
    }
    return 0;
}

/* Reports an L3 error on a file; L3 files that are PNGs get a hint. */
static int l3_report(const char *path, int st, const unsigned char *d, size_t n)
{
    if (st == L3_ERR_BAD_MAGIC && l3_is_png(d, n))
        cli_error(path, "%s (this is a PNG file; use 'l3 encode')", l3_strerror(st));
    else
        cli_error(path, "%s", l3_strerror(st));
    return 1;
}

/* ------------------------------------------------------------ encode */

static int cmd_encode(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.threads = cli_default_threads();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tile") == 0 && i + 1 < argc) {
            long t = cli_parse_count(argv[++i], 65536);
            if (t < 0)
                return usage_error("encode: bad --tile value '%s'", argv[i]);
            eo.tile_width = eo.tile_height = (uint32_t)t;
        } else if (strcmp(argv[i], "--effort") == 0 && i + 1 < argc) {
            if (cli_parse_effort(argv[++i], &eo.effort))
                return usage_error("encode: bad --effort value '%s'", argv[i]);
        } else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
            long j = cli_parse_count(argv[++i], 1024);
            if (j < 0)
                return usage_error("encode: bad -j value '%s'", argv[i]);
            eo.threads = (unsigned)j;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("encode: unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage_error("encode: unexpected argument '%s'", argv[i]);
        }
    }
    if (!in || !out)
        return usage_error("encode: needs IN.png and OUT.l3%s", NULL);

    unsigned char *png;
    size_t n;
    if (read_or_report(in, &png, &n))
        return 1;
    if (!l3_is_png(png, n)) {
        cli_error(in, "not a PNG file");
        free(png);
        return 1;
    }
    void *l3 = NULL;
    size_t l3n = 0;
    int st = l3_transcode_png(png, n, &eo, &l3, &l3n);
    free(png);
    if (st != L3_OK) {
        cli_error(in, "%s", l3_strerror(st));
        return 1;
    }
    int rc = write_or_report(out, l3, l3n);
    l3_free(l3);
    return rc;
}

/* ------------------------------------------------------------ decode */

/* Netpbm PAM (P7). 16-bit samples big-endian; palette expanded. */
static unsigned char *make_pam(const struct l3_info *info, const unsigned char *px,
                               size_t *size_ret)
{
    unsigned depth = info->channels;
    const char *tuple;
    unsigned maxval = info->bit_depth == 16 ? 65535u : (1u << info->bit_depth) - 1u;
    int pal = info->color == L3_COLOR_PALETTE;
    int pal_alpha = pal && info->palette_alpha_len > 0;
    switch (info->color) {
    case L3_COLOR_GRAY: tuple = info->bit_depth == 1 ? "BLACKANDWHITE" : "GRAYSCALE"; break;
    case L3_COLOR_GRAY_ALPHA: tuple = "GRAYSCALE_ALPHA"; break;
    case L3_COLOR_RGB: tuple = "RGB"; break;
    case L3_COLOR_RGBA: tuple = "RGB_ALPHA"; break;
    default:
        tuple = pal_alpha ? "RGB_ALPHA" : "RGB";
        depth = pal_alpha ? 4 : 3;
        maxval = 255;
        break;
    }
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr,
                      "P7\nWIDTH %u\nHEIGHT %u\nDEPTH %u\nMAXVAL %u\nTUPLTYPE %s\nENDHDR\n",
                      info->width, info->height, depth, maxval, tuple);
    size_t samples = (size_t)info->width * info->height * depth;
    size_t sb = info->bit_depth == 16 ? 2 : 1;
    size_t total = (size_t)hl + samples * sb;
    unsigned char *out = malloc(total);
    if (out == NULL)
        return NULL;
    memcpy(out, hdr, (size_t)hl);
    unsigned char *o = out + hl;
    size_t pixels = (size_t)info->width * info->height;
    if (pal) {
        for (size_t i = 0; i < pixels; i++) {
            const uint8_t *e = info->palette[px[i]];
            for (unsigned c = 0; c < depth; c++)
                *o++ = e[c];
        }
    } else if (sb == 2) {
        for (size_t i = 0; i < samples; i++) {
            uint16_t v;
            memcpy(&v, px + 2 * i, 2);
            *o++ = (unsigned char)(v >> 8);
            *o++ = (unsigned char)v;
        }
    } else {
        memcpy(o, px, samples);
    }
    *size_ret = total;
    return out;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

static int cmd_decode(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    struct l3_decode_options dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.threads = cli_default_threads();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
            long j = cli_parse_count(argv[++i], 1024);
            if (j < 0)
                return usage_error("decode: bad -j value '%s'", argv[i]);
            dopt.threads = (unsigned)j;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("decode: unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage_error("decode: unexpected argument '%s'", argv[i]);
        }
    }
    if (!in || !out)
        return usage_error("decode: needs IN.l3 and OUT.png, OUT.pam or -%s", NULL);
    int to_stdout = strcmp(out, "-") == 0;
    int to_png = !to_stdout && ends_with(out, ".png");
    if (!to_stdout && !to_png && !ends_with(out, ".pam")) {
        cli_error(out, "unknown output type (use a .png or .pam name, or - for PAM on stdout)");
        return 2;
    }
    if (to_stdout && isatty(STDOUT_FILENO)) {
        cli_error("-", "refusing to write binary PAM to a terminal");
        return 1;
    }

    unsigned char *d;
    size_t n;
    if (read_or_report(in, &d, &n))
        return 1;
    struct l3_info info;
    void *px = NULL;
    size_t pxn = 0;
    int st = l3_decode_alloc(d, n, &dopt, &px, &pxn, &info);
    if (st != L3_OK) {
        l3_report(in, st, d, n);
        free(d);
        return 1;
    }
    free(d);
    void *outbuf = NULL;
    size_t outn = 0;
    if (to_png) {
        st = l3_png_encode(&info, px, 0, &outbuf, &outn);
        if (st != L3_OK) {
            cli_error(out, "cannot encode PNG: %s", l3_strerror(st));
            l3_free(px);
            return 1;
        }
    } else {
        outbuf = make_pam(&info, px, &outn);
        if (outbuf == NULL) {
            cli_error(out, "%s", strerror(ENOMEM));
            l3_free(px);
            return 1;
        }
    }
    l3_free(px);
    int rc = 0;
    if (to_stdout) {
        int e = cli_write_all(STDOUT_FILENO, outbuf, outn);
        if (e) {
            cli_error("stdout", "%s", strerror(e));
            rc = 1;
        }
    } else {
        rc = write_or_report(out, outbuf, outn);
    }
    free(outbuf);
    return rc;
}

/* ------------------------------------------------------------ info */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* How the planes are coded: count and share of payload bytes per mode byte. */
static void print_plane_modes(const struct l3_layout *lay, const unsigned char *d)
{
    static const char *const kinds[] = {"CONST", "RAW", "MED", "GRAD", "LEFT2", "LEFT"};
    uint64_t count[64] = {0}, bytes[64] = {0}, prev = 0;
    const unsigned char *payload = d + lay->header_size;
    for (uint32_t t = 0; t < lay->tile_count; t++) {
        uint64_t end = l3_rd_u64le(d + lay->table_offset + 8 * (size_t)t);
        struct l3_tile_header th;
        if (l3_tile_parse(payload + prev, (size_t)(end - prev), lay->planes, &th) == L3_OK)
            for (unsigned p = 0; p < lay->planes; p++) {
                count[th.mode[p] & 63]++;
                bytes[th.mode[p] & 63] += th.len[p];
            }
        prev = end;
    }
    printf("  plane modes     (planes, %% of payload bytes)");
    const char *sep = " ";
    for (unsigned m = 0; m < 64; m++) {
        if (!count[m] || (m & 15) > 5)
            continue;
        printf("%s%s%s%s %llu (%.1f%%)", sep, kinds[m & 15], (m & L3_PLANE_LZ) ? "+LZ" : "",
               (m & L3_PLANE_SHORT) ? "/8" : "", (unsigned long long)count[m],
               lay->payload_size ? 100.0 * (double)bytes[m] / (double)lay->payload_size : 0.0);
        sep = ", ";
    }
    printf("\n");
}

static void print_info(const char *path, const struct l3_info *i, const struct l3_layout *lay,
                       const unsigned char *d, size_t file_size)
{
    printf("%s:\n", path);
    printf("  format          L3 version %d\n", L3_FORMAT_VERSION);
    printf("  size            %u x %u\n", i->width, i->height);
    printf("  colour          %s, %u channel%s, %u-bit samples\n", color_name(i->color),
           i->channels, i->channels == 1 ? "" : "s", i->bit_depth);
    if (i->color == L3_COLOR_PALETTE)
        printf("  palette         %u entries, %u with alpha (tRNS)\n", i->palette_len,
               i->palette_alpha_len);
    if (i->has_trns_key) {
        if (i->color == L3_COLOR_GRAY)
            printf("  transparent key gray %u\n", i->trns_key[0]);
        else
            printf("  transparent key RGB %u %u %u\n", i->trns_key[0], i->trns_key[1],
                   i->trns_key[2]);
    }
    size_t raw = l3_decoded_size(i, 0);
    printf("  tiles           %u x %u pixels, %u x %u = %u tiles, %u coded planes each\n",
           i->tile_width, i->tile_height, i->tiles_x, i->tiles_y, lay->tile_count, lay->planes);
    printf("  file size       %zu bytes = %zu header (incl. tile table) + %llu payload%s\n",
           file_size, lay->header_size, (unsigned long long)lay->payload_size,
           (uint64_t)file_size - lay->header_size == lay->payload_size ? ""
                                                                       : " (SIZE MISMATCH)");
    printf("  compression     %.3f bits/pixel, %.1f%% of the %zu decoded bytes\n",
           8.0 * (double)file_size / ((double)i->width * i->height),
           raw ? 100.0 * (double)file_size / (double)raw : 0.0, raw);
    printf("  header checksum OK (XXH3-64); payload checksum %016llx (check with 'l3 verify')\n",
           (unsigned long long)lay->payload_hash);
    /* Tile sizes from the tile table (u64 end offsets into the payload). */
    if (lay->tile_count > 0) {
        uint64_t prev = 0, mn = UINT64_MAX, mx = 0;
        uint64_t *sizes = malloc(sizeof *sizes * lay->tile_count);
        for (uint32_t t = 0; t < lay->tile_count; t++) {
            uint64_t end = l3_rd_u64le(d + lay->table_offset + 8 * (size_t)t);
            uint64_t sz = end - prev;
            prev = end;
            if (sz < mn)
                mn = sz;
            if (sz > mx)
                mx = sz;
            if (sizes)
                sizes[t] = sz;
        }
        printf("  tile bytes      min %llu, mean %.1f, max %llu", (unsigned long long)mn,
               (double)lay->payload_size / lay->tile_count, (unsigned long long)mx);
        if (sizes) {
            qsort(sizes, lay->tile_count, sizeof *sizes, cmp_u64);
            printf(", median %llu", (unsigned long long)sizes[lay->tile_count / 2]);
            free(sizes);
        }
        printf("\n");
        print_plane_modes(lay, d);
    }
}

static int cmd_info(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return usage_error("info: needs exactly one FILE.l3%s", NULL);
    const char *path = argv[1];
    unsigned char *d;
    size_t n;
    if (read_or_report(path, &d, &n))
        return 1;
    struct l3_info info;
    struct l3_layout layout;
    size_t needed = 0;
    int st = l3_read_layout(d, n, &info, &layout, &needed);
    if (st != L3_OK) {
        if (st == L3_ERR_TRUNCATED && needed > n)
            cli_error(path, "%s (%zu bytes, header and tile table need %zu)", l3_strerror(st), n,
                      needed);
        else
            l3_report(path, st, d, n);
        free(d);
        return 1;
    }
    print_info(path, &info, &layout, d, n);
    free(d);
    return 0;
}

/* ------------------------------------------------------------ verify */

static int same_description(const struct l3_info *a, const struct l3_info *b, char *why,
                            size_t whylen)
{
    if (a->width != b->width || a->height != b->height) {
        snprintf(why, whylen, "size %ux%u, source %ux%u", a->width, a->height, b->width,
                 b->height);
        return 0;
    }
    if (a->color != b->color || a->bit_depth != b->bit_depth || a->channels != b->channels) {
        snprintf(why, whylen, "%s %u-bit, source %s %u-bit", color_name(a->color), a->bit_depth,
                 color_name(b->color), b->bit_depth);
        return 0;
    }
    if (a->palette_len != b->palette_len || a->palette_alpha_len != b->palette_alpha_len ||
        memcmp(a->palette, b->palette, 4u * a->palette_len) != 0) {
        snprintf(why, whylen, "palette differs from the source");
        return 0;
    }
    if (a->has_trns_key != b->has_trns_key ||
        (a->has_trns_key && memcmp(a->trns_key, b->trns_key, sizeof a->trns_key) != 0)) {
        snprintf(why, whylen, "transparent colour key differs from the source");
        return 0;
    }
    return 1;
}

static int cmd_verify(int argc, char **argv)
{
    const char *path = NULL, *against = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--against") == 0 && i + 1 < argc)
            against = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("verify: unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return usage_error("verify: unexpected argument '%s'", argv[i]);
    }
    if (!path)
        return usage_error("verify: needs FILE.l3%s", NULL);
    unsigned char *d;
    size_t n;
    if (read_or_report(path, &d, &n))
        return 1;
    int st = l3_verify(d, n);
    if (st != L3_OK) {
        l3_report(path, st, d, n);
        free(d);
        return 1;
    }
    struct l3_decode_options dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.threads = cli_default_threads();
    struct l3_info info;
    void *px = NULL;
    size_t pxn = 0;
    st = l3_decode_alloc(d, n, &dopt, &px, &pxn, &info);
    free(d);
    if (st != L3_OK) {
        cli_error(path, "%s", l3_strerror(st));
        return 1;
    }
    int rc = 0;
    if (against) {
        unsigned char *s;
        size_t sn;
        if (read_or_report(against, &s, &sn)) {
            l3_free(px);
            return 1;
        }
        struct l3_info si;
        void *spx = NULL;
        size_t spxn = 0;
        int is_png = l3_is_png(s, sn);
        st = is_png ? l3_png_decode(s, sn, NULL, &si, &spx, &spxn) : L3_ERR_PNG;
        free(s);
        if (st != L3_OK) {
            cli_error(against, "%s", is_png ? l3_strerror(st) : "not a PNG file");
            l3_free(px);
            return 1;
        }
        char why[256];
        if (!same_description(&info, &si, why, sizeof why)) {
            cli_error(path, "differs from %s: %s", against, why);
            rc = 1;
        } else if (spxn != pxn || memcmp(spx, px, pxn) != 0) {
            size_t k = 0;
            const unsigned char *a = px, *b = spx;
            while (k < pxn && a[k] == b[k])
                k++;
            size_t sb = l3_sample_bytes(&info);
            size_t sample = k / sb;
            size_t pixel = sample / info.channels;
            cli_error(path, "differs from %s: first at pixel (%zu, %zu), channel %zu", against,
                      pixel % info.width, pixel / info.width, sample % info.channels);
            rc = 1;
        }
        free(spx);
    }
    l3_free(px);
    if (rc == 0) {
        printf("%s: OK (header and payload checksums, %llu tiles decoded", path,
               (unsigned long long)info.tiles_x * info.tiles_y);
        if (against)
            printf(", %zu bytes of samples identical to %s", pxn, against);
        printf(")\n");
    }
    return rc;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("missing command%s", NULL);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("l3 %s (L3 format version %d, libpng %s)\n", L3_VERSION_STRING, L3_FORMAT_VERSION,
               png_get_libpng_ver(NULL));
        return 0;
    }
    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    int rc;
    if (strcmp(cmd, "encode") == 0)
        rc = cmd_encode(sub_argc, sub_argv);
    else if (strcmp(cmd, "decode") == 0)
        rc = cmd_decode(sub_argc, sub_argv);
    else if (strcmp(cmd, "info") == 0)
        rc = cmd_info(sub_argc, sub_argv);
    else if (strcmp(cmd, "verify") == 0)
        rc = cmd_verify(sub_argc, sub_argv);
    else if (strcmp(cmd, "bench") == 0)
        rc = cli_bench(sub_argc, sub_argv);
    else
        rc = usage_error("unknown command '%s'", cmd);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("stdout", "%s", strerror(errno));
        return 1;
    }
    return rc;
}
