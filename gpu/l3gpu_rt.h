/* l3gpu_rt.h — how libl3gpu talks to the CUDA runtime: error mapping, the
 * device guard, checks of the pointers a caller hands in. Internal to
 * l3gpu.cu (C++, host code only); not installed. */
#ifndef L3GPU_RT_H
#define L3GPU_RT_H

#include <cuda_runtime.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "l3gpu.h"

namespace l3rt {

inline int map_error(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return L3GPU_OK;
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
        return L3GPU_ERR_NO_DRIVER;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
        return L3GPU_ERR_NO_DEVICE;
    case cudaErrorMemoryAllocation:
        return L3GPU_ERR_NOMEM;
    default:
        return L3GPU_ERR_CUDA;
    }
}

/* Driver entry points for "does this device's primary context exist?"
 * (cuDeviceGet, cuDevicePrimaryCtxGetState; CUresult 0 = success), looked up
 * once through the runtime so that nothing links against libcuda. */
typedef int (*cu_device_get_fn)(int *dev, int ordinal);
typedef int (*cu_primary_state_fn)(int dev, unsigned *flags, int *active);
struct driver_fns {
    cu_device_get_fn device_get = nullptr;
    cu_primary_state_fn primary_state = nullptr;
};

inline driver_fns &driver()
{
    static driver_fns fns;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        void *a = nullptr, *b = nullptr;
        enum cudaDriverEntryPointQueryResult qa = cudaDriverEntryPointSymbolNotFound, qb = qa;
        if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &a, 12000, cudaEnableDefault, &qa) ==
                cudaSuccess &&
            cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &b, 12000,
                                             cudaEnableDefault, &qb) == cudaSuccess &&
            qa == cudaDriverEntryPointSuccess && qb == cudaDriverEntryPointSuccess) {
            fns.device_get = (cu_device_get_fn)a;
            fns.primary_state = (cu_primary_state_fn)b;
        }
        (void)cudaGetLastError(); /* a failed lookup is no error of the caller's */
    });
    return fns;
}

/* 1 when `dev` has its primary context (or when that cannot be known). */
inline int primary_context_active(int dev)
{
    driver_fns &f = driver();
    int cu = 0, active = 0;
    unsigned flags = 0;
    if (!f.device_get || !f.primary_state || f.device_get(&cu, dev) ||
        f.primary_state(cu, &flags, &active))
        return 1;
    return active;
}

/* Makes `dev` current for the scope. On exit the thread goes back to its
 * previous device only if that device's primary context exists: CUDA 12's
 * cudaSetDevice creates one (hundreds of MB), and a thread that never chose a
 * device reads device 0 from cudaGetDevice. */
struct device_guard {
    int prev = -1;
    bool switched = false;
    explicit device_guard(int dev)
    {
        if (cudaGetDevice(&prev) != cudaSuccess)
            prev = -1;
        if (prev != dev)
            switched = cudaSetDevice(dev) == cudaSuccess;
    }
    ~device_guard()
    {
        if (switched && prev >= 0 && primary_context_active(prev))
            cudaSetDevice(prev);
    }
    device_guard(const device_guard &) = delete;
    device_guard &operator=(const device_guard &) = delete;
};

/* What kind of memory p is, as the runtime sees it. */
enum mem_kind { MK_HOST, MK_PINNED, MK_DEVICE, MK_OTHER_DEVICE };

inline mem_kind pointer_kind(const void *p, int device)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* older runtimes: plain host memory is an error */
        return MK_HOST;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice:
        return a.device == device ? MK_DEVICE : MK_OTHER_DEVICE;
    case cudaMemoryTypeManaged:
        return MK_DEVICE;
    case cudaMemoryTypeHost:
        return MK_PINNED;
    default:
        return MK_HOST;
    }
}

/* Checks that the device can use p as `what` (device memory of `device`,
 * aligned to `align`); else writes why into err and returns
 * L3GPU_ERR_INVALID_ARG. */
inline int check_device_pointer(const void *p, size_t align, int device, const char *what,
                                long idx, char *err, size_t errlen)
{
    char name[64];
    if (idx >= 0)
        snprintf(name, sizeof name, "%s[%ld]", what, idx);
    else
        snprintf(name, sizeof name, "%s", what);
    mem_kind k = pointer_kind(p, device);
    if (k != MK_DEVICE) {
        snprintf(err, errlen, "%s (%p) is %s, not device memory of cuda:%d", name, p,
                 k == MK_OTHER_DEVICE ? "memory of another device"
                 : k == MK_PINNED     ? "page-locked host memory"
                                      : "host memory",
                 device);
        return L3GPU_ERR_INVALID_ARG;
    }
    if ((uintptr_t)p % align) {
        snprintf(err, errlen, "%s (%p) is not %zu-byte aligned", name, p, align);
        return L3GPU_ERR_INVALID_ARG;
    }
    return L3GPU_OK;
}

} // namespace l3rt

#endif /* L3GPU_RT_H */
