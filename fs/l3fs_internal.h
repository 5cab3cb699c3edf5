/* l3fs_internal.h — pieces shared by the daemon's source files. */
#ifndef L3FS_INTERNAL_H
#define L3FS_INTERNAL_H

#include <stdarg.h>

#include "l3fs.h"

/* Logging (fs/log.c): to stderr, to --log-file, or to syslog after --syslog
 * or when running in the background (CACHE_DIR/l3fs.log where /dev/log is
 * missing, said on stderr). Only the daemon logs; the libraries never do.
 * Both return 0, or -1 after one line on stderr (the log cannot be opened). */
int l3fs_log_setup(const struct l3fs_options *opts);
/* Going to the background: stderr is about to go; syslog (or the fallback)
 * unless a log file is open already. Call while stderr is still the terminal. */
int l3fs_log_background(const struct l3fs_options *opts);
void l3fs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG_E(...) l3fs_log(L3FS_LOG_ERROR, __VA_ARGS__)
#define LOG_W(...) l3fs_log(L3FS_LOG_WARN, __VA_ARGS__)
#define LOG_I(...) l3fs_log(L3FS_LOG_INFO, __VA_ARGS__)
#define LOG_D(...) l3fs_log(L3FS_LOG_DEBUG, __VA_ARGS__)

/* Runs the filesystem until unmount or a termination signal (fs/session.c).
 * ready_fd >= 0: write one byte 0 there once mounted (background start).
 * Returns the process exit status. */
int l3fs_run(struct l3fs_options *opts, int ready_fd);

#endif
