/* tempname.c — names of temp files (".tmp-PID-RANDOM-HOST", so that a
 * sweep can tell a dead writer of this host from a live one elsewhere), the
 * host name and random ids. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "l3_xxh.h"

#include "handle.h"

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof(v), 1, f) != 1)
            v = 0;
        fclose(f);
    }
    if (!v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = XXH3_64bits(&ts, sizeof(ts)) ^ ((uint64_t)getpid() << 32);
    }
    return v;
}

static void host_name(char *buf, size_t size)
{
    if (gethostname(buf, size) != 0 || !buf[0])
        snprintf(buf, size, "localhost");
    buf[size - 1] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '/' || *p == '-' || (unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            *p = '_';
}

int l3cache_temp_name(char *buf, size_t bufsize)
{
    char host[64];
    host_name(host, sizeof(host));
    int n = snprintf(buf, bufsize, ".tmp-%ld-%016llx-%s", (long)getpid(),
                     (unsigned long long)random_u64(), host);
    return n > 0 && (size_t)n < bufsize ? 0 : -ENAMETOOLONG;
}

int l3cache_temp_parse(const char *name, long *pid_ret, char *host_ret, size_t hostsize)
{
    if (strncmp(name, ".tmp-", 5) != 0)
        return -EINVAL;
    char *end;
    errno = 0;
    long pid = strtol(name + 5, &end, 10);
    if (errno || end == name + 5 || *end != '-' || pid <= 0)
        return -EINVAL;
    const char *r = end + 1;
    for (int i = 0; i < 16; i++)
        if (!r[i] || !strchr("0123456789abcdef", r[i]))
            return -EINVAL;
    if (r[16] != '-')
        return -EINVAL;
    *pid_ret = pid;
    if (host_ret && hostsize) {
        snprintf(host_ret, hostsize, "%s", r + 17);
    }
    return 0;
}

void l3cache_host_name(char *buf, size_t size)
{
    host_name(buf, size);
}

uint64_t l3cache_random_u64(void)
{
    return random_u64();
}
