/* l3_xxh.h — XXH3, as every checksum and key of the project computes it.
 *
 * libxxhash has two sets of entry points for the same hashes: the plain
 * XXH3_* functions, built for the baseline CPU of the distribution (on
 * Debian amd64 they ran at 5.4 GB/s here), and the XXH3_*_dispatch ones of
 * xxh_x86dispatch.h, which pick the AVX2 or AVX-512 code at run time where
 * the CPU has it (42-44 GB/s on the same data). Where the library exports the
 * dispatch set (meson.build checks that it links and then defines
 * L3_XXH_DISPATCH), including this header turns the XXH3 calls of the file
 * into dispatched ones; elsewhere the plain ones are called. The hashes are
 * the same bits either way: objects written by one build verify in the
 * other. Include this header instead of <xxhash.h>. */
#ifndef L3_XXH_H
#define L3_XXH_H

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#endif
#include <xxhash.h>
#if L3_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* #defines XXH3_64bits & co. as their _dispatch versions */
#endif

#endif
