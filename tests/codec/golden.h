/* golden.h — the pinned-format files in tests/golden/: the digest their
 * decoded pixels are pinned by, shared by the test (test_golden.c) and the
 * program that made them (tests/golden/make_golden.c). */
#ifndef L3_TEST_GOLDEN_H
#define L3_TEST_GOLDEN_H

#include <stddef.h>

/* SHA-256 (nettle), as 64 lowercase hex digits and a NUL into hex, of
 * decoded samples in the canonical layout: rows tight, one byte per sample
 * up to 8 bits (sub-byte samples unpacked, unscaled; palette images as
 * indices), two bytes little-endian per 16-bit sample. `samples` holds them
 * as l3_decode and ref_decode write them (16-bit in host order). */
void golden_digest(const void *samples, size_t size, unsigned depth, char hex[65]);

#endif
