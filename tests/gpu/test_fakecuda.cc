/* test_fakecuda.cc — the CPU-executed CUDA runtime (tests/gpu/fakecuda)
 * catches what it claims to catch (fakecuda.h): early reuse of a buffer a
 * stream has not read yet, copies of the wrong kind, host memory used as
 * device memory, use after free, races between streams, sticky faults and
 * the last-error semantics, device modes, and CUDA after fork(). */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "cuda_runtime.h"
#include "fakecuda.h"

#define OK(call) cr_assert_eq((call), cudaSuccess, "%s", #call)

__global__ void k_fill(int *p, int n, int v)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((int)i < n)
        p[i] = v;
}

__global__ void k_sum(const int *p, int n, int *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int i = 0; i < n; i++)
            *out += p[i];
}

static unsigned long long races()
{
    fakecuda_stats s;
    fakecuda_get_stats(&s);
    return s.races;
}

Test(fakecuda, streams_run_late_so_early_reuse_shows)
{
    int *h, *d;
    OK(cudaHostAlloc((void **)&h, 64, 0));
    OK(cudaMalloc((void **)&d, 64));
    memset(h, 1, 64);
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, s));
    cr_assert_eq(fakecuda_pending_ops(), 1);
    cr_assert_eq(cudaStreamQuery(s), cudaErrorNotReady);
    memset(h, 2, 64); /* too early: the stream has not read it */
    OK(cudaStreamSynchronize(s));
    int back[16];
    OK(cudaMemcpy(back, d, 64, cudaMemcpyDeviceToHost));
    cr_assert_eq(back[0], 0x02020202, "the copy ran at enqueue time");
    /* an event orders it: the host waits for the copy before reusing */
    OK(cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, s));
    cudaEvent_t e;
    OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    OK(cudaEventRecord(e, s));
    cr_assert_eq(cudaEventQuery(e), cudaErrorNotReady);
    OK(cudaEventSynchronize(e));
    memset(h, 3, 64);
    OK(cudaMemcpy(back, d, 64, cudaMemcpyDeviceToHost));
    cr_assert_eq(back[0], 0x02020202);
    cr_assert_eq(races(), 0);
    OK(cudaFreeHost(h));
}

Test(fakecuda, copy_kinds_and_ranges_are_checked)
{
    char host[64] = {0};
    char *d, *p;
    OK(cudaMalloc((void **)&d, 64));
    OK(cudaHostAlloc((void **)&p, 64, 0));
    cr_assert_eq(cudaMemcpy(d, host, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidValue);
    cr_assert_eq(cudaGetLastError(), cudaSuccess, "cudaGetLastError clears a non-sticky error");
    cr_assert_eq(cudaMemcpy(host, d, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(d, d, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(host, p, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(d + 32, host, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue,
                 "past the end of the allocation");
    cr_assert_eq(cudaMemsetAsync(host, 0, 64, nullptr), cudaErrorInvalidValue,
                 "host memory as device memory");
    OK(cudaMemcpy(d, p, 64, cudaMemcpyDefault));
    OK(cudaMemcpy(host, d, 64, cudaMemcpyDeviceToHost));
    OK(cudaFreeHost(p));
    (void)cudaGetLastError();
}

Test(fakecuda, pointer_attributes)
{
    int stack = 0;
    void *d, *p;
    OK(cudaMalloc(&d, 16));
    OK(cudaHostAlloc(&p, 16, 0));
    cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, &stack)); /* success since CUDA 11 */
    cr_assert_eq(a.type, cudaMemoryTypeUnregistered);
    OK(cudaPointerGetAttributes(&a, (char *)d + 8));
    cr_assert_eq(a.type, cudaMemoryTypeDevice);
    cr_assert_eq(a.device, 0);
    OK(cudaPointerGetAttributes(&a, p));
    cr_assert_eq(a.type, cudaMemoryTypeHost);
    OK(cudaFree(d));
    OK(cudaPointerGetAttributes(&a, d));
    cr_assert_eq(a.type, cudaMemoryTypeUnregistered, "freed memory is no device memory");
    OK(cudaFreeHost(p));
}

/* with AddressSanitizer its SEGV handler reports the fault and aborts */
#if defined(__SANITIZE_ADDRESS__)
#define SEGV_SIGNAL SIGABRT
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEGV_SIGNAL SIGABRT
#endif
#endif
#ifndef SEGV_SIGNAL
#define SEGV_SIGNAL SIGSEGV
#endif

Test(fakecuda, host_code_touching_device_memory_crashes, .signal = SEGV_SIGNAL)
{
    int *d;
    OK(cudaMalloc((void **)&d, 64));
    d[3] = 1;
}

Test(fakecuda, use_after_free)
{
    int *d, *e;
    OK(cudaMalloc((void **)&d, 64));
    OK(cudaFree(d));
    int host[16];
    cr_assert_eq(cudaMemcpy(host, d, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    /* stream-ordered: freed when the stream gets there */
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMallocAsync((void **)&e, 64, s));
    OK(cudaMemsetAsync(e, 5, 64, s));
    OK(cudaFreeAsync(e, s));
    cr_assert_eq(cudaMemsetAsync(e, 0, 64, s), cudaErrorInvalidValue, "use after cudaFreeAsync");
    cr_assert_eq(cudaFreeAsync(e, s), cudaErrorInvalidValue, "double free");
    OK(cudaStreamSynchronize(s));
    (void)cudaGetLastError();
}

Test(fakecuda, kernel_with_host_pointer_is_a_sticky_fault)
{
    int host[8];
    fakecuda_launch("k_fill", k_fill, dim3(1), dim3(8), 0, nullptr, host, 8, 1);
    OK(cudaGetLastError()); /* the launch itself is fine */
    cr_assert_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    cr_assert_eq(cudaGetLastError(), cudaErrorIllegalAddress);
    cr_assert_eq(cudaGetLastError(), cudaErrorIllegalAddress, "sticky: not cleared");
    void *d;
    cr_assert_eq(cudaMalloc(&d, 16), cudaErrorIllegalAddress, "the context is dead");
}

Test(fakecuda, misaligned_kernel_pointer_faults)
{
    char *d;
    OK(cudaMalloc((void **)&d, 64));
    fakecuda_launch("k_fill", k_fill, dim3(1), dim3(8), 0, nullptr, (int *)(d + 2), 8, 1);
    cr_assert_eq(cudaDeviceSynchronize(), cudaErrorMisalignedAddress);
}

Test(fakecuda, kernels_run_every_thread_in_stream_order)
{
    int *d, *sum;
    OK(cudaMalloc((void **)&d, 1000 * sizeof(int)));
    OK(cudaMalloc((void **)&sum, sizeof(int)));
    OK(cudaMemset(sum, 0, sizeof(int)));
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    fakecuda_launch("k_fill", k_fill, dim3(4), dim3(256), 0, s, d, 1000, 3);
    fakecuda_launch("k_sum", k_sum, dim3(1), dim3(1), 0, s, d, 1000, sum);
    OK(cudaGetLastError());
    int h = 0;
    OK(cudaStreamSynchronize(s));
    OK(cudaMemcpy(&h, sum, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h, 3000);
    fakecuda_launch("k_fill", k_fill, dim3(1), dim3(2048), 0, s, d, 1000, 3);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    cr_assert_eq(races(), 0);
}

Test(fakecuda, unordered_streams_race)
{
    int *d;
    OK(cudaMalloc((void **)&d, 256));
    cudaStream_t a, b;
    OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    OK(cudaMemsetAsync(d, 1, 128, a));
    OK(cudaMemsetAsync(d + 32, 2, 128, b)); /* other bytes: no race */
    cr_assert_eq(races(), 0);
    fakecuda_launch("k_fill", k_fill, dim3(1), dim3(64), 0, b, d, 64, 1);
    cr_assert_eq(races(), 1, "kernel on b and memset on a write the same bytes");
    cudaEvent_t e;
    OK(cudaEventCreate(&e));
    OK(cudaEventRecord(e, b));
    OK(cudaStreamWaitEvent(a, e, 0));
    OK(cudaMemsetAsync(d, 3, 256, a)); /* ordered after b's work by the event */
    cr_assert_eq(races(), 1);
    OK(cudaDeviceSynchronize());
    OK(cudaMemsetAsync(d, 4, 256, b)); /* after a host wait */
    cr_assert_eq(races(), 1);
}

Test(fakecuda, legacy_stream_orders_blocking_streams_only)
{
    int *d;
    OK(cudaMalloc((void **)&d, 64));
    OK(cudaMemset(d, 0, 64));
    cudaStream_t blocking, nonblocking;
    OK(cudaStreamCreate(&blocking));
    OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    OK(cudaMemsetAsync(d, 1, 64, blocking));
    int h[16];
    OK(cudaMemcpy(h, d, 64, cudaMemcpyDeviceToHost)); /* legacy: waits for `blocking` */
    cr_assert_eq(h[0], 0x01010101);
    OK(cudaMemsetAsync(d, 2, 64, nonblocking));
    cr_assert_eq(races(), 0);
    OK(cudaMemcpy(h, d, 64, cudaMemcpyDeviceToHost)); /* does not wait: a race */
    cr_assert_eq(h[0], 0x01010101);
    cr_assert_eq(races(), 1);
    OK(cudaStreamDestroy(nonblocking));
    cr_assert_eq(cudaMemsetAsync(d, 0, 64, nonblocking), cudaErrorInvalidResourceHandle,
                 "destroyed stream");
    OK(cudaDeviceSynchronize()); /* its queued work still runs */
    OK(cudaMemcpy(h, d, 64, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 0x02020202);
}

Test(fakecuda, device_modes_and_per_thread_device)
{
    int n = -1;
    fakecuda_set_devices(FAKECUDA_NO_DRIVER);
    cr_assert_eq(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
    cr_assert_eq(n, 0);
    fakecuda_set_devices(0);
    cr_assert_eq(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    fakecuda_set_devices(3);
    OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 3);
    int cur = -1;
    OK(cudaGetDevice(&cur));
    cr_assert_eq(cur, 0);
    cr_assert_not(fakecuda_context_active(0), "cudaGetDevice makes no context");
    OK(cudaSetDevice(2));
    cr_assert(fakecuda_context_active(2), "cudaSetDevice makes the context (CUDA 12)");
    cr_assert_eq(cudaSetDevice(3), cudaErrorInvalidDevice);
    void *d;
    OK(cudaMalloc(&d, 16));
    cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, d));
    cr_assert_eq(a.device, 2);
    cr_assert_not(fakecuda_context_active(0));
    (void)cudaGetLastError();
}

Test(fakecuda, fork_after_init_fails_in_the_child)
{
    OK(cudaFree(nullptr)); /* initialises CUDA, as torch would */
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        void *d = nullptr;
        int ok = cudaGetDeviceCount(&n) == cudaErrorInitializationError &&
                 cudaMalloc(&d, 16) == cudaErrorInitializationError;
        _exit(ok ? 0 : 1);
    }
    int wst = 0;
    cr_assert_eq(waitpid(pid, &wst, 0), pid);
    cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "child did not see the fork error");
    void *d;
    OK(cudaMalloc(&d, 16)); /* the parent is fine */
}

Test(fakecuda, fault_injection_is_one_shot)
{
    void *d;
    fakecuda_fail_call(FAKECUDA_CALL_MALLOC, cudaErrorMemoryAllocation, 1);
    OK(cudaMalloc(&d, 16));
    cr_assert_eq(cudaMalloc(&d, 16), cudaErrorMemoryAllocation);
    OK(cudaMalloc(&d, 16));
    fakecuda_set_memory_limit(1 << 20);
    cr_assert_eq(cudaMalloc(&d, 2 << 20), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();
}
