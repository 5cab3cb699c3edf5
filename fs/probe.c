/* probe.c — the questions the namespace rules (names.c) ask one source
 * directory: does NAME exist, and does it qualify as a PNG shown as .l3
 * (regular file, PNG signature, not excluded). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

int probe_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int probe_exists(void *vctx, const char *name)
{
    struct probe_ctx *c = vctx;
    if (c->sorted) {
        const char *key = name;
        return bsearch(&key, c->sorted, c->n, sizeof(char *), probe_cmp_names) != NULL;
    }
    struct stat st;
    return fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void remember(struct probe_ctx *c, const char *name, const struct probe_found *f)
{
    if (c->found.fd >= 0)
        close(c->found.fd);
    strcpy(c->memo_name, name);
    c->found = *f;
}

static int has_png_signature(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return 0;
    unsigned char sig[8];
    ssize_t r = pread(fd, sig, sizeof sig, 0);
    close(fd);
    return r == (ssize_t)sizeof sig && l3_is_png(sig, sizeof sig);
}

/* Regular file, PNG signature, not excluded. A source the index knows was a
 * PNG when it was encoded, so its signature is not read again. */
static int probe_qualifies(void *vctx, const char *name)
{
    struct probe_ctx *c = vctx;
    const struct l3fs_options *o = c->d->opts;
    if (l3fs_excluded(o->excludes, o->n_excludes, c->reldir, name))
        return 0;
    struct probe_found f;
    int pfd = f.fd = l3fs_open_entry(c->dirfd, name, &f.sn);
    if (pfd < 0)
        return 0;
    if (!S_ISREG(f.sn.st.st_mode)) {
        close(pfd);
        return 0;
    }
    f.size = 0;
    memset(&f.key, 0, sizeof f.key);
    f.known = c->d->cache && l3cache_index_lookup(c->d->cache, &f.sn.id, &f.size, &f.key) == 0;
    int known = f.known;
    if (c->memo && strlen(name) < sizeof c->memo_name)
        remember(c, name, &f);
    else
        close(pfd);
    return known || has_png_signature(c->dirfd, name);
}

void probe_init(struct l3fs_daemon *d, struct l3fs_probe *p, struct probe_ctx *c, int dirfd,
                const char *reldir)
{
    memset(c, 0, sizeof *c);
    c->d = d;
    c->dirfd = dirfd;
    c->reldir = reldir;
    c->found.fd = -1;
    p->exists = probe_exists;
    p->qualifies = probe_qualifies;
    p->ctx = c;
}

int probe_take_memo(struct probe_ctx *c, const char *name, struct probe_found *found_ret)
{
    if (c->found.fd < 0 || strcmp(c->memo_name, name) != 0)
        return 0;
    *found_ret = c->found;
    c->found.fd = -1;
    return 1;
}

void probe_done(struct probe_ctx *c)
{
    if (c->found.fd >= 0)
        close(c->found.fd);
    c->found.fd = -1;
}
