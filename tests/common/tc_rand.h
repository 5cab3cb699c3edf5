/* tc_rand.h — the deterministic PRNG of the tests, fuzz seeds and
 * benchmarks (splitmix64): the same seed gives the same images everywhere. */
#ifndef L3_TC_RAND_H
#define L3_TC_RAND_H

#include <stdint.h>

/* Next 64 random bits; advances *state. */
static inline uint64_t tc_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
