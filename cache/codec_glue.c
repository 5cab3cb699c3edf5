/* codec_glue.c — the default encode and check steps (libl3). */
#include <errno.h>
#include <stdlib.h>

#include "l3cache_internal.h"

/* TEMPORARY until libl3 implements these: weak references resolve to NULL. */
#pragma weak l3_transcode_png
#pragma weak l3_read_info
#pragma weak l3_verify

int l3cache_default_encode(void *ctx, const void *png, size_t png_size,
                           const struct l3_encode_options *opts,
                           void **out_ret, size_t *size_ret);
int l3cache_default_check(void *ctx, const void *data, size_t size,
                          uint64_t total, int full, size_t *needed_ret);

int l3cache_default_encode(void *ctx, const void *png, size_t png_size,
                           const struct l3_encode_options *opts,
                           void **out_ret, size_t *size_ret)
{
    (void)ctx;
    if (!l3_transcode_png)
        return L3_ERR_UNSUPPORTED;
    return l3_transcode_png(png, png_size, opts, out_ret, size_ret);
}

int l3cache_default_check(void *ctx, const void *data, size_t size,
                          uint64_t total, int full, size_t *needed_ret)
{
    (void)ctx;
    if (!l3_verify || !l3_read_info)
        return L3_ERR_UNSUPPORTED;
    if (full)
        return l3_verify(data, size);
    struct l3_info info;
    size_t needed = 0;
    int st = l3_read_info(data, size, &info, &needed);
    if (st == L3_ERR_TRUNCATED && needed > size && needed <= total) {
        *needed_ret = needed;
        return -1;
    }
    return st;
}
