/* size.c — l3cache_parse_size: "50G", "512M", "1.5T", "10%" of the
 * filesystem holding the cache directory (binary units). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "l3cache.h"

int l3cache_parse_size(const char *text, const char *dir, uint64_t *bytes_ret)
{
    if (!text || !bytes_ret)
        return -EINVAL;
    const char *p = text;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    /* integer and optional fraction, without floating point surprises */
    uint64_t whole = 0, frac = 0, frac_div = 1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (frac_div < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_div *= 10;
            }
        }
    }
    if (*p == '%') {
        if (p[1] != 0 || whole > 100 || (whole == 100 && frac))
            return -EINVAL;
        if (!dir)
            return -EINVAL;
        /* the filesystem holding dir, or its nearest existing parent */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", dir);
        struct statvfs sv;
        while (statvfs(path, &sv) != 0) {
            if (errno != ENOENT)
                return -errno;
            char *slash = strrchr(path, '/');
            if (!slash)
                snprintf(path, sizeof(path), ".");
            else if (slash == path)
                path[1] = 0;
            else
                *slash = 0;
        }
        uint64_t fs_bytes = (uint64_t)sv.f_blocks * (uint64_t)sv.f_frsize;
        long double v = (long double)fs_bytes * ((long double)whole + (long double)frac / frac_div) / 100.0L;
        *bytes_ret = (uint64_t)v;
        return 0;
    }
    uint64_t mult = 1;
    switch (*p) {
    case 0: break;
    case 'b': case 'B': mult = 1; p++; break;
    case 'k': case 'K': mult = 1ull << 10; p++; break;
    case 'm': case 'M': mult = 1ull << 20; p++; break;
    case 'g': case 'G': mult = 1ull << 30; p++; break;
    case 't': case 'T': mult = 1ull << 40; p++; break;
    case 'p': case 'P': mult = 1ull << 50; p++; break;
    default: return -EINVAL;
    }
    if (mult > 1) { /* optional "B" or "iB" */
        if (*p == 'i' && (p[1] == 'B' || p[1] == 'b'))
            p += 2;
        else if (*p == 'B' || *p == 'b')
            p++;
    }
    if (*p != 0)
        return -EINVAL;
    if (whole > UINT64_MAX / mult)
        return -ERANGE;
    uint64_t v = whole * mult;
    uint64_t f = (uint64_t)((long double)frac / frac_div * (long double)mult);
    if (v > UINT64_MAX - f)
        return -ERANGE;
    *bytes_ret = v + f;
    return 0;
}
