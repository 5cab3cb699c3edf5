/* tc_file.c — whole-file reads and writes (tc_file.h). */
#include "tc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

void *tc_slurp_fd(int fd, size_t *len_ret)
{
    size_t cap = 65536, len = 0;
    char *b = malloc(cap + 1);
    if (b == NULL)
        return NULL;
    for (;;) {
        if (len == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (nb == NULL) {
                free(b);
                errno = ENOMEM;
                return NULL;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, b + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(b);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    b[len] = '\0';
    *len_ret = len;
    return b;
}

void *tc_slurp(const char *path, size_t *len_ret)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *b = tc_slurp_fd(fd, len_ret);
    int e = errno;
    close(fd);
    errno = e;
    return b;
}

int tc_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        p += w;
        len -= (size_t)w;
    }
    return close(fd) < 0 ? -errno : 0;
}
