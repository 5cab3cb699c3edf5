/* cuda_runtime.h — fakecuda for C++ translation units: the runtime API
 * (cuda_runtime_api.h) plus what a .cu file needs to compile with g++ and
 * run on the CPU: the function qualifiers, dim3/uint3 and the thread index
 * built-ins, the device intrinsics the project's kernels use (as host
 * functions with the same rounding), and fakecuda_launch(), which the
 * launch macro of gpu/l3gpu.cu calls where nvcc would use <<<>>>.
 *
 * A launch is enqueued on its stream and runs later, serially (every block,
 * every thread in order), when the stream is synchronised: kernels must not
 * use shared memory or __syncthreads() (the project's do not). Pointer
 * arguments are checked when the kernel runs: each must be device memory of
 * the stream's device or page-locked host memory, aligned for its type;
 * otherwise the device gets a sticky cudaErrorIllegalAddress /
 * cudaErrorMisalignedAddress, as a real fault would.
 */
#ifndef FAKECUDA_RUNTIME_H
#define FAKECUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

/* set by the executor for the thread running a kernel body */
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

/* ---- device intrinsics as host functions ---- */
static inline int atomicCAS(int *address, int compare, int val)
{
    int old = *address;
    if (old == compare)
        *address = val;
    return old;
}
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
/* IEEE single operations rounded to nearest: plain float arithmetic on
 * x86-64 (SSE) compiled with -ffp-contract=off (no fused multiply-add). */
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __uint2float_rn(unsigned v) { return (float)v; }

/* ---- launches ---- */
struct fakecuda_use {
    const void *ptr;
    size_t align; /* alignment the pointee type needs */
    int write;    /* 0: pointer to const */
};

cudaError_t fakecuda_enqueue_kernel(const char *name, dim3 grid, dim3 block, size_t shmem,
                                    cudaStream_t stream, const fakecuda_use *uses, size_t nuses,
                                    std::function<void()> body);

template <typename T> static inline void fakecuda_collect(const T &v, fakecuda_use *u, size_t &n)
{
    if constexpr (std::is_pointer<T>::value) {
        using P = typename std::remove_pointer<T>::type;
        size_t al = 1;
        if constexpr (!std::is_void<P>::value)
            al = alignof(P);
        u[n++] = fakecuda_use{(const void *)v, al, !std::is_const<P>::value};
    } else {
        (void)v;
        (void)u;
    }
}

/* kernel<<<grid, block, shmem, stream>>>(args...) */
template <typename... P, typename... A>
static inline void fakecuda_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
                                   size_t shmem, cudaStream_t stream, A &&...args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    std::tuple<typename std::decay<P>::type...> t(static_cast<P>(std::forward<A>(args))...);
    fakecuda_use uses[sizeof...(P) + 1];
    size_t n = 0;
    std::apply([&](const auto &...v) { (fakecuda_collect(v, uses, n), ...); }, t);
    (void)fakecuda_enqueue_kernel(name, grid, block, shmem, stream, uses, n,
                                  [kernel, t]() { std::apply(kernel, t); });
}
#endif /* __cplusplus */

#endif /* FAKECUDA_RUNTIME_H */
