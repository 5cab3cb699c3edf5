/* mountpoint.c — where l3fs refuses to mount: on a live FUSE mount (a second
 * mount would stack on top, and one `fusermount3 -u` would then take the new
 * one off and leave the old) and inside its own source (the mount would show
 * itself: lookups loop with ELOOP and it cannot be unmounted cleanly). Other
 * mounts at the mountpoint (a bind mount or volume given to a container) are
 * fine: mounting over them is how such setups work. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "l3fs.h"

/* Undoes mountinfo's octal escapes (\040 space, \011 tab, \012, \134) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The mount at exactly PATH: its type and source into type/src (cap bytes).
 * 1 found, 0 not, -errno when the table cannot be read. The last match wins
 * (the topmost mount). */
static int mount_at(const char *mountinfo, const char *path, char *type, char *src, size_t cap)
{
    FILE *f = fopen(mountinfo, "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t len = 0;
    int found = 0;
    while (getline(&line, &len, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER */
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        char *mp = NULL;
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " \n", &save);
        mp = tok;
        if (!mp)
            continue;
        unescape(mp);
        if (strcmp(mp, path) != 0)
            continue;
        while ((tok = strtok_r(NULL, " \n", &save)) && strcmp(tok, "-") != 0)
            ;
        char *t = strtok_r(NULL, " \n", &save), *s = strtok_r(NULL, " \n", &save);
        if (!t)
            continue;
        unescape(t);
        snprintf(type, cap, "%s", t);
        if (s)
            unescape(s);
        snprintf(src, cap, "%s", s ? s : "?");
        found = 1;
    }
    free(line);
    fclose(f);
    return found;
}

int l3fs_check_mountpoint(const struct l3fs_options *o, const char *mountinfo)
{
    size_t sl = strlen(o->source);
    if (!strcmp(o->mountpoint, o->source) ||
        (!strncmp(o->mountpoint, o->source, sl) &&
         (o->mountpoint[sl] == '/' || !strcmp(o->source, "/")))) {
        fprintf(stderr, "l3fs: mountpoint %s is inside the source %s: the mount would "
                        "contain itself; choose a mountpoint outside the source\n",
                o->mountpoint, o->source);
        return -ELOOP;
    }
    char type[256], src[4096];
    int r = mount_at(mountinfo ? mountinfo : "/proc/self/mountinfo", o->mountpoint, type, src,
                     sizeof type);
    struct stat st;
    if (r == 1 && !strncmp(type, "fuse", 4) && stat(o->mountpoint, &st) < 0 && errno == ENOTCONN) {
        fprintf(stderr, "l3fs: %s is a dead FUSE mount (%s from %s, its daemon exited): "
                        "run 'fusermount3 -u %s' first, then mount again\n",
                o->mountpoint, type, src, o->mountpoint);
        return -ENOTCONN;
    }
    if (r == 1 && !strncmp(type, "fuse", 4)) {
        fprintf(stderr, "l3fs: %s is already mounted (%s from %s): unmount it first "
                        "('fusermount3 -u %s') or choose another mountpoint\n",
                o->mountpoint, type, src, o->mountpoint);
        return -EBUSY;
    }
    return 0; /* an unreadable mount table does not stop a mount */
}
