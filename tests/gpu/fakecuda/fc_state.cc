/* fc_state.cc — fakecuda: devices, primary contexts, errors (per-thread last
 * error, sticky device errors, fork), fault injection and counters. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fc_internal.h"

namespace fc {

pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
int ndev = 1;
bool bad_fork = false;
bool ctx_active[FAKECUDA_MAX_DEVICES];
cudaError_t sticky[FAKECUDA_MAX_DEVICES];
fakecuda_stats stats;
size_t mem_limit = (size_t)4 << 30;
size_t mem_used[FAKECUDA_MAX_DEVICES];
unsigned corrupt_copy;

namespace {
thread_local int tls_device = 0;
thread_local cudaError_t tls_last = cudaSuccess;
char last_msg[512];
struct Injection {
    bool armed = false;
    unsigned after = 0;
    cudaError_t err = cudaSuccess;
};
Injection inj[FAKECUDA_CALL_KINDS], fault_inj;

void at_fork_prepare() { pthread_mutex_lock(&mu); }
void at_fork_parent() { pthread_mutex_unlock(&mu); }
void at_fork_child()
{
    for (int d = 0; d < FAKECUDA_MAX_DEVICES; d++)
        if (ctx_active[d])
            bad_fork = true;
    /* the child's thread has another id than the parent thread that locked
     * it: unlocking would fail, so start from a fresh mutex */
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mu, &a);
    pthread_mutexattr_destroy(&a);
}

struct Init {
    Init()
    {
        const char *e = getenv("FAKECUDA_DEVICES");
        if (e && *e) {
            int n = atoi(e);
            ndev = n < -1 ? -1 : n > FAKECUDA_MAX_DEVICES ? FAKECUDA_MAX_DEVICES : n;
        }
        e = getenv("FAKECUDA_FAULT_KERNEL"); /* N: the Nth kernel faults */
        if (e && atoi(e) > 0) {
            fault_inj.armed = true;
            fault_inj.after = (unsigned)atoi(e) - 1;
            fault_inj.err = cudaErrorIllegalAddress;
        }
        e = getenv("FAKECUDA_CORRUPT_COPY"); /* N: the Nth device-to-host copy flips a byte */
        if (e && atoi(e) > 0)
            corrupt_copy = (unsigned)atoi(e);
        pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
    }
} init_once;

bool take(Injection &j, cudaError_t *err)
{
    if (!j.armed)
        return false;
    if (j.after) {
        j.after--;
        return false;
    }
    j.armed = false;
    *err = j.err;
    return true;
}
} // namespace

int current_device() { return tls_device; }
void set_current_device(int dev) { tls_device = dev; }

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        tls_last = e;
    return e;
}

cudaError_t check_init()
{
    if (bad_fork)
        return fail(cudaErrorInitializationError);
    if (ndev < 0)
        return fail(cudaErrorInsufficientDriver);
    if (ndev == 0)
        return fail(cudaErrorNoDevice);
    return cudaSuccess;
}

cudaError_t need_ctx(int dev)
{
    cudaError_t e = check_init();
    if (e)
        return e;
    if (dev < 0 || dev >= ndev)
        return fail(cudaErrorInvalidDevice);
    if (sticky[dev])
        return fail(sticky[dev]);
    if (!ctx_active[dev]) {
        ctx_active[dev] = true;
        stats.contexts_created++;
    }
    return cudaSuccess;
}

bool inject(int call, cudaError_t *err) { return take(inj[call], err); }
bool inject_fault(cudaError_t *err) { return take(fault_inj, err); }

void note(bool print, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    if (print || getenv("FAKECUDA_VERBOSE"))
        fprintf(stderr, "fakecuda: %s\n", last_msg);
}

} // namespace fc

using namespace fc;

extern "C" {

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define N(x) case x: return #x;
    N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation)
    N(cudaErrorInitializationError) N(cudaErrorInvalidConfiguration)
    N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection)
    N(cudaErrorInsufficientDriver) N(cudaErrorInvalidDeviceFunction) N(cudaErrorNoDevice)
    N(cudaErrorInvalidDevice) N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady)
    N(cudaErrorIllegalAddress) N(cudaErrorLaunchOutOfResources) N(cudaErrorContextIsDestroyed)
    N(cudaErrorHostMemoryAlreadyRegistered) N(cudaErrorHostMemoryNotRegistered)
    N(cudaErrorMisalignedAddress) N(cudaErrorLaunchFailure) N(cudaErrorNotSupported)
    N(cudaErrorSystemNotReady) N(cudaErrorSystemDriverMismatch)
    N(cudaErrorCompatNotSupportedOnDevice) N(cudaErrorUnknown)
#undef N
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return cudaGetErrorName(e);
    }
}

cudaError_t cudaGetLastError(void)
{
    Lock l;
    int d = tls_device;
    if (d >= 0 && d < FAKECUDA_MAX_DEVICES && sticky[d])
        return sticky[d];
    cudaError_t e = tls_last;
    tls_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    Lock l;
    int d = tls_device;
    if (d >= 0 && d < FAKECUDA_MAX_DEVICES && sticky[d])
        return sticky[d];
    return tls_last;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    Lock l;
    if (!count)
        return fail(cudaErrorInvalidValue);
    *count = 0;
    cudaError_t e = check_init();
    if (e)
        return e;
    *count = ndev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    Lock l;
    if (!device)
        return fail(cudaErrorInvalidValue);
    cudaError_t e = check_init();
    if (e)
        return e;
    *device = tls_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    if (device < 0 || device >= ndev)
        return fail(cudaErrorInvalidDevice);
    tls_device = device;
    return need_ctx(device); /* CUDA 12+: cudaSetDevice initialises the context */
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    if (!prop)
        return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= ndev)
        return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "fakecuda CPU device %d", device);
    prop->totalGlobalMem = mem_limit;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->regsPerBlock = 65536;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    Lock l;
    if (!version)
        return fail(cudaErrorInvalidValue);
    *version = ndev < 0 ? 0 : CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version)
        return fail(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* driver entry points (CUresult 0 = CUDA_SUCCESS; CUdevice = int) */
static int fake_cuDeviceGet(int *dev, int ordinal)
{
    Lock l;
    if (!dev || ordinal < 0 || ordinal >= ndev)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

static int fake_cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
    Lock l;
    if (bad_fork)
        return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    if (dev < 0 || dev >= ndev || !flags || !active)
        return 101;
    *flags = 0;
    *active = ctx_active[dev];
    return 0;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    Lock l;
    (void)cudaVersion;
    (void)flags;
    if (!symbol || !funcPtr)
        return fail(cudaErrorInvalidValue);
    cudaError_t e = check_init();
    if (e)
        return e;
    *funcPtr = nullptr;
    if (!strcmp(symbol, "cuDeviceGet"))
        *funcPtr = (void *)fake_cuDeviceGet;
    else if (!strcmp(symbol, "cuDevicePrimaryCtxGetState"))
        *funcPtr = (void *)fake_cuDevicePrimaryCtxGetState;
    if (status)
        *status = *funcPtr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

/* ---- controls (fakecuda.h) ---- */

void fakecuda_get_stats(struct fakecuda_stats *s)
{
    Lock l;
    *s = stats;
}

void fakecuda_set_devices(int n)
{
    Lock l;
    ndev = n < -1 ? -1 : n > FAKECUDA_MAX_DEVICES ? FAKECUDA_MAX_DEVICES : n;
}

int fakecuda_context_active(int device)
{
    Lock l;
    return device >= 0 && device < FAKECUDA_MAX_DEVICES && ctx_active[device];
}

void fakecuda_set_memory_limit(size_t bytes)
{
    Lock l;
    mem_limit = bytes;
}

void fakecuda_fail_call(int call, int err, unsigned after)
{
    Lock l;
    if (call < 0 || call >= FAKECUDA_CALL_KINDS)
        return;
    inj[call].armed = true;
    inj[call].after = after;
    inj[call].err = (cudaError_t)err;
}

void fakecuda_fault_kernel(int err, unsigned after)
{
    Lock l;
    fault_inj.armed = true;
    fault_inj.after = after;
    fault_inj.err = (cudaError_t)err;
}

const char *fakecuda_last_message(void) { return last_msg; }

} /* extern "C" */
