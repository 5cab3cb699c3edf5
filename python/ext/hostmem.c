/* hostmem.c — the memory behind CPU batches, and the blocks kept for reuse.
 *
 * A fresh block costs a page fault and the kernel's zeroing on each of its
 * pages at first touch (more in a VM that hands freed memory back to its
 * host: measured 70 ms for a fresh 70 MB block against a 23 ms decode). A
 * training loop asks for the same few sizes again and again, so freed blocks
 * of 1 MiB or more are kept, up to L3PY_POOL_BLOCKS of them and a byte limit
 * (l3.batch_memory(limit=...)), the least recently freed given back first. A
 * request takes the smallest kept block that holds it and is no more than
 * twice its size.
 *
 * Thread safety: none of its own; every caller holds the GIL. */
#include "l3py.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define POOL_MIN ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

struct block {
    void *mem;
    size_t size;
    uint64_t freed; /* when it was put back: pool.clock then */
};

/* all fields: the GIL */
static struct {
    struct block b[L3PY_POOL_BLOCKS];
    int n;
    size_t held;   /* sum of b[].size */
    size_t limit;  /* most bytes held */
    uint64_t clock;
    uint64_t hits, misses;
    pid_t pid; /* the process the blocks belong to */
} pool = {.limit = L3PY_POOL_DEFAULT_LIMIT};

/* takes kept block i out of the pool and returns its memory */
static void *take(int i)
{
    void *mem = pool.b[i].mem;
    pool.held -= pool.b[i].size;
    pool.b[i] = pool.b[--pool.n];
    return mem;
}

/* gives back the least recently freed blocks until at most `limit` bytes
 * and `blocks` blocks are held */
static void trim(size_t limit, int blocks)
{
    while (pool.n > 0 && (pool.held > limit || pool.n > blocks)) {
        int old = 0;
        for (int i = 1; i < pool.n; i++)
            if (pool.b[i].freed < pool.b[old].freed)
                old = i;
        free(take(old));
    }
}

/* In a forked child the kept blocks are the parent's pages, shared
 * copy-on-write: every first write to one would fault and copy a page, dearer
 * than a fresh one. The child frees its copies and starts its own pool. */
static void check_fork(void)
{
    pid_t pid = getpid();
    if (pool.pid == pid)
        return;
    trim(0, 0);
    pool.pid = pid;
}

void *l3py_hostmem_get(size_t nbytes, size_t *size_ret)
{
    check_fork();
    int best = -1;
    for (int i = 0; i < pool.n; i++) {
        size_t s = pool.b[i].size;
        if (s >= nbytes && s / 2 <= nbytes && (best < 0 || s < pool.b[best].size))
            best = i;
    }
    if (best >= 0) {
        *size_ret = pool.b[best].size;
        pool.hits++;
        return take(best);
    }
    if (nbytes >= POOL_MIN)
        pool.misses++;
    /* a large block is 2 MiB aligned and asks for transparent huge pages: a
     * few hundred page faults on first touch instead of one per 4 KiB */
    size_t align = nbytes >= 2 * HUGE_PAGE ? HUGE_PAGE : 256;
    void *mem = NULL;
    if (posix_memalign(&mem, align, nbytes ? nbytes : 1))
        return NULL;
    if (align == HUGE_PAGE)
        (void)madvise(mem, nbytes, MADV_HUGEPAGE); /* advice only */
    *size_ret = nbytes;
    return mem;
}

void l3py_hostmem_put(void *mem, size_t size)
{
    if (!mem)
        return;
    check_fork();
    if (size < POOL_MIN || size > pool.limit) {
        free(mem);
        return;
    }
    /* make room first, so the block just freed is the one kept */
    trim(pool.limit - size, L3PY_POOL_BLOCKS - 1);
    pool.b[pool.n++] = (struct block){mem, size, ++pool.clock};
    pool.held += size;
}

PyObject *l3py_batch_memory(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"limit", NULL};
    PyObject *limit = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:batch_memory", names, &limit))
        return NULL;
    check_fork();
    if (limit != Py_None) {
        Py_ssize_t v = PyNumber_AsSsize_t(limit, PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0) {
            PyErr_SetString(PyExc_ValueError, "l3.batch_memory: limit must be >= 0 bytes");
            return NULL;
        }
        pool.limit = (size_t)v;
        trim(pool.limit, L3PY_POOL_BLOCKS);
    }
    return Py_BuildValue("{s:n,s:i,s:n,s:i,s:K,s:K}", "held", (Py_ssize_t)pool.held,
                         "blocks", pool.n, "limit", (Py_ssize_t)pool.limit, "max_blocks",
                         L3PY_POOL_BLOCKS, "hits", (unsigned long long)pool.hits, "misses",
                         (unsigned long long)pool.misses);
}
