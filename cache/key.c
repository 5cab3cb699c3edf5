/* key.c — content keys and object paths: key = XXH3-128(source bytes || P),
 * the object of a key at objects/ab/cdef...l3 (docs/CACHE.md). */
#include <stdio.h>
#include <string.h>

#include "l3_xxh.h"

#include "l3_le.h"
#include "l3cache_internal.h"

/* Parameter block P (docs/CACHE.md, "Keys"): the format version and the
 * codec's canonical form of the encoder parameters (l3.h), so that two
 * settings that encode identically share keys; threads and limits are not
 * part of it. */
static void param_block(uint8_t params[32], uint32_t format_version,
                        const struct l3_encode_options *enc, uint64_t size)
{
    struct l3_encode_options canon;
    l3_encode_options_canonical(enc, &canon);
    memset(params, 0, 32);
    memcpy(params, "l3cache1", 8);
    l3_wr_u32le(params + 8, format_version);
    l3_wr_u32le(params + 12, canon.tile_width);
    l3_wr_u32le(params + 16, canon.tile_height);
    l3_wr_u32le(params + 20, (uint32_t)canon.effort);
    l3_wr_u64le(params + 24, size);
}

uint64_t l3cache_params_id(uint32_t format_version, const struct l3_encode_options *enc)
{
    uint8_t params[32];
    param_block(params, format_version, enc, 0);
    return XXH3_64bits(params, sizeof(params));
}

void l3cache_key_compute(const void *data, size_t size, uint32_t format_version,
                         const struct l3_encode_options *enc,
                         struct l3cache_key *key_ret)
{
    uint8_t params[32];
    param_block(params, format_version, enc, (uint64_t)size);

    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    if (size)
        XXH3_128bits_update(&st, data, size);
    XXH3_128bits_update(&st, params, sizeof(params));
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, h);
    memcpy(key_ret->bytes, canon.digest, 16);
}

void l3cache_key_hex(const struct l3cache_key *key, char hex_ret[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        hex_ret[2 * i] = digits[key->bytes[i] >> 4];
        hex_ret[2 * i + 1] = digits[key->bytes[i] & 15];
    }
    hex_ret[32] = 0;
}

void l3cache_object_relpath(const struct l3cache_key *key, char path_ret[64])
{
    char hex[33];
    l3cache_key_hex(key, hex);
    snprintf(path_ret, 64, "objects/%.2s/%s.l3", hex, hex + 2);
}
