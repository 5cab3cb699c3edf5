/* devcheck_cpu.c — the device check's CPU steps: the CPU decoder on this
 * machine gives the generated images' source samples and the photos'
 * reference pixels, and the CPU batch decoder (the GPU's reference) agrees
 * with l3gpu_cpu_convert of l3_decode's output for every format. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"

static uint8_t *native(const struct dc_image *im, size_t *size_ret)
{
    size_t sz = l3_decoded_size(&im->info, 0);
    uint8_t *out = malloc(sz ? sz : 1);
    if (!out)
        return NULL;
    int st = l3_decode(im->l3, im->size, out, sz, 0, NULL);
    if (st) {
        dc_fail("CPU l3_decode(%s): %s", im->name, l3_strerror(st));
        free(out);
        return NULL;
    }
    *size_ret = sz;
    return out;
}

/* One set, every format (or every 12th: photos, whose GPU comparison covers
 * all): the batch (separate outputs) == convert(decode). */
static long formats_agree(const struct dc_set *s, uint8_t **dec, unsigned threads, int every)
{
    struct dc_format all[64], fm[64];
    int na = dc_formats(all, 64), nf = 0;
    for (int k = 0; k < na; k += every)
        fm[nf++] = all[k];
    long ok = 0;
    struct l3gpu_input *in = calloc(s->n, sizeof *in);
    void **outs = calloc(s->n, sizeof *outs);
    int *st = calloc(s->n, sizeof *st);
    for (size_t i = 0; i < s->n; i++) {
        in[i].data = s->v[i].l3;
        in[i].size = s->v[i].size;
    }
    for (int k = 0; k < nf; k++) {
        size_t *bytes = calloc(s->n, sizeof *bytes);
        for (size_t i = 0; i < s->n; i++) {
            l3gpu_output_shape(&s->v[i].info, &fm[k].f, NULL, &bytes[i]);
            outs[i] = malloc(bytes[i]);
            memset(outs[i], 0xA5, bytes[i]);
        }
        int r = l3gpu_cpu_decode_batch(in, s->n, &fm[k].f, NULL, 0, outs, st, threads);
        if (r)
            dc_fail("CPU batch %s: %s", fm[k].name, l3gpu_strerror(r));
        for (size_t i = 0; i < s->n; i++) {
            uint8_t *conv = malloc(bytes[i]);
            int c = dec[i] ? l3gpu_cpu_convert(&s->v[i].info, dec[i], 0, &fm[k].f, conv) : -1;
            if (st[i] || c || memcmp(conv, outs[i], bytes[i]))
                dc_fail("CPU batch != convert(l3_decode): %s as %s (status %d)", s->v[i].name,
                        fm[k].name, st[i]);
            else
                ok++;
            free(conv);
            free(outs[i]);
        }
        free(bytes);
    }
    free(in);
    free(outs);
    free(st);
    return ok;
}

void dc_cpu_checks(const struct dc_set *gen, const struct dc_set *photos, unsigned threads)
{
    int before = dc_failures;
    uint8_t **dg = calloc(gen->n ? gen->n : 1, sizeof *dg);
    uint8_t **dp = calloc(photos->n ? photos->n : 1, sizeof *dp);
    long src_ok = 0, ref_ok = 0;
    for (size_t i = 0; i < gen->n; i++) {
        size_t sz = 0;
        dg[i] = native(&gen->v[i], &sz);
        if (dg[i] && (sz != gen->v[i].px_size || memcmp(dg[i], gen->v[i].px, sz)))
            dc_fail("CPU l3_decode(%s) differs from the source samples", gen->v[i].name);
        else if (dg[i])
            src_ok++;
    }
    for (size_t i = 0; i < photos->n; i++) {
        size_t sz = 0;
        dp[i] = native(&photos->v[i], &sz);
        if (!dp[i])
            continue;
        if (photos->v[i].px) { /* synthetic */
            if (sz != photos->v[i].px_size || memcmp(dp[i], photos->v[i].px, sz))
                dc_fail("CPU l3_decode(%s) differs from the source samples", photos->v[i].name);
            else
                ref_ok++;
        } else if (!photos->v[i].ref) {
            dc_fail("%s has no reference hash in ref.txt (rerun gpu/bench/devcheck_prep.sh)",
                    photos->v[i].name);
        } else if (dc_hash(dp[i], sz) != photos->v[i].ref) {
            dc_fail("CPU l3_decode(%s) differs from the reference made where it was prepared",
                    photos->v[i].name);
        } else {
            ref_ok++;
        }
    }
    long fg = formats_agree(gen, dg, threads, 1);
    long fp = photos->n ? formats_agree(photos, dp, threads, 12) : 0;
    dc_row("CPU: %zu generated images decode to their source samples: %ld ok", gen->n, src_ok);
    dc_row("CPU: %zu photos decode to their reference pixels: %ld ok", photos->n, ref_ok);
    dc_row("CPU: batch == convert(l3_decode): generated x 48 formats %ld ok, photos x 4 formats "
           "%ld ok", fg, fp);

    /* a batch with broken images: statuses and zeroed slots */
    if (gen->n >= 2) {
        const struct dc_image *a = &gen->v[0];
        uint8_t *bad = malloc(a->size);
        memcpy(bad, a->l3, a->size);
        struct l3_layout lay;
        l3_read_layout(bad, a->size, NULL, &lay, NULL);
        bad[lay.header_size + 1] = 0x80; /* a plane mode with an undefined flag */
        static const uint8_t junk[40] = "not an L3 file";
        struct l3gpu_input in[4] = {{a->l3, a->size}, {bad, a->size}, {a->l3, a->size - 30},
                                    {junk, sizeof junk}};
        struct l3gpu_format f;
        l3gpu_format_init(&f);
        size_t slot = 0;
        l3gpu_output_shape(&a->info, &f, NULL, &slot);
        uint8_t *out = malloc(4 * slot);
        memset(out, 0x77, 4 * slot);
        int st[4];
        int r = l3gpu_cpu_decode_batch(in, 4, &f, out, 4 * slot, NULL, st, threads);
        int zero = 1;
        for (size_t k = slot; k < 4 * slot; k++)
            zero &= out[k] == 0;
        if (r != L3GPU_ERR_IMAGE || st[0] || st[1] != L3_ERR_CORRUPT || st[2] != L3_ERR_TRUNCATED ||
            st[3] != L3_ERR_BAD_MAGIC || !zero)
            dc_fail("CPU broken batch: return %d, statuses %d %d %d %d, zeroed %d", r, st[0], st[1],
                    st[2], st[3], zero);
        dc_row("CPU: batch with corrupt, truncated and foreign images: statuses %d %d %d %d", st[0],
               st[1], st[2], st[3]);
        free(out);
        free(bad);
    }
    for (size_t i = 0; i < gen->n; i++)
        free(dg[i]);
    for (size_t i = 0; i < photos->n; i++)
        free(dp[i]);
    free(dg);
    free(dp);
    printf("STEP cpu-checks: %s\n", dc_failures == before ? "PASS" : "FAIL");
}

int dc_write_refs(const struct dc_set *photos, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ref.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (size_t i = 0; i < photos->n; i++) {
        size_t sz = 0;
        uint8_t *d = native(&photos->v[i], &sz);
        if (d)
            fprintf(f, "%s %016llx\n", photos->v[i].name, (unsigned long long)dc_hash(d, sz));
        free(d);
    }
    return fclose(f) ? -1 : 0;
}
