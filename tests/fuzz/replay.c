/* replay.c — runs a libFuzzer harness's LLVMFuzzerTestOneInput on saved
 * inputs in an ordinary build (no libFuzzer), one child process per input,
 * and reports each in TAP: "ok" when the harness returned, "not ok" when the
 * child died (abort: a harness invariant broke; a signal; a sanitizer
 * report, leaks included) or ran past the time limit. Linked with one harness of fuzz/.
 *
 *   replay_HARNESS FILE_OR_DIR...
 *
 * Directories are read (not recursively); names starting with '.', README
 * files and EXPECT (the statuses test_regressions.c checks) are skipped. Exit status 1 when any input failed. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_SECONDS 60 /* per input (sanitizer builds are slow) */

static unsigned n_run, n_bad;

static void replay(const char *path)
{
    n_run++;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        printf("not ok %u - %s (fork: %s)\n", n_run, path, strerror(errno));
        n_bad++;
        return;
    }
    if (pid == 0) {
        size_t n;
        uint8_t *d = tc_slurp(path, &n);
        if (d == NULL) {
            fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
            _exit(2);
        }
        alarm(REPLAY_SECONDS);
        LLVMFuzzerTestOneInput(d, n);
        free(d);
        exit(0); /* not _exit: LeakSanitizer checks at exit, as libFuzzer would */
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        printf("ok %u - %s\n", n_run, path);
        return;
    }
    n_bad++;
    if (WIFSIGNALED(ws))
        printf("not ok %u - %s (signal %d%s)\n", n_run, path, WTERMSIG(ws),
               WTERMSIG(ws) == SIGALRM ? ": over the time limit" : "");
    else
        printf("not ok %u - %s (exit status %d)\n", n_run, path, WEXITSTATUS(ws));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        n_run++;
        n_bad++;
        printf("not ok %u - %s (%s)\n", n_run, dir, strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0 ||
            strcmp(e->d_name, "EXPECT") == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        replay(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    printf("TAP version 13\n");
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            replay_dir(argv[i]);
        else
            replay(argv[i]);
    }
    printf("1..%u\n", n_run);
    return n_bad ? 1 : 0;
}
