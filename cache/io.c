/* io.c — whole reads and writes that survive EINTR and short transfers, and
 * the clocks the cache uses. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "handle.h"

uint64_t l3cache_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int l3cache_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

ssize_t l3cache_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int l3cache_read_whole(int fd, uint64_t size_hint, uint8_t **buf_ret, size_t *size_ret)
{
    size_t cap = size_hint > 0 && size_hint < ((uint64_t)1 << 40) ? (size_t)size_hint + 1 : 65536;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        size_t want = cap - len;
        ssize_t n = l3cache_pread_full(fd, buf + len, want, len);
        if (n < 0) {
            free(buf);
            return (int)n;
        }
        len += (size_t)n;
        if ((size_t)n < want)
            break; /* end of file before the buffer was full */
    }
    *buf_ret = buf;
    *size_ret = len;
    return 0;
}
