// consumer_gpu.cpp — an outside C++17 program using the installed libl3gpu,
// built with `pkg-config --cflags --libs l3gpu` (tests/install/test_install.sh).
// Usage: consumer_gpu FILE.l3...
// Batch-decodes the files on the CPU (uint8 NHWC, native channels) and checks
// every image against l3_decode; with a usable GPU the same batch on the GPU
// must give the same bytes; without one the status says why.
#include <l3gpu.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

static std::vector<unsigned char> slurp(const char *path)
{
    std::ifstream f(path, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: consumer_gpu FILE.l3...\n");
        return 2;
    }
    size_t n = (size_t)argc - 1;
    std::vector<std::vector<unsigned char>> files;
    std::vector<l3gpu_input> in(n);
    std::vector<std::vector<unsigned char>> outs(n);
    std::vector<void *> ptrs(n);
    l3gpu_format fmt;
    l3gpu_format_init(&fmt);
    for (size_t i = 0; i < n; i++)
        files.push_back(slurp(argv[i + 1]));
    for (size_t i = 0; i < n; i++) {
        in[i] = {files[i].data(), files[i].size()};
        l3_info info{};
        uint32_t shape[3];
        size_t bytes = 0;
        if (l3_read_info(in[i].data, in[i].size, &info, nullptr) != L3_OK ||
            l3gpu_output_shape(&info, &fmt, shape, &bytes) != L3GPU_OK) {
            std::fprintf(stderr, "consumer_gpu: %s: unreadable header\n", argv[i + 1]);
            return 1;
        }
        outs[i].resize(bytes);
        ptrs[i] = outs[i].data();
    }
    std::vector<int> status(n, -1);
    int st = l3gpu_cpu_decode_batch(in.data(), n, &fmt, nullptr, 0, ptrs.data(), status.data(), 2);
    if (st != L3GPU_OK) {
        std::fprintf(stderr, "consumer_gpu: CPU batch: %s\n", l3gpu_strerror(st));
        return 1;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) { // reference: l3_decode, then the format conversion
        l3_info info{};
        void *px = nullptr;
        size_t px_size = 0;
        std::vector<unsigned char> ref(outs[i].size());
        st = l3_decode_alloc(in[i].data, in[i].size, nullptr, &px, &px_size, &info);
        int cst = st == L3_OK ? l3gpu_cpu_convert(&info, px, 0, &fmt, ref.data()) : st;
        l3_free(px);
        if (status[i] != 0 || cst != L3GPU_OK || ref != outs[i]) {
            std::fprintf(stderr, "consumer_gpu: %s: CPU batch (status %d) differs from "
                         "l3_decode + l3gpu_cpu_convert\n", argv[i + 1], status[i]);
            return 1;
        }
        total += ref.size();
    }
    std::printf("libl3gpu %s: CPU batch of %zu images, %zu bytes identical to l3_decode + "
                "l3gpu_cpu_convert\n", L3_VERSION_STRING, n, total);

    int count = 0;
    st = l3gpu_device_count(&count);
    if (st != L3GPU_OK || count == 0) {
        l3gpu_ctx *ctx = nullptr;
        int cst = l3gpu_ctx_create(0, &ctx);
        if (cst == L3GPU_OK || ctx != nullptr) {
            std::fprintf(stderr, "consumer_gpu: a context without a device\n");
            return 1;
        }
        std::printf("no GPU: device count says \"%s\", context \"%s\"\n", l3gpu_strerror(st),
                    l3gpu_strerror(cst));
        return 0;
    }
    l3gpu_ctx *ctx = nullptr;
    if ((st = l3gpu_ctx_create(0, &ctx)) != L3GPU_OK) {
        std::fprintf(stderr, "consumer_gpu: context: %s\n", l3gpu_strerror(st));
        return 1;
    }
    std::vector<void *> dptrs(n);
    for (size_t i = 0; i < n; i++)
        if (l3gpu_malloc(ctx, outs[i].size(), &dptrs[i]) != L3GPU_OK) {
            std::fprintf(stderr, "consumer_gpu: device allocation failed\n");
            return 1;
        }
    st = l3gpu_decode_batch(ctx, in.data(), n, L3GPU_MEM_HOST, &fmt, nullptr, 0, dptrs.data(),
                            nullptr, 0, status.data(), nullptr);
    if (st == L3GPU_OK)
        st = l3gpu_batch_finish(ctx, status.data(), n);
    if (st != L3GPU_OK) {
        std::fprintf(stderr, "consumer_gpu: GPU batch: %s (%s)\n", l3gpu_strerror(st),
                     l3gpu_ctx_error(ctx));
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        std::vector<unsigned char> got(outs[i].size());
        l3gpu_memcpy_to_host(ctx, got.data(), dptrs[i], got.size());
        l3gpu_free(ctx, dptrs[i]);
        if (got != outs[i]) {
            std::fprintf(stderr, "consumer_gpu: %s: GPU differs from CPU\n", argv[i + 1]);
            return 1;
        }
    }
    l3gpu_ctx_destroy(ctx);
    std::printf("GPU batch identical to the CPU batch\n");
    return 0;
}
