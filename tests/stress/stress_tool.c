/* stress_tool.c — the C side of the l3fs stress suite.
 *
 *   stress_tool gen-tree DIR N SEED [MAXDIM]     tree of small PNGs (libpng)
 *   stress_tool gen-hostile DIR SEED [N]         hostile corpus
 *   stress_tool gen-many DIR N                   one directory with N entries
 *   stress_tool oracle SRC OUT [--skip NAME]...  expected bytes of every file
 *   stress_tool verify MNT ORACLE [opts]         every file through the mount
 *   stress_tool load MNT[,MNT2] ORACLE [opts]    N reader threads, figures
 *   stress_tool lsdir DIR                        readdir + stat timing
 *   stress_tool escape MNT FILE DIR              every kind of write -> EROFS
 *   stress_tool as-user UID GID PATH             open+read as another user
 *   stress_tool json FILE DOTTED.PATH            a number from stats.json
 *   stress_tool churn SRC MNT [opts]             readers while sources change (churn.c)
 *
 * The expected bytes of a .l3 file are computed here, independently of the
 * daemon and its cache: l3_transcode_png() of the source with the default
 * encoder parameters. `verify --pixels` also decodes what the mount served
 * and compares the pixels with libpng's own decode of the source.
 * Every check prints PASS/FAIL lines; exit status 0 only when all passed.
 *
 * Here: main, clocks, whole-file reads and the hang watchdog. The commands:
 * gen.c (gen-*), oracle.c, verify.c, load.c (load, lsdir), escape.c
 * (escape, as-user, json), churn.c; stress.h declares what they share.
 */
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
double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Reads a whole file; returns 0 or -errno (and which step failed). */
int read_all(const char *path, unsigned char **buf, size_t *cap, size_t *len_ret,
             off_t *st_size_ret, const char **step_ret)
{
    *step_ret = "open";
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    *step_ret = "fstat";
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (st_size_ret)
        *st_size_ret = st.st_size;
    size_t len = 0;
    *step_ret = "read";
    for (;;) {
        if (*cap - len < 131072) {
            size_t nc = *cap ? *cap * 2 : 262144;
            unsigned char *q = realloc(*buf, nc);
            if (!q) {
                close(fd);
                return -ENOMEM;
            }
            *buf = q;
            *cap = nc;
        }
        ssize_t r = read(fd, *buf + len, 131072);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    *step_ret = "close";
    if (close(fd) < 0)
        return -errno;
    *len_ret = len;
    return 0;
}

/* ------------------------------------------------------------- watchdog */

/* Every worker publishes when its current operation started; a watchdog
 * ends the process when one takes longer than the limit (a hang). */
_Atomic uint64_t op_start[MAXW];
const char *_Atomic op_path[MAXW];
double hang_limit_s = 30;

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(1);
        uint64_t t = now_ns();
        for (int i = 0; i < MAXW; i++) {
            uint64_t s = atomic_load(&op_start[i]);
            if (s && t > s && (double)(t - s) / 1e9 > hang_limit_s) {
                const char *p = atomic_load(&op_path[i]);
                fprintf(stderr, "FAIL hang: an operation on %s has not returned after %.0f s\n",
                        p ? p : "?", hang_limit_s);
                fflush(stderr);
                _exit(3);
            }
        }
    }
    return NULL;
}

void start_watchdog(void)
{
    pthread_t t;
    pthread_create(&t, NULL, watchdog, NULL);
    pthread_detach(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: stress_tool gen-tree|gen-hostile|gen-many|oracle|verify|load|"
                        "lsdir|escape|as-user|json|churn ...\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const char *c = argv[1];
    argc--, argv++;
    if (!strcmp(c, "gen-tree"))
        return cmd_gen_tree(argc, argv);
    if (!strcmp(c, "gen-hostile"))
        return cmd_gen_hostile(argc, argv);
    if (!strcmp(c, "gen-variant"))
        return cmd_gen_variant(argc, argv);
    if (!strcmp(c, "gen-many"))
        return cmd_gen_many(argc, argv);
    if (!strcmp(c, "oracle"))
        return cmd_oracle(argc, argv);
    if (!strcmp(c, "verify"))
        return cmd_verify(argc, argv);
    if (!strcmp(c, "load"))
        return cmd_load(argc, argv);
    if (!strcmp(c, "lsdir"))
        return cmd_lsdir(argc, argv);
    if (!strcmp(c, "escape"))
        return cmd_escape(argc, argv);
    if (!strcmp(c, "as-user"))
        return cmd_as_user(argc, argv);
    if (!strcmp(c, "json"))
        return cmd_json(argc, argv);
    if (!strcmp(c, "churn"))
        return cmd_churn(argc, argv);
    fprintf(stderr, "stress_tool: unknown command %s\n", c);
    return 2;
}
