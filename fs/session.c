/* session.c — l3fs_run: the daemon's set-up (source root, cache, limits),
 * the FUSE session (options, mount, background detach), the request loop,
 * and the teardown in reverse order. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon.h"

/* Every directory node holds a descriptor, every open file one or two:
 * raise the limit as far as allowed (root may go past the hard limit, up to
 * fs.nr_open), and cap the object descriptors nodes keep at 1/8 of it. */
static void raise_fd_limit(struct l3fs_daemon *d)
{
    d->max_held_obj_fds = 4096;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = 1048576;
    FILE *f = fopen("/proc/sys/fs/nr_open", "r");
    if (f) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1 && v > 0)
            want = (rlim_t)v;
        fclose(f);
    }
    struct rlimit up = {want, want};
    if (rl.rlim_max < want && setrlimit(RLIMIT_NOFILE, &up) == 0) {
        rl = up;
    } else if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long cap = (long)(rl.rlim_cur / 8);
        d->max_held_obj_fds = cap < 4096 ? (cap > 16 ? cap : 16) : 4096;
    }
    LOG_D("descriptor limit %llu, object descriptors kept <= %ld",
          (unsigned long long)rl.rlim_cur, d->max_held_obj_fds);
}

/* 1 when SOURCE and every directory above it let other users through. */
static int source_public(const char *source)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", source);
    for (;;) {
        struct stat st;
        if (stat(path, &st) != 0 || !(st.st_mode & S_IXOTH))
            return 0;
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            return stat("/", &st) == 0 && (st.st_mode & S_IXOTH);
        *slash = '\0';
    }
}

/* -o allow_other among the FUSE options. */
static int has_allow_other(const char *fuse_opts)
{
    for (const char *p = fuse_opts; p && (p = strstr(p, "allow_other")); p++)
        if ((p == fuse_opts || p[-1] == ',') && (p[11] == ',' || p[11] == '\0'))
            return 1;
    return 0;
}

static int open_source_root(struct l3fs_daemon *d)
{
    d->source_public = source_public(d->opts->source);
    d->allow_other = has_allow_other(d->opts->fuse_opts);
    int rfd = open(d->opts->source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct seen rst;
    if (rfd < 0 || l3cache_identify(rfd, "", AT_EMPTY_PATH, &rst.st, &rst.id) < 0) {
        LOG_E("cannot open source %s: %s", d->opts->source, strerror(errno));
        if (rfd >= 0)
            close(rfd);
        return -1;
    }
    nodes_init(d, rfd, &rst);
    return 0;
}

static int open_cache(struct l3fs_daemon *d)
{
    const struct l3fs_options *opts = d->opts;
    struct l3cache_options co;
    memset(&co, 0, sizeof co);
    co.dir = opts->cache_dir;
    co.fsync_policy = opts->fsync_policy;
    co.encode.threads = opts->encode_threads;
    co.encode.effort = opts->effort;
    co.encode.limits.max_pixels = opts->max_pixels;
    co.encode.limits.max_memory = (size_t)opts->max_memory;
    co.flags |= L3CACHE_READ_CHECKS; /* every read is checked (read.c, fh_read) */
    if (opts->no_verify)
        co.flags |= L3CACHE_TRUST_STORAGE;
    if (opts->cache_shared)
        co.flags |= L3CACHE_SHARED;
    if (opts->cache_size) {
        int r = l3cache_parse_size(opts->cache_size, opts->cache_dir, &co.max_bytes);
        if (r < 0) {
            LOG_E("bad --cache-size %s: %s", opts->cache_size, strerror(-r));
            return -1;
        }
    }
    int r = l3cache_open(&co, &d->cache);
    if (r < 0) {
        LOG_E("cannot open cache directory %s: %s", opts->cache_dir, strerror(-r));
        return -1;
    }
    return 0;
}

static void append_opt(char *buf, size_t cap, const char *o)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? "," : "", o);
}

/* The -o list handed to libfuse: fsname (the source path with commas and
 * backslashes escaped) and subtype unless given, then the user's options. */
static void fuse_opt_list(const struct l3fs_options *opts, char *fopts, size_t cap)
{
    char fsname[PATH_MAX + 64] = "fsname=";
    char *p = fsname + strlen(fsname), *end = fsname + sizeof fsname - 2;
    for (const char *s = opts->source; *s && p < end; s++) {
        if (*s == ',' || *s == '\\') {
            if (p + 1 >= end)
                break;
            *p++ = '\\';
        }
        *p++ = *s;
    }
    *p = '\0';
    fopts[0] = '\0';
    if (!opts->fuse_opts || !strstr(opts->fuse_opts, "fsname="))
        append_opt(fopts, cap, fsname);
    if (!opts->fuse_opts || !strstr(opts->fuse_opts, "subtype="))
        append_opt(fopts, cap, "subtype=l3fs");
    if (opts->fuse_opts && *opts->fuse_opts)
        append_opt(fopts, cap, opts->fuse_opts);
}

/* Mounted in the background: tell the starting process, log to syslog and
 * let go of the terminal. */
static void detach(struct l3fs_daemon *d, int ready_fd)
{
    (void)l3fs_log_background(d->opts); /* first: it may say where the log goes */
    char ok = 0;
    if (write(ready_fd, &ok, 1) != 1)
        LOG_W("cannot notify the starting process");
    close(ready_fd);
    int nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nfd >= 0) {
        dup2(nfd, 0);
        dup2(nfd, 1);
        dup2(nfd, 2);
        if (nfd > 2)
            close(nfd);
    }
}

static int request_loop(struct l3fs_daemon *d)
{
    const struct l3fs_options *opts = d->opts;
    if (opts->singlethread)
        return fuse_session_loop(d->se);
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc) {
        LOG_E("out of memory");
        return -ENOMEM;
    }
    fuse_loop_cfg_set_max_threads(lc, opts->max_threads);
    fuse_loop_cfg_set_idle_threads(lc, opts->max_threads < 16 ? opts->max_threads : 16);
    int r = fuse_session_loop_mt(d->se, lc);
    fuse_loop_cfg_destroy(lc);
    return r;
}

/* Session, signals, mount, loop, unmount. Returns the exit status. */
static int serve(struct l3fs_daemon *d, int *ready_fd)
{
    const struct l3fs_options *opts = d->opts;
    char fopts[4096];
    fuse_opt_list(opts, fopts, sizeof fopts);
    char *fargv[] = {(char *)"l3fs", (char *)"-o", fopts, opts->debug ? (char *)"-d" : NULL,
                     NULL};
    struct fuse_args args = FUSE_ARGS_INIT(opts->debug ? 4 : 3, fargv);
    int status = 1;
    d->se = fuse_session_new(&args, &l3fs_ops, sizeof l3fs_ops, d);
    if (!d->se) {
        LOG_E("cannot start a FUSE session (bad -o option?)");
        goto out_args;
    }
    if (fuse_set_signal_handlers(d->se) != 0) {
        LOG_E("cannot install signal handlers");
        goto out_session;
    }
    if (fuse_session_mount(d->se, opts->mountpoint) != 0) {
        LOG_E("cannot mount on %s", opts->mountpoint);
        goto out_signals;
    }
    LOG_I("mounted %s on %s (cache %s, %u encode jobs)", opts->source, opts->mountpoint,
          opts->cache_dir, opts->jobs);
    if (*ready_fd >= 0) {
        detach(d, *ready_fd);
        *ready_fd = -1;
    }
    watch_start(d);
    int r = request_loop(d);
    watch_stop(d);
    status = r < 0 ? 1 : 0;
    if (r > 0)
        LOG_I("signal %d: unmounting", r);
    fuse_session_unmount(d->se);
    LOG_I("unmounted %s", opts->mountpoint);
out_signals:
    fuse_remove_signal_handlers(d->se);
out_session:
    fuse_session_destroy(d->se);
    d->se = NULL;
out_args:
    fuse_opt_free_args(&args);
    return status;
}

int l3fs_run(struct l3fs_options *opts, int ready_fd)
{
    struct l3fs_daemon *d = calloc(1, sizeof *d);
    if (!d) {
        LOG_E("out of memory");
        return 1;
    }
    d->opts = opts;
    d->watch.fd = d->watch.stop_fd = -1;
    pthread_mutex_init(&d->table_lock, NULL);
    pthread_mutex_init(&d->timings_lock, NULL);
    pthread_mutex_init(&d->bad.lock, NULL);
    clock_gettime(CLOCK_MONOTONIC, &d->start);
    raise_fd_limit(d);
    int status = 1;
    if (!(d->timings = calloc(1, sizeof *d->timings))) {
        LOG_E("out of memory");
        goto out;
    }
    if (open_source_root(d) < 0)
        goto out;
    if (open_cache(d) == 0) {
        sem_init(&d->encode_slots, 0, opts->jobs ? opts->jobs : 1);
        status = serve(d, &ready_fd);
        sem_destroy(&d->encode_slots);
    }
    nodes_free(d);
    l3cache_close(d->cache);
out:
    if (ready_fd >= 0)
        close(ready_fd);
    free(d->timings);
    pthread_mutex_destroy(&d->table_lock);
    pthread_mutex_destroy(&d->timings_lock);
    pthread_mutex_destroy(&d->bad.lock);
    free(d);
    return status;
}
