/* log.c — leveled logging of the daemon to stderr or syslog. */
#define FUSE_USE_VERSION 312
#include <fuse_log.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "l3fs_internal.h"

static int log_level = L3FS_LOG_WARN;
static int log_syslog;
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
    if (log_syslog) {
        vsyslog(syslog_prio[level], fmt, ap);
        return;
    }
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
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

void l3fs_log_setup(int level, int use_syslog)
{
    log_level = level;
    if (use_syslog && !log_syslog)
        openlog("l3fs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    log_syslog = use_syslog;
    fuse_set_log_func(fuse_log_sink);
}
