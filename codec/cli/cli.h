/* cli.h — shared helpers of the `l3` command-line tool. */
#ifndef L3_CLI_H
#define L3_CLI_H

#include <stddef.h>

#include "l3.h"

/* Prints "l3: WHAT: REASON" as one line on stderr. */
void cli_error(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reads a whole file. Returns 0 or an errno value. "-" is not special. */
int cli_read_file(const char *path, unsigned char **data_ret, size_t *size_ret);

/* Writes `size` bytes to `path` through a temporary file in the same
 * directory and rename(), so that `path` is either untouched or complete.
 * Returns 0 or an errno value. */
int cli_write_atomic(const char *path, const void *data, size_t size);

/* Writes everything to an fd. Returns 0 or an errno value. */
int cli_write_all(int fd, const void *data, size_t size);

/* Parses a positive integer option value; returns -1 when invalid. */
long cli_parse_count(const char *s, long max);
/* Encoder effort -1..2; 0 on success, -1 on a bad value. */
int cli_parse_effort(const char *s, int *effort_ret);

/* Default thread count: online CPUs (at least 1, at most 256). */
unsigned cli_default_threads(void);

/* Monotonic clock in seconds. */
double cli_now(void);

/* `l3 bench ...`: argv[0] is "bench". */
int cli_bench(int argc, char **argv);

#endif
