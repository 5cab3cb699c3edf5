/* names.c — which source entries l3fs shows as .l3, and under which name. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "l3fs.h"

int l3fs_has_png_ext(const char *name, size_t *stem_len_ret)
{
    size_t n = strlen(name);
    if (n < 5 || strcasecmp(name + n - 4, ".png") != 0)
        return 0;
    if (stem_len_ret)
        *stem_len_ret = n - 4;
    return 1;
}

int l3fs_has_l3_ext(const char *name, size_t *stem_len_ret)
{
    size_t n = strlen(name);
    if (n < 4 || strcmp(name + n - 3, ".l3") != 0)
        return 0;
    if (stem_len_ret)
        *stem_len_ret = n - 3;
    return 1;
}

int l3fs_png_variants(const char *stem, size_t stem_len, char variants[8][256])
{
    if (stem_len + 5 > 256)
        return -ENAMETOOLONG;
    /* Bit i of k set = letter i lower case. Uppercase letters sort before
     * lowercase ones in ASCII, so k = 0..7 in this bit order (p is the most
     * significant position) is bytewise ascending. */
    static const char up[3] = {'P', 'N', 'G'};
    for (int k = 0; k < 8; k++) {
        char *v = variants[k];
        memcpy(v, stem, stem_len);
        v[stem_len] = '.';
        for (int i = 0; i < 3; i++) {
            int lower = (k >> (2 - i)) & 1;
            v[stem_len + 1 + i] = (char)(lower ? up[i] + ('a' - 'A') : up[i]);
        }
        v[stem_len + 4] = '\0';
    }
    return 0;
}

int l3fs_l3_name(const char *png_name, char *out_ret)
{
    size_t stem;
    if (!l3fs_has_png_ext(png_name, &stem) || stem + 4 > 255)
        return -EINVAL;
    memcpy(out_ret, png_name, stem);
    memcpy(out_ret + stem, ".l3", 4);
    return 0;
}

int l3fs_png_shown_as_l3(const struct l3fs_probe *probe, const char *name)
{
    size_t stem;
    char variants[8][256];
    char l3name[256];
    if (!l3fs_has_png_ext(name, &stem) || l3fs_png_variants(name, stem, variants) < 0)
        return 0;
    if (stem + 4 > 255)
        return 0; /* STEM.l3 would be fine, but keep the rule symmetric */
    if (!probe->qualifies(probe->ctx, name))
        return 0;
    memcpy(l3name, name, stem);
    memcpy(l3name + stem, ".l3", 4);
    if (probe->exists(probe->ctx, l3name))
        return 0;
    for (int k = 0; k < 8; k++) {
        if (strcmp(variants[k], name) >= 0)
            break;
        if (probe->exists(probe->ctx, variants[k]) &&
            probe->qualifies(probe->ctx, variants[k]))
            return 0;
    }
    return 1;
}

int l3fs_resolve_l3(const struct l3fs_probe *probe, const char *name, char *src_ret)
{
    size_t stem;
    char variants[8][256];
    if (!l3fs_has_l3_ext(name, &stem))
        return -ENOENT;
    if (probe->exists(probe->ctx, name))
        return L3FS_L3_REAL;
    if (l3fs_png_variants(name, stem, variants) < 0)
        return -ENOENT;
    for (int k = 0; k < 8; k++) {
        if (probe->exists(probe->ctx, variants[k]) &&
            probe->qualifies(probe->ctx, variants[k])) {
            memcpy(src_ret, variants[k], strlen(variants[k]) + 1);
            return L3FS_L3_ENCODED;
        }
    }
    return -ENOENT;
}

int l3fs_excluded(char *const *globs, size_t n_globs, const char *reldir,
                  const char *name)
{
    char rel[4096];
    int have_rel = 0;
    for (size_t i = 0; i < n_globs; i++) {
        const char *g = globs[i];
        if (strchr(g, '/')) {
            if (!have_rel) {
                int n = reldir[0] ? snprintf(rel, sizeof rel, "%s/%s", reldir, name)
                                  : snprintf(rel, sizeof rel, "%s", name);
                if (n < 0 || (size_t)n >= sizeof rel)
                    continue;
                have_rel = 1;
            }
            while (*g == '/')
                g++;
            if (fnmatch(g, rel, FNM_PATHNAME) == 0)
                return 1;
        } else if (fnmatch(g, name, 0) == 0) {
            return 1;
        }
    }
    return 0;
}
