/* oracle.c — `stress_tool oracle`: the expected bytes of every file a mount
 * shows (stress_tool.c says how they are computed), saved and loaded. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "l3.h"
#include "l3fs.h"
#include "stress.h"
/* --------------------------------------------------------------- oracle */

static int has_png_ext(const char *name, size_t *stem)
{
    size_t n = strlen(name);
    if (n < 5 || strcasecmp(name + n - 4, ".png") != 0)
        return 0;
    *stem = n - 4;
    return 1;
}

static void add_ent(struct oracle *o, int kind, const char *src, const char *mnt)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 1024;
        o->e = realloc(o->e, o->cap * sizeof *o->e);
    }
    struct ent *e = &o->e[o->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->src = strdup(src);
    e->mnt = strdup(mnt);
}

static char **skips;
static int nskips;

static int skipped(const char *name)
{
    for (int i = 0; i < nskips; i++)
        if (!strcmp(name, skips[i]))
            return 1;
    return 0;
}

static void walk(struct oracle *o, const char *root, const char *rel)
{
    char path[8192];
    st_fmt(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || skipped(de->d_name))
            continue;
        char r[8192], full[8192];
        st_fmt(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        st_fmt(full, sizeof full, "%s/%s", root, r);
        struct stat st;
        if (lstat(full, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(o, root, r);
        } else if (S_ISFIFO(st.st_mode)) {
            add_ent(o, K_FIFO, r, r);
        } else if (S_ISREG(st.st_mode)) {
            size_t stem;
            unsigned char sig[8];
            int png = 0;
            if (has_png_ext(de->d_name, &stem)) {
                int fd = open(full, O_RDONLY | O_CLOEXEC);
                png = fd >= 0 && read(fd, sig, 8) == 8 && l3_is_png(sig, 8);
                if (fd >= 0)
                    close(fd);
            }
            if (png) {
                char m[8192];
                size_t rl = strlen(r);
                st_fmt(m, sizeof m, "%.*s.l3", (int)(rl - 4), r);
                add_ent(o, K_L3, r, m);
            } else {
                add_ent(o, K_PASS, r, r);
            }
        }
    }
    closedir(d);
}

static _Atomic size_t oracle_next;

static void *oracle_worker(void *arg)
{
    struct oracle *o = arg;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        size_t i = atomic_fetch_add(&oracle_next, 1);
        if (i >= o->n)
            break;
        struct ent *e = &o->e[i];
        if (e->kind == K_FIFO)
            continue;
        char path[8192];
        st_fmt(path, sizeof path, "%s/%s", o->srcroot, e->src);
        size_t len;
        const char *step;
        if (read_all(path, &buf, &cap, &len, NULL, &step) < 0) {
            fprintf(stderr, "oracle: cannot read %s\n", path);
            e->err = EIO;
            continue;
        }
        if (e->kind == K_PASS) {
            e->size = len;
            e->h = XXH3_128bits(buf, len);
            continue;
        }
        struct l3_encode_options eo = {0};
        eo.threads = 1;
        void *out = NULL;
        size_t olen = 0;
        int st = l3_transcode_png(buf, len, &eo, &out, &olen);
        if (st != L3_OK) {
            e->err = EIO;
        } else {
            e->size = olen;
            e->h = XXH3_128bits(out, olen);
        }
        l3_free(out);
    }
    free(buf);
    return NULL;
}

void oracle_free(struct oracle *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->e[i].src);
        free(o->e[i].mnt);
    }
    free(o->e);
    free(o->srcroot);
    memset(o, 0, sizeof *o);
}

static int oracle_save(const struct oracle *o, const char *out)
{
    FILE *f = fopen(out, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", o->srcroot);
    for (size_t i = 0; i < o->n; i++) {
        const struct ent *e = &o->e[i];
        fprintf(f, "%d\t%d\t%" PRIu64 "\t%016" PRIx64 "\t%016" PRIx64 "\t%s\t%s\n", e->kind,
                e->err, e->size, (uint64_t)e->h.high64, (uint64_t)e->h.low64, e->src, e->mnt);
    }
    return fclose(f);
}

int oracle_load(struct oracle *o, const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "cannot open oracle %s: %s\n", file, strerror(errno));
        return -1;
    }
    memset(o, 0, sizeof *o);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n <= 0)
        return -1;
    line[strcspn(line, "\n")] = 0;
    o->srcroot = strdup(line);
    while ((n = getline(&line, &cap, f)) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *fields[7];
        char *p = line;
        for (int i = 0; i < 7; i++) {
            fields[i] = p;
            char *t = i < 6 ? strchr(p, '\t') : NULL;
            if (i < 6 && !t)
                return -1;
            if (t) {
                *t = 0;
                p = t + 1;
            }
        }
        add_ent(o, atoi(fields[0]), fields[5], fields[6]);
        struct ent *e = &o->e[o->n - 1];
        e->err = atoi(fields[1]);
        e->size = strtoull(fields[2], NULL, 10);
        e->h.high64 = strtoull(fields[3], NULL, 16);
        e->h.low64 = strtoull(fields[4], NULL, 16);
    }
    free(line);
    fclose(f);
    return 0;
}

int cmd_oracle(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: oracle SRC OUT [--skip NAME]...\n");
        return 2;
    }
    skips = calloc((size_t)argc, sizeof *skips);
    for (int i = 3; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--skip"))
            skips[nskips++] = argv[i + 1];
    struct oracle o = {0};
    o.srcroot = realpath(argv[1], NULL);
    if (!o.srcroot)
        return 1;
    double t0 = now_s();
    walk(&o, o.srcroot, "");
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1)
        nt = 1;
    pthread_t th[64];
    nt = nt > 64 ? 64 : nt;
    for (long i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, oracle_worker, &o);
    for (long i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    size_t l3 = 0, bad = 0, pass = 0, fifo = 0;
    for (size_t i = 0; i < o.n; i++) {
        l3 += o.e[i].kind == K_L3 && !o.e[i].err;
        bad += o.e[i].kind == K_L3 && o.e[i].err;
        pass += o.e[i].kind == K_PASS;
        fifo += o.e[i].kind == K_FIFO;
    }
    if (oracle_save(&o, argv[2]) != 0) {
        fprintf(stderr, "oracle: cannot write %s\n", argv[2]);
        return 1;
    }
    printf("oracle: %zu entries (%zu encodable PNGs, %zu PNGs that must give EIO, %zu "
           "pass-through, %zu FIFOs) in %.2f s\n",
           o.n, l3, bad, pass, fifo, now_s() - t0);
    oracle_free(&o);
    free(skips);
    return 0;
}
