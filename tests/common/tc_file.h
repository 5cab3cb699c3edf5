/* tc_file.h — whole-file reads and writes for the tests, fuzz seeds and
 * benchmarks. No test framework inside: callers assert on the results. */
#ifndef L3_TC_FILE_H
#define L3_TC_FILE_H

#include <stddef.h>

/* Everything fd still has to read (until end of file), in a new buffer with
 * one NUL byte behind the *len_ret bytes (so text can be used as a string).
 * Returns NULL with errno set on a read or allocation failure; the caller
 * frees the buffer. Retries reads interrupted by a signal. */
void *tc_slurp_fd(int fd, size_t *len_ret);

/* The whole file at path (tc_slurp_fd of it). NULL with errno set. */
void *tc_slurp(const char *path, size_t *len_ret);

/* Creates or truncates path (mode 0644) and writes len bytes of data.
 * Returns 0 or -errno. */
int tc_write_file(const char *path, const void *data, size_t len);

#endif
