/* fakecuda.h — a CUDA runtime executed on the CPU, for tests: controls and
 * counters. (The runtime API itself is in cuda_runtime_api.h.)
 *
 * What it models, so that host-code bugs show up as failures:
 *   - device memory is host memory in its own mappings, registered by range
 *     and kept PROT_NONE while no device work runs: host code that touches
 *     device memory crashes; a copy whose kind does not match the memory
 *     (or a host pointer passed as device memory) fails with
 *     cudaErrorInvalidValue; freed memory is poisoned and never reused.
 *   - streams are FIFO queues of operations that run as late as CUDA allows:
 *     only when the host waits (stream/event/device synchronise, blocking
 *     copies, cudaFree, cudaFreeHost). Host code that reuses a buffer before
 *     the stream has read it sees wrong bytes. The legacy default stream
 *     orders with blocking streams as in CUDA.
 *   - every enqueued operation names the device allocations it uses; two
 *     operations on different streams that use overlapping bytes (one of
 *     them writing) without an order between them (stream order, event
 *     waits, host waits) are a race: counted and printed.
 *   - errors: per-thread last error (cudaGetLastError reads and clears it);
 *     kernel faults are sticky for the device; after fork() in a process
 *     that had initialised CUDA every call fails with
 *     cudaErrorInitializationError.
 *   - devices: FAKECUDA_DEVICES (environment; default 1) or
 *     fakecuda_set_devices(): -1 = no driver, 0 = no device, 1..16 devices;
 *     per-thread current device; primary contexts made by cudaSetDevice and
 *     by the first call that needs one, as in CUDA 12.
 *   - environment, for programs under test: FAKECUDA_FAULT_KERNEL=N (the Nth
 *     kernel faults with cudaErrorIllegalAddress), FAKECUDA_CORRUPT_COPY=N
 *     (the Nth blocking device-to-host cudaMemcpy flips one bit),
 *     FAKECUDA_VERBOSE=1 (print every rejected call).
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUDA_NO_DRIVER (-1)
#define FAKECUDA_MAX_DEVICES 16

struct fakecuda_stats {
    unsigned long long device_syncs;      /* cudaDeviceSynchronize, cudaFree(p), cudaFreeHost */
    unsigned long long host_waits;        /* stream/event synchronise, blocking copies */
    unsigned long long mallocs, frees;    /* cudaMalloc, cudaFree(p != NULL) */
    unsigned long long async_allocs, async_frees; /* cudaMallocAsync/FromPoolAsync, cudaFreeAsync */
    unsigned long long host_allocs, host_frees;   /* cudaHostAlloc/MallocHost, cudaFreeHost */
    unsigned long long launches;          /* kernels enqueued */
    unsigned long long ops_enqueued, ops_executed;
    unsigned long long races;             /* unordered conflicting uses (see above) */
    unsigned long long faults;            /* kernels that faulted (sticky errors) */
    unsigned long long contexts_created;
};

/* Counters since the process started. */
void fakecuda_get_stats(struct fakecuda_stats *s);
/* Operations enqueued and not yet run. */
size_t fakecuda_pending_ops(void);
/* FAKECUDA_NO_DRIVER, 0 or 1..FAKECUDA_MAX_DEVICES; call before the first
 * CUDA call of the process. */
void fakecuda_set_devices(int n);
/* 1 when the primary context of `device` exists. */
int fakecuda_context_active(int device);
/* Device memory per device (default 4 GiB): allocations beyond it fail
 * with cudaErrorMemoryAllocation. */
void fakecuda_set_memory_limit(size_t bytes);

/* Fault injection: after `after` more successful calls of the kind, the
 * next one fails with `err` and does nothing (one shot). */
enum fakecuda_call {
    FAKECUDA_CALL_LAUNCH = 0,   /* kernel launch (error at launch, not sticky) */
    FAKECUDA_CALL_MALLOC,       /* cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync */
    FAKECUDA_CALL_HOST_ALLOC,   /* cudaHostAlloc, cudaMallocHost */
    FAKECUDA_CALL_MEMCPY_ASYNC, /* cudaMemcpyAsync */
    FAKECUDA_CALL_EVENT_RECORD, /* cudaEventRecord */
    FAKECUDA_CALL_KINDS
};
void fakecuda_fail_call(int call, int err, unsigned after);
/* The kernel that runs after `after` more kernels faults with `err`
 * (sticky for its device, as a real fault). */
void fakecuda_fault_kernel(int err, unsigned after);

/* The stream argument of the last kernel launch (as given). */
void *fakecuda_last_launch_stream(void);
/* Text of the last race, fault or rejected call (static buffer). */
const char *fakecuda_last_message(void);

#ifdef __cplusplus
}
#endif
#endif /* FAKECUDA_H */
