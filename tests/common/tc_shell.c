/* tc_shell.c — shell commands (tc_shell.h). */
#include "tc_shell.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

int tc_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}
