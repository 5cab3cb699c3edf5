/* cache_asserts.c — helpers that assert (cache_asserts.h). */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <unistd.h>

#include "cache_asserts.h"

uint64_t counter(l3cache *c, size_t offset)
{
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    return *(const uint64_t *)((const char *)&s.instance + offset);
}

void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "open %s", path);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    cr_assert_eq(pwrite(fd, &b, 1, off), 1);
    cr_assert_eq(fdatasync(fd), 0);
    close(fd);
}
