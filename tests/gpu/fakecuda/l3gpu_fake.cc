/* l3gpu_fake.cc — the real gpu/l3gpu.cu, compiled by the host C++ compiler
 * against fakecuda (this folder's cuda_runtime.h) for tests. __CUDA_ARCH__
 * selects the device branches of the shared per-tile and conversion code
 * (l3_tile.h, l3_convert.h, l3gpu_kernels.h), so that the kernels run the
 * code nvcc compiles for the GPU, with the intrinsics of cuda_runtime.h. */
#define __CUDA_ARCH__ 900
#include "l3gpu.cu"
