/* mapped.c — the payload checksum of an object whose pages are all in the
 * page cache, computed on a mapping of it: no copy, so checking an object
 * costs about a tenth of reading it (XXH3 runs far faster than memcpy).
 *
 * A mapped file can raise SIGBUS (truncated by someone else, or a page that
 * was evicted meanwhile failing to read back). While this code hashes, a
 * SIGBUS handler (installed once; any handler it replaces is called for
 * every other SIGBUS) jumps back and the caller falls back to reading. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "l3_xxh.h"

#include "handle.h"

static __thread sigjmp_buf *hash_jump;
static struct sigaction previous;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int installed;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
    if (hash_jump)
        siglongjmp(*hash_jump, 1);
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uctx);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL); /* not ours: the default action */
    raise(SIGBUS);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(SIGBUS, &sa, &previous) == 0;
}

/* 1 when all of map[0, size) is resident. */
static int all_resident(void *map, uint64_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (size_t)((size + page - 1) / page);
    unsigned char stackvec[2048], *vec = pages <= sizeof stackvec ? stackvec : NULL;
    if (!vec)
        return 0; /* large objects: read (they are few) */
    if (mincore(map, (size_t)size, vec) != 0)
        return 0;
    for (size_t i = 0; i < pages; i++)
        if (!(vec[i] & 1))
            return 0;
    return 1;
}

int mapped_payload_hash(int fd, uint64_t size, uint64_t off, uint64_t *hash_ret)
{
    pthread_once(&install_once, install);
    if (!installed || size == 0 || size > SIZE_MAX || off > size)
        return -ENOTSUP;
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    int r = -ENOTSUP;
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
    /* page tables filled in one call, not one fault per page */
    if (all_resident(map, size) && madvise(map, (size_t)size, MADV_POPULATE_READ) == 0) {
        sigjmp_buf jb;
        if (sigsetjmp(jb, 1) == 0) {
            hash_jump = &jb;
            *hash_ret = XXH3_64bits((const uint8_t *)map + off, (size_t)(size - off));
            r = 0;
        } else {
            r = -EIO; /* SIGBUS: read it instead */
        }
        hash_jump = NULL;
    }
    munmap(map, (size_t)size);
    return r;
}

int mapped_ranges_match(const struct ranges *r, const uint8_t *map, uint64_t c0, uint64_t c1)
{
    pthread_once(&install_once, install);
    if (!installed)
        return -ENOTSUP;
    int m;
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) == 0) {
        hash_jump = &jb;
        m = ranges_match(r, map, c0, c1);
    } else {
        m = -EIO;
    }
    hash_jump = NULL;
    return m;
}
