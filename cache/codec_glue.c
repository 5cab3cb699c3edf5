/* codec_glue.c — the default encode and check steps (libl3). */
#include <errno.h>
#include <stdlib.h>

#include "l3_xxh.h"

#include "handle.h"

int l3cache_default_encode(void *ctx, const void *png, size_t png_size,
                           const struct l3_encode_options *opts,
                           void **out_ret, size_t *size_ret)
{
    (void)ctx;
    return l3_transcode_png(png, png_size, opts, out_ret, size_ret);
}

int l3cache_default_check(void *ctx, const void *data, size_t size,
                          uint64_t total, int level, size_t *needed_ret)
{
    (void)ctx;
    if (level >= L3CACHE_CHECK_WHOLE)
        return l3_verify(data, size);
    struct l3_info info;
    struct l3_layout layout;
    size_t needed = 0;
    int st = l3_read_layout(data, size, &info, &layout, &needed);
    if (st == L3_ERR_TRUNCATED && needed > size && needed <= total) {
        *needed_ret = needed;
        return -1;
    }
    if (st != L3_OK)
        return st;
    /* header (with its checksum) says how long the object must be: a
     * truncated or extended object is caught without reading the payload */
    if ((uint64_t)layout.header_size + layout.payload_size != total)
        return L3_ERR_TRUNCATED;
    if (level == L3CACHE_CHECK_PAYLOAD &&
        XXH3_64bits((const uint8_t *)data + layout.header_size, (size_t)layout.payload_size) !=
            layout.payload_hash)
        return L3_ERR_PAYLOAD_CHECKSUM;
    return L3_OK;
}

int l3cache_default_payload(void *ctx, const void *prefix, size_t size, uint64_t total,
                            uint64_t *offset_ret, uint64_t *xxh3_64_ret)
{
    (void)ctx;
    (void)total;
    struct l3_info info;
    struct l3_layout layout;
    int st = l3_read_layout(prefix, size, &info, &layout, NULL);
    if (st != L3_OK)
        return st;
    *offset_ret = layout.header_size;
    *xxh3_64_ret = layout.payload_hash;
    return L3_OK;
}
