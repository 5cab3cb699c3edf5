/*
 * tc_timeout.h - per-case time limits for Criterion tests.
 *
 * Test(suite, name, .timeout = TC_TIMEOUT(300)): a limit of 300 s in plain
 * builds, none in sanitizer builds. A Criterion case with a time limit makes
 * its runner start a watchdog thread (BoxFort's timeout killer) that frees
 * its requests while the runner forks the next case; under GCC 12's
 * AddressSanitizer, which takes no allocator locks around fork(), a child
 * forked during such a free waits on the allocator's lock forever (seen in
 * the codec and gpu suites of this project's sanitizer runs, 0% CPU, the
 * child's stack in __sanitizer::Mutex::Lock). There meson's per-test timeout
 * stands in, and scripts/test.sh reruns a test that timed out once
 * (scripts/test-rerun.py).
 */
#ifndef TC_TIMEOUT_H
#define TC_TIMEOUT_H

#if defined(__SANITIZE_ADDRESS__)
#define TC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_SANITIZED 1
#endif
#endif

#ifdef TC_SANITIZED
#define TC_TIMEOUT(seconds) 0
#else
#define TC_TIMEOUT(seconds) (seconds)
#endif

#endif
