/* dir.c — directory handles: the listing taken at opendir and the entries
 * readdir and readdirplus hand out from it. readdir never encodes: with
 * readdirplus a .l3 gets full attributes only when the cache index knows its
 * size; the others are looked up (and encoded) when something stats them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

struct dirh {
    int fd;              /* O_PATH descriptor of the directory, or -1 */
    size_t n;
    char **names;        /* listing in readdir order */
    unsigned char *types;
    ino_t *inos;
    char **sorted;       /* same names sorted, for exists() */
    struct node *dir;
};

void dirh_free(struct dirh *dh)
{
    if (!dh)
        return;
    for (size_t i = 0; i < dh->n; i++)
        free(dh->names[i]);
    free(dh->names);
    free(dh->types);
    free(dh->inos);
    free(dh->sorted);
    if (dh->fd >= 0)
        close(dh->fd);
    free(dh);
}

/* ------------------------------------------------------------- listing */

static int dirh_grow(struct dirh *dh, size_t *cap)
{
    if (dh->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    char **nn = realloc(dh->names, nc * sizeof *nn);
    if (nn)
        dh->names = nn;
    unsigned char *nt = realloc(dh->types, nc);
    if (nt)
        dh->types = nt;
    ino_t *ni = realloc(dh->inos, nc * sizeof *ni);
    if (ni)
        dh->inos = ni;
    if (!nn || !nt || !ni)
        return -ENOMEM;
    *cap = nc;
    return 0;
}

/* Reads the whole directory (the root's ".l3fs" is shadowed by the control
 * directory). Returns 0 or an errno value. */
static int dirh_list(struct l3fs_daemon *d, struct dirh *dh)
{
    int fd = openat(dh->dir->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    DIR *dp = fdopendir(fd);
    if (!dp) {
        int e = errno;
        close(fd);
        return e;
    }
    size_t cap = 0;
    int err = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(dp))) {
        if (dh->dir == &d->root && strcmp(de->d_name, L3FS_CTL_DIR) == 0)
            continue;
        if (dirh_grow(dh, &cap) < 0 || !(dh->names[dh->n] = strdup(de->d_name))) {
            err = ENOMEM;
            break;
        }
        dh->types[dh->n] = de->d_type;
        dh->inos[dh->n] = de->d_ino;
        dh->n++;
        errno = 0;
    }
    if (!err && errno)
        err = errno;
    closedir(dp);
    return err;
}

int dirh_open(struct l3fs_daemon *d, struct node *n, struct dirh **dh_ret)
{
    struct dirh *dh = calloc(1, sizeof *dh);
    if (!dh)
        return ENOMEM;
    dh->fd = -1;
    dh->dir = n;
    if (n->kind == NK_CTL_DIR) {
        *dh_ret = dh;
        return 0;
    }
    if (n->kind != NK_SRC || !S_ISDIR(n->mode)) {
        free(dh);
        return ENOTDIR;
    }
    int err = dirh_list(d, dh);
    if (!err && !(dh->sorted = malloc((dh->n ? dh->n : 1) * sizeof(char *))))
        err = ENOMEM;
    if (!err) {
        memcpy(dh->sorted, dh->names, dh->n * sizeof(char *));
        qsort(dh->sorted, dh->n, sizeof(char *), probe_cmp_names);
        dh->fd = openat(n->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dh->fd < 0)
            err = errno;
    }
    if (err) {
        dirh_free(dh);
        return err;
    }
    *dh_ret = dh;
    return 0;
}

/* ------------------------------------------------------------- entries */

/* The entry NAME of the listing as it is now: from the probe's memo for a
 * .l3 (qualifies() just opened it and asked the index), else opened and
 * stat()ed here, with the index asked for a .l3. 0 or -1 (entry gone). */
static int entry_now(struct l3fs_daemon *d, struct dirh *dh, struct probe_ctx *pc,
                     const char *name, int kind, struct probe_found *f)
{
    if (kind == NK_L3 && probe_take_memo(pc, name, f))
        return 0;
    memset(f, 0, sizeof *f);
    f->fd = l3fs_open_entry(dh->fd, name, &f->sn);
    if (f->fd < 0)
        return -1;
    if (kind == NK_L3 && S_ISREG(f->sn.st.st_mode))
        f->known = l3cache_index_lookup(d->cache, &f->sn.id, &f->size, &f->key) == 0;
    return 0;
}

/* readdirplus of entry NAME: a node and its attributes when they can be had
 * without encoding (a .l3 only when the index knows its size); NULL leaves
 * the entry without attributes, so the kernel looks it up. */
static struct node *plus_node(struct l3fs_daemon *d, struct dirh *dh, struct probe_ctx *pc,
                              const char *name, int kind, struct fuse_entry_param *e)
{
    struct probe_found f;
    if (entry_now(d, dh, pc, name, kind, &f) < 0)
        return NULL;
    if (kind == NK_L3 && !(S_ISREG(f.sn.st.st_mode) && f.known)) {
        close(f.fd); /* readdir never encodes: sizes the index knows only */
        return NULL;
    }
    if (kind == NK_L3)
        COUNT(d, index_hits, 1);
    struct node *n = node_ref(d, f.fd, &f.sn, kind, dh->dir, name);
    if (n && kind == NK_L3 && l3_describe_indexed(d, n, &f.sn.id, f.size, &f.key, &f.sn.st)) {
        /* open handles keep that version: no entry here, the kernel looks
         * the name up (a new node) */
        node_unref(d, n, 1);
        n = NULL;
    }
    if (n) {
        e->ino = node_id(d, n);
        e->attr = f.sn.st;
        e->attr_timeout = e->entry_timeout =
            kind == NK_L3 ? d->opts->timeout : d->opts->dir_timeout;
    }
    return n;
}

size_t dirh_read(struct l3fs_daemon *d, struct dirh *dh, fuse_req_t req, char *buf, size_t size,
                 off_t off, int plus)
{
    if (dh->dir->kind == NK_CTL_DIR)
        return ctl_readdir(d, req, buf, size, off, plus);
    struct l3fs_probe probe;
    struct probe_ctx pc;
    probe_init(d, &probe, &pc, dh->fd, dh->dir->relpath);
    pc.sorted = dh->sorted;
    pc.n = dh->n;
    pc.memo = plus;
    size_t used = 0;
    for (size_t i = (size_t)off; i < dh->n; i++) {
        const char *name = dh->names[i];
        char shown[256];
        int kind = NK_SRC;
        const char *vis = name;
        if (dh->types[i] != DT_DIR && l3fs_has_png_ext(name, NULL)) {
            if (d->opts->keep_names) { /* encoded under its own name */
                if (probe.qualifies(probe.ctx, name))
                    kind = NK_L3;
            } else if (l3fs_png_shown_as_l3(&probe, name) && l3fs_l3_name(name, shown) == 0) {
                kind = NK_L3;
                vis = shown;
            }
        }
        struct fuse_entry_param e;
        memset(&e, 0, sizeof e);
        e.attr.st_ino = kind == NK_L3 ? dh->inos[i] ^ L3_INO_BIT : dh->inos[i];
        e.attr.st_mode = kind == NK_L3 ? S_IFREG : (mode_t)DTTOIF(dh->types[i]);
        size_t sz;
        if (!plus) {
            sz = fuse_add_direntry(req, buf + used, size - used, vis, &e.attr, (off_t)(i + 1));
        } else {
            struct node *n = NULL;
            if (strcmp(name, ".") && strcmp(name, ".."))
                n = plus_node(d, dh, &pc, name, kind, &e);
            sz = fuse_add_direntry_plus(req, buf + used, size - used, vis, &e, (off_t)(i + 1));
            if (sz > size - used && n)
                node_unref(d, n, 1);
        }
        if (sz > size - used)
            break;
        used += sz;
    }
    probe_done(&pc);
    return used;
}
