/* tc_shell.h — shell commands for the tests and benchmarks that drive
 * programs (mount, unmount, cp, rsync). */
#ifndef L3_TC_SHELL_H
#define L3_TC_SHELL_H

/* Runs the printf-formatted command with system(3) (the command must fit in
 * 8 KiB; longer is cut). Returns its exit status, 128 when it did not exit
 * normally. */
int tc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
