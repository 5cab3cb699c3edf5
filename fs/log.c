/* log.c — leveled logging of the daemon: to stderr, to a --log-file, or to
 * syslog (--syslog, and by default once in the background). Where syslog has
 * no socket (/dev/log absent: most containers) messages would vanish, so the
 * log goes to CACHE_DIR/l3fs.log instead and the start says so in one line. */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_log.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "l3fs_internal.h"

enum sink { SINK_STDERR, SINK_FILE, SINK_SYSLOG };

static int log_level = L3FS_LOG_WARN;
static int log_sink = SINK_STDERR;
static int log_fd = -1; /* SINK_FILE */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

static void vlog(int level, const char *fmt, va_list ap)
{
    if (level > log_level)
        return;
    if (level < 0)
        level = 0;
    if (level > 3)
        level = 3;
    char raw[2048], msg[4 * sizeof raw];
    vsnprintf(raw, sizeof raw, fmt, ap);
    size_t n = strlen(raw);
    while (n && raw[n - 1] == '\n')
        raw[--n] = '\0';
    /* one line, whatever the names in it hold (l3fs_escape) */
    l3fs_escape(raw, 0, msg, sizeof msg);
    if (log_sink == SINK_SYSLOG) {
        syslog(syslog_prio[level], "%s", msg);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    if (log_sink == SINK_FILE) {
        /* one write per line: lines of several mounts sharing a file stay whole */
        char line[sizeof msg + 64];
        int k = snprintf(line, sizeof line,
                         "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ l3fs[%ld] %s: %s\n",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000, (long)getpid(), level_names[level],
                         msg);
        if (k > 0)
            (void)!write(log_fd, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
        return;
    }
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%02d:%02d:%02d.%03ld l3fs %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, level_names[level], msg);
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
}

void l3fs_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

/* libfuse's own messages go through the same sink. */
static void fuse_log_sink(enum fuse_log_level level, const char *fmt, va_list ap)
{
    int l = level <= FUSE_LOG_ERR ? L3FS_LOG_ERROR
            : level == FUSE_LOG_WARNING ? L3FS_LOG_WARN
            : level <= FUSE_LOG_INFO ? L3FS_LOG_INFO
                                     : L3FS_LOG_DEBUG;
    vlog(l, fmt, ap);
}

static int open_log_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0)
        return -errno;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = fd;
    log_sink = SINK_FILE;
    return 0;
}

/* Syslog when its socket exists, else the fallback file (said on stderr,
 * which the caller still has). */
static int use_syslog(const struct l3fs_options *o)
{
    struct stat st;
    const char *sock = getenv("L3FS_SYSLOG_SOCKET"); /* tests: pretend another path */
    if (!sock)
        sock = "/dev/log";
    if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
        openlog("l3fs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
        log_sink = SINK_SYSLOG;
        return 0;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/l3fs.log", o->cache_dir);
    if (mkdir(o->cache_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "l3fs: no syslog (%s missing) and cannot create %s: %s; "
                        "use --log-file FILE or -f\n", sock, o->cache_dir, strerror(errno));
        return -1;
    }
    int r = open_log_file(path);
    if (r < 0) {
        fprintf(stderr, "l3fs: no syslog (%s missing) and cannot open %s: %s; "
                        "use --log-file FILE or -f\n", sock, path, strerror(-r));
        return -1;
    }
    fprintf(stderr, "l3fs: no syslog here (%s missing): the log goes to %s "
                    "(--log-file FILE chooses another, -f keeps it on stderr)\n", sock, path);
    l3fs_log(L3FS_LOG_WARN, "no syslog (%s missing): logging to this file; mounted %s on %s",
             sock, o->source, o->mountpoint);
    return 0;
}

int l3fs_log_setup(const struct l3fs_options *o)
{
    log_level = o->log_level;
    fuse_set_log_func(fuse_log_sink);
    if (o->log_file) {
        int r = open_log_file(o->log_file);
        if (r < 0) {
            fprintf(stderr, "l3fs: cannot open log file %s: %s\n", o->log_file, strerror(-r));
            return -1;
        }
        return 0;
    }
    return o->use_syslog ? use_syslog(o) : 0;
}

int l3fs_log_background(const struct l3fs_options *o)
{
    if (log_sink != SINK_STDERR)
        return 0; /* a log file or syslog already */
    return use_syslog(o);
}
