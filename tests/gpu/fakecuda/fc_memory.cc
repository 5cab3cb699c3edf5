/* fc_memory.cc — fakecuda: device and page-locked allocations, the registry
 * of their ranges, pointer attributes. Device memory lives in mappings of
 * its own that are PROT_NONE unless device work runs (device_access), plus
 * one inaccessible guard page after each; freed device memory stays
 * inaccessible (address space is recycled only after 256 MiB of frees). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <map>

#include "fc_internal.h"

namespace fc {

namespace {
std::map<uintptr_t, Alloc *> live;        /* by base address */
std::map<uintptr_t, Alloc *> dead;        /* retired device allocations */
std::deque<Alloc *> dead_order;
size_t dead_bytes = 0;
const size_t DEAD_KEEP = (size_t)256 << 20;
int access_depth = 0;
unsigned long long next_id = 1;

/* At exit: the registry's own records (caller memory that was never freed
 * stays allocated, so that a leak of page-locked memory is reported). */
struct Cleanup {
    ~Cleanup()
    {
        for (auto &kv : live)
            delete kv.second;
        for (auto &kv : dead)
            delete kv.second;
        live.clear();
        dead.clear();
        dead_order.clear();
    }
} cleanup;

size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }

Alloc *lookup(std::map<uintptr_t, Alloc *> &m, const void *p)
{
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin())
        return nullptr;
    --it;
    Alloc *x = it->second;
    return a >= x->base && a < x->base + (x->size ? x->size : 1) ? x : nullptr;
}

void protect(Alloc *a, bool on)
{
    size_t len = (a->size + page() - 1) / page() * page();
    mprotect(a->map, len, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

cudaError_t new_host(void **ptr, size_t size)
{
    if (!ptr)
        return fail(cudaErrorInvalidValue);
    *ptr = nullptr;
    int dev = current_device();
    cudaError_t e = need_ctx(dev);
    if (e)
        return e;
    if (inject(FAKECUDA_CALL_HOST_ALLOC, &e))
        return fail(e);
    void *p = malloc(size ? size : 1);
    if (!p)
        return fail(cudaErrorMemoryAllocation);
    memset(p, 0xB7, size); /* not zero: unwritten bytes stay visible */
    Alloc *a = new Alloc;
    a->base = (uintptr_t)p;
    a->size = size ? size : 1;
    a->device = false;
    a->dev = dev;
    a->id = next_id++;
    live[a->base] = a;
    stats.host_allocs++;
    *ptr = p;
    return cudaSuccess;
}
} // namespace

Alloc *find_alloc(const void *p, bool with_dead)
{
    Alloc *a = lookup(live, p);
    if (!a && with_dead)
        a = lookup(dead, p);
    return a;
}

void device_access(bool on)
{
    if (on ? access_depth++ != 0 : --access_depth != 0)
        return;
    for (auto &kv : live)
        if (kv.second->device)
            protect(kv.second, on);
}

cudaError_t alloc_device(int dev, size_t size, void **ptr)
{
    *ptr = nullptr;
    cudaError_t e;
    if (inject(FAKECUDA_CALL_MALLOC, &e))
        return fail(e);
    if (size > mem_limit || mem_used[dev] > mem_limit - size)
        return fail(cudaErrorMemoryAllocation);
    size_t len = (size + page() - 1) / page() * page() + page(); /* + guard page */
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        return fail(cudaErrorMemoryAllocation);
    memset(m, 0xBE, size); /* not zero: unwritten bytes stay visible */
    Alloc *a = new Alloc;
    a->base = (uintptr_t)m;
    a->size = size;
    a->device = true;
    a->dev = dev;
    a->map = m;
    a->maplen = len;
    a->id = next_id++;
    live[a->base] = a;
    mem_used[dev] += size;
    mprotect((char *)m + len - page(), page(), PROT_NONE);
    if (access_depth == 0)
        protect(a, false);
    *ptr = m;
    return cudaSuccess;
}

void retire(Alloc *a)
{
    live.erase(a->base);
    a->live = false;
    if (!a->device) {
        if (!a->registered) {
            memset((void *)a->base, 0xFD, a->size); /* poison, then really free */
            free((void *)a->base);
        }
        delete a;
        return;
    }
    protect(a, true);
    memset(a->map, 0xDD, a->size);
    protect(a, false);
    mem_used[a->dev] -= a->size;
    dead[a->base] = a;
    dead_order.push_back(a);
    dead_bytes += a->maplen;
    while (dead_bytes > DEAD_KEEP && !dead_order.empty()) {
        Alloc *o = dead_order.front();
        dead_order.pop_front();
        dead.erase(o->base);
        dead_bytes -= o->maplen;
        munmap(o->map, o->maplen);
        delete o;
    }
}

} // namespace fc

using namespace fc;

extern "C" {

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    Lock l;
    if (!ptr)
        return fail(cudaErrorInvalidValue);
    *ptr = nullptr;
    int dev = current_device();
    cudaError_t e = need_ctx(dev);
    if (e)
        return e;
    if (size == 0)
        return cudaSuccess;
    e = alloc_device(dev, size, ptr);
    if (!e)
        stats.mallocs++;
    return e;
}

cudaError_t cudaFree(void *ptr)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e || !ptr)
        return e; /* cudaFree(NULL): initialises the context only */
    Alloc *a = find_alloc(ptr, false);
    if (!a || !a->device || a->base != (uintptr_t)ptr || a->free_pending) {
        note(false, "cudaFree(%p): not the start of live device memory", ptr);
        return fail(cudaErrorInvalidValue);
    }
    stats.device_syncs++; /* cudaFree synchronises the device */
    run_pending(a->dev);
    stats.frees++;
    retire(a);
    return sticky[current_device()] ? fail(sticky[current_device()]) : cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    Lock l;
    if (flags & ~0x7u)
        return fail(cudaErrorInvalidValue);
    return new_host(ptr, size);
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    Lock l;
    return new_host(ptr, size);
}

cudaError_t cudaFreeHost(void *ptr)
{
    Lock l;
    cudaError_t e = check_init();
    if (e || !ptr)
        return e;
    Alloc *a = find_alloc(ptr, false);
    if (!a || a->device || a->registered || a->base != (uintptr_t)ptr) {
        note(false, "cudaFreeHost(%p): not page-locked memory from cudaHostAlloc", ptr);
        return fail(cudaErrorInvalidValue);
    }
    stats.device_syncs++; /* cudaFreeHost synchronises the device */
    run_pending(-1);
    stats.host_frees++;
    retire(a);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    Lock l;
    (void)flags;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    if (!ptr || !size)
        return fail(cudaErrorInvalidValue);
    if (find_alloc(ptr, false))
        return fail(cudaErrorHostMemoryAlreadyRegistered);
    Alloc *a = new Alloc;
    a->base = (uintptr_t)ptr;
    a->size = size;
    a->registered = true;
    a->dev = current_device();
    live[a->base] = a;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
    Lock l;
    Alloc *a = find_alloc(ptr, false);
    if (!a || !a->registered || a->base != (uintptr_t)ptr)
        return fail(cudaErrorHostMemoryNotRegistered);
    stats.device_syncs++;
    run_pending(-1);
    retire(a);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    Lock l;
    if (!attr)
        return fail(cudaErrorInvalidValue);
    cudaError_t e = check_init();
    if (e)
        return e;
    memset(attr, 0, sizeof *attr);
    Alloc *a = find_alloc(ptr, false);
    if (!a) { /* plain host memory (or freed): not an error since CUDA 11 */
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = -2;
        return cudaSuccess;
    }
    attr->type = a->device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attr->device = a->dev;
    attr->devicePointer = (void *)ptr;
    attr->hostPointer = a->device ? nullptr : (void *)ptr;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    Lock l;
    int dev = current_device();
    cudaError_t e = need_ctx(dev);
    if (e)
        return e;
    if (free_bytes)
        *free_bytes = mem_limit - mem_used[dev];
    if (total_bytes)
        *total_bytes = mem_limit;
    return cudaSuccess;
}

} /* extern "C" */
