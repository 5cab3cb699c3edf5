/* util.c — file I/O, errors and small helpers of the `l3` tool. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char *what, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever the message holds. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (what)
        fprintf(stderr, "l3: %s: %s\n", what, msg);
    else
        fprintf(stderr, "l3: %s\n", msg);
}

int cli_read_file(const char *path, unsigned char **data_ret, size_t *size_ret)
{
    *data_ret = NULL;
    *size_ret = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return EISDIR;
    }
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 65536;
    unsigned char *buf = malloc(cap);
    size_t len = 0;
    if (buf == NULL) {
        close(fd);
        return ENOMEM;
    }
    for (;;) {
        if (len == cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                close(fd);
                return EFBIG;
            }
            unsigned char *p = realloc(buf, cap * 2);
            if (p == NULL) {
                free(buf);
                close(fd);
                return ENOMEM;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    *data_ret = buf;
    *size_ret = len;
    return 0;
}

int cli_write_all(int fd, const void *data, size_t size)
{
    const unsigned char *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size > (1u << 30) ? (1u << 30) : size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        p += w;
        size -= (size_t)w;
    }
    return 0;
}

/* The temporary file being written, removed if a signal ends the run. */
static char tmp_path[PATH_MAX];
static volatile sig_atomic_t tmp_active;

static void on_signal(int sig)
{
    if (tmp_active)
        unlink(tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

int cli_write_atomic(const char *path, const void *data, size_t size)
{
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(tmp_path, sizeof tmp_path, "%.*s.%s.tmpXXXXXX", dirlen, path,
                 slash ? slash + 1 : path) >= (int)sizeof tmp_path)
        return ENAMETOOLONG;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return EISDIR;
    static int handlers;
    if (!handlers) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);
        handlers = 1;
    }
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return errno;
    tmp_active = 1;
    mode_t mask = umask(0);
    umask(mask);
    int e = 0;
    if (fchmod(fd, 0666 & ~mask) != 0)
        e = errno;
    if (!e)
        e = cli_write_all(fd, data, size);
    if (!e && fsync(fd) != 0)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp_path, path) != 0)
        e = errno;
    if (e)
        unlink(tmp_path);
    tmp_active = 0;
    return e;
}

long cli_parse_count(const char *s, long max)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < 1 || v > max)
        return -1;
    return v;
}

int cli_parse_effort(const char *s, int *effort_ret)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < -1 || v > 2)
        return -1;
    *effort_ret = (int)v;
    return 0;
}

unsigned cli_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 256)
        n = 256;
    return (unsigned)n;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
