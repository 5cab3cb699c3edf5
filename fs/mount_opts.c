/* mount_opts.c — what an -o item that is not an l3fs option may be: a mount
 * helper's or fstab's word that means nothing here (ignored), a FUSE or
 * kernel mount option libfuse accepts (passed on), or a typo, refused in one
 * line with the closest known name. The option parser (options.c) asks. */
#include <stdio.h>
#include <string.h>

#include "mount_opts.h"

/* Options a mount helper or fstab may hand over that mean nothing here. */
int l3fs_mount_opt_ignored(const char *name)
{
    static const char *const ign[] = {"defaults", "auto", "noauto", "nofail", "_netdev",
                                      "user", "users", "nouser", "owner", "group", "comment",
                                      NULL};
    for (int i = 0; ign[i]; i++)
        if (!strcmp(name, ign[i]))
            return 1;
    return strncmp(name, "x-", 2) == 0 || strncmp(name, "comment=", 8) == 0;
}

/* The FUSE and kernel mount options a low-level libfuse 3 session accepts
 * (fuse_session_new + fuse_session_mount); "=" ends a valued one. Anything
 * else in -o is a typo, refused here in one line instead of by libfuse. */
static const char *const fuse_known[] = {
    "allow_other", "allow_root", "default_permissions", "auto_unmount", "blkdev", "blksize=",
    "fsname=", "subtype=", "max_read=", "context=", "fscontext=", "defcontext=",
    "rootcontext=", "debug", "rw", "ro", "suid", "nosuid", "dev", "nodev", "exec", "noexec",
    "async", "sync", "dirsync", "atime", "noatime", "diratime", "nodiratime", "lazytime",
    "nolazytime", "relatime", "norelatime", "strictatime", "nostrictatime", NULL};

/* l3fs's own -o names (as written in -o: '_' for '-'), for suggestions. */
static const char *const l3fs_flags[] = {"syslog", "no_watch", "keep_names", "no_verify", "cache_shared", NULL};

int l3fs_fuse_opt_known(const char *item)
{
    const char *eq = strchr(item, '=');
    size_t n = eq ? (size_t)(eq - item) : strlen(item);
    for (int i = 0; fuse_known[i]; i++) {
        size_t k = strlen(fuse_known[i]);
        int valued_opt = fuse_known[i][k - 1] == '=';
        if (valued_opt ? (eq && n == k - 1 && !strncmp(item, fuse_known[i], n))
                       : (!eq && n == k && !strcmp(item, fuse_known[i])))
            return 1;
    }
    return 0;
}

/* Edit distance of a[0..n) and b, capped at 3 (enough for suggestions). */
static int distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    if (n > 63 || m > 63)
        return 3;
    int row[64];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = diag + cost;
            if (row[j] + 1 < v)
                v = row[j] + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
        }
    }
    return row[m] < 3 ? row[m] : 3;
}

/* One line for an unknown -o item, with the closest known name. */
void l3fs_mount_opt_unknown(const char *item, const char *const valued[])
{
    const char *eq = strchr(item, '=');
    size_t n = eq ? (size_t)(eq - item) : strlen(item);
    const char *best = NULL;
    int bd = 3;
    char cand[64];
    for (int i = 0; valued[i]; i++) {
        snprintf(cand, sizeof cand, "%s", valued[i]);
        for (char *c = cand; *c; c++)
            if (*c == '-')
                *c = '_';
        int dd = distance(item, n, cand);
        if (dd < bd) {
            bd = dd;
            best = valued[i];
        }
    }
    for (int i = 0; l3fs_flags[i]; i++) {
        int dd = distance(item, n, l3fs_flags[i]);
        if (dd < bd) {
            bd = dd;
            best = l3fs_flags[i];
        }
    }
    for (int i = 0; fuse_known[i]; i++) {
        size_t k = strlen(fuse_known[i]);
        snprintf(cand, sizeof cand, "%.*s", (int)(fuse_known[i][k - 1] == '=' ? k - 1 : k),
                 fuse_known[i]);
        int dd = distance(item, n, cand);
        if (dd < bd) {
            bd = dd;
            best = fuse_known[i];
        }
    }
    if (best) {
        char shown[64];
        snprintf(shown, sizeof shown, "%s", best);
        for (char *c = shown; *c; c++)
            if (*c == '-')
                *c = '_';
        size_t k = strlen(shown);
        if (k && shown[k - 1] == '=')
            shown[k - 1] = '\0';
        fprintf(stderr, "l3fs: unknown mount option '%s' (did you mean '%s'?); "
                        "'l3fs --help' lists the options\n", item, shown);
    } else {
        fprintf(stderr, "l3fs: unknown mount option '%s'; 'l3fs --help' lists the options\n",
                item);
    }
}
