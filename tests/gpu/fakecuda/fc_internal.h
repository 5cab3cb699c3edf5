/* fc_internal.h — fakecuda's shared state (one process-wide recursive lock
 * protects all of it; see fakecuda.h for the model). */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "fakecuda.h"

namespace fc {

extern pthread_mutex_t mu; /* recursive; every entry point takes it */
struct Lock {
    Lock() { pthread_mutex_lock(&mu); }
    ~Lock() { pthread_mutex_unlock(&mu); }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;
};

/* ---- fc_state.cc: devices, contexts, errors, counters ---- */
extern int ndev;                    /* FAKECUDA_NO_DRIVER, 0, 1..16 */
extern bool bad_fork;               /* forked after CUDA was initialised */
extern bool ctx_active[FAKECUDA_MAX_DEVICES];
extern cudaError_t sticky[FAKECUDA_MAX_DEVICES];
extern fakecuda_stats stats;
extern size_t mem_limit;
extern size_t mem_used[FAKECUDA_MAX_DEVICES];
extern unsigned corrupt_copy; /* FAKECUDA_CORRUPT_COPY: countdown, 0 = off */

int current_device();
void set_current_device(int dev);
/* Sets the thread's last error and returns e (cudaSuccess: no change). */
cudaError_t fail(cudaError_t e);
/* The error every call gets before it does anything (fork, driver,
 * devices), through fail(). */
cudaError_t check_init();
/* check_init, then the device's sticky error, then makes its primary
 * context (CUDA's lazy initialisation). */
cudaError_t need_ctx(int dev);
/* Fault injection: true (and *err) when this call of the kind must fail. */
bool inject(int call, cudaError_t *err);
/* A kernel fault is due now. */
bool inject_fault(cudaError_t *err);
/* Records a message (printed to stderr when `print`). */
void note(bool print, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- fc_memory.cc: the registry of allocations ---- */
struct Alloc {
    uintptr_t base = 0;
    size_t size = 0;
    bool device = false;      /* else page-locked host memory */
    int dev = 0;              /* device (for host memory: current at allocation) */
    bool registered = false;  /* cudaHostRegister'ed caller memory */
    bool live = true;
    bool free_pending = false; /* cudaFreeAsync enqueued */
    void *map = nullptr;      /* device memory: its own mapping */
    size_t maplen = 0;
    unsigned long long id = 0;
};
/* The allocation containing p (live ones; with_dead: also freed ones). */
Alloc *find_alloc(const void *p, bool with_dead);
/* Device memory readable/writable by this process while on (nested). */
void device_access(bool on);
/* Allocates device memory on dev (counts against the limit). */
cudaError_t alloc_device(int dev, size_t size, void **ptr);
/* Poisons and retires an allocation (device or host). */
void retire(Alloc *a);

/* ---- fc_queue.cc: operations, streams, events ---- */
struct Use {
    Alloc *a;
    uintptr_t lo, hi; /* byte range [lo, hi) */
    bool write;
};
/* Runs every pending operation (of device dev, or all when dev < 0). */
void run_pending(int dev);

} // namespace fc

#endif
