/* main.c — the l3fs command: mount, and the stats/warm/cache subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "l3fs_internal.h"

int main(int argc, char **argv)
{
    if (argc >= 2) {
        if (!strcmp(argv[1], "stats"))
            return l3fs_cmd_stats(argc - 1, argv + 1);
        if (!strcmp(argv[1], "warm"))
            return l3fs_cmd_warm(argc - 1, argv + 1);
        if (!strcmp(argv[1], "cache"))
            return l3fs_cmd_cache(argc - 1, argv + 1);
    }
    struct l3fs_options o;
    int r = l3fs_parse_args(argc, argv, &o);
    if (r == 1)
        return 0;
    if (r < 0)
        return 2;
    if (l3fs_check_mountpoint(&o, NULL) < 0) {
        l3fs_options_free(&o);
        return 2;
    }
    if (l3fs_log_setup(&o) < 0) {
        l3fs_options_free(&o);
        return 1;
    }

    int status;
    if (o.foreground) {
        status = l3fs_run(&o, -1);
    } else {
        /* Start in the background before any thread exists; the parent
         * returns only once the mount is up (0) or failed (1). */
        int pfd[2];
        if (pipe(pfd) < 0) {
            perror("l3fs: pipe");
            l3fs_options_free(&o);
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("l3fs: fork");
            l3fs_options_free(&o);
            return 1;
        }
        if (pid > 0) {
            close(pfd[1]);
            char c = 1;
            ssize_t n;
            do
                n = read(pfd[0], &c, 1);
            while (n < 0 && errno == EINTR);
            close(pfd[0]);
            l3fs_options_free(&o);
            if (n == 1 && c == 0)
                return 0;
            int ws;
            if (waitpid(pid, &ws, WNOHANG) == pid && WIFEXITED(ws))
                return WEXITSTATUS(ws) ? WEXITSTATUS(ws) : 1;
            return 1;
        }
        close(pfd[0]);
        setsid();
        if (chdir("/") < 0)
            perror("l3fs: chdir /");
        status = l3fs_run(&o, pfd[1]);
    }
    l3fs_options_free(&o);
    return status;
}
