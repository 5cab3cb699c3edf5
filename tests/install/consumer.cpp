// consumer.cpp — an outside C++17 program using the installed libl3, built
// with `pkg-config --cflags --libs l3` (tests/install/test_install.sh).
// Usage: consumer FILE.l3 FILE.png
// Decodes FILE.l3 and compares it, sample for sample, with libl3's decode of
// the PNG it was made from; prints the size and the library version.
#include <l3.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

static std::vector<unsigned char> slurp(const char *path)
{
    std::ifstream f(path, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: consumer FILE.l3 FILE.png\n");
        return 2;
    }
    std::vector<unsigned char> l3 = slurp(argv[1]), png = slurp(argv[2]);
    l3_info info{};
    int st = l3_read_info(l3.data(), l3.size(), &info, nullptr);
    if (st != L3_OK) {
        std::fprintf(stderr, "consumer: %s: %s\n", argv[1], l3_strerror(st));
        return 1;
    }
    std::vector<unsigned char> px(l3_decoded_size(&info, 0));
    st = l3_decode(l3.data(), l3.size(), px.data(), px.size(), 0, nullptr);
    if (st != L3_OK) {
        std::fprintf(stderr, "consumer: decode: %s\n", l3_strerror(st));
        return 1;
    }
    l3_info pinfo{};
    void *ref = nullptr;
    size_t ref_size = 0;
    st = l3_png_decode(png.data(), png.size(), nullptr, &pinfo, &ref, &ref_size);
    if (st != L3_OK) {
        std::fprintf(stderr, "consumer: png: %s\n", l3_strerror(st));
        return 1;
    }
    std::unique_ptr<void, void (*)(void *)> hold(ref, l3_free);
    if (ref_size != px.size() || std::memcmp(ref, px.data(), px.size()) != 0) {
        std::fprintf(stderr, "consumer: decoded pixels differ from the PNG's\n");
        return 1;
    }
    std::printf("libl3 %s: %ux%u, %u channel(s), %u-bit, %zu bytes identical to the PNG\n",
                L3_VERSION_STRING, info.width, info.height, info.channels, info.bit_depth,
                px.size());
    return 0;
}
