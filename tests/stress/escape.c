/* escape.c — `stress_tool escape`: every kind of write through the mount
 * gives EROFS; `as-user`: an open and read as another user; `json`: a number
 * from stats.json. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "l3.h"
#include "l3fs.h"
#include "stress.h"
/* --------------------------------------------------------------- escape */

static int n_fail, n_tried;

static void expect_erofs(const char *what, int r)
{
    int e = errno;
    n_tried++;
    if (r >= 0) {
        printf("FAIL %-34s succeeded (expected EROFS)\n", what);
        n_fail++;
    } else if (e != EROFS) {
        printf("FAIL %-34s %s (expected EROFS)\n", what, strerror(e));
        n_fail++;
    } else {
        printf("PASS %-34s EROFS\n", what);
    }
}

/* escape MNT FILE DIR: FILE an existing file and DIR an existing
 * non-empty directory under MNT (relative). */
int cmd_escape(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    char f[8192], d[8192], nn[8192], sub[8192];
    st_fmt(f, sizeof f, "%s/%s", argv[1], argv[2]);
    st_fmt(d, sizeof d, "%s/%s", argv[1], argv[3]);
    st_fmt(nn, sizeof nn, "%s/new-entry", d);
    struct stat st, dst;
    if (stat(f, &st) < 0 || stat(d, &dst) < 0) {
        printf("FAIL escape: %s or %s missing\n", f, d);
        return 1;
    }
    /* a subdirectory of d (for rmdir) and another file (for exchange) */
    char other[8192];
    sub[0] = other[0] = 0;
    const char *base = strrchr(f, '/') + 1;
    DIR *dd = opendir(d);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            !sub[0])
            st_fmt(sub, sizeof sub, "%s/%s", d, de->d_name);
        if (de->d_type == DT_REG && strcmp(de->d_name, base) && !other[0])
            st_fmt(other, sizeof other, "%s/%s", d, de->d_name);
    }
    if (dd)
        closedir(dd);
    int fd;
    expect_erofs("open(O_WRONLY)", fd = open(f, O_WRONLY));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_RDWR)", fd = open(f, O_RDWR));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_WRONLY|O_APPEND)", fd = open(f, O_WRONLY | O_APPEND));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_RDONLY|O_TRUNC)", fd = open(f, O_RDONLY | O_TRUNC));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_CREAT|O_EXCL) new", fd = open(nn, O_WRONLY | O_CREAT | O_EXCL, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_CREAT) existing", fd = open(f, O_WRONLY | O_CREAT, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("creat() new", fd = creat(nn, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("truncate()", truncate(f, 0));
    expect_erofs("unlink()", unlink(f));
    expect_erofs("rename() within dir", rename(f, nn));
    if (other[0])
        expect_erofs("renameat2(RENAME_EXCHANGE)",
                     renameat2(AT_FDCWD, f, AT_FDCWD, other, RENAME_EXCHANGE));
    expect_erofs("renameat2(RENAME_NOREPLACE)",
                 renameat2(AT_FDCWD, f, AT_FDCWD, nn, RENAME_NOREPLACE));
    expect_erofs("mkdir()", mkdir(nn, 0755));
    if (sub[0])
        expect_erofs("rmdir() of a subdirectory", rmdir(sub));
    expect_erofs("rmdir() of a non-empty dir", rmdir(d));
    expect_erofs("symlink()", symlink("/etc/passwd", nn));
    expect_erofs("link()", link(f, nn));
    expect_erofs("chmod()", chmod(f, 0777));
    expect_erofs("chown() to nobody", chown(f, 65534, 65534));
    expect_erofs("chown() unchanged", chown(f, st.st_uid, st.st_gid));
    expect_erofs("utimes()", utimes(f, NULL));
    struct timespec ts[2] = {{0, 0}, {0, 0}};
    expect_erofs("utimensat(epoch)", utimensat(AT_FDCWD, f, ts, 0));
    expect_erofs("setxattr(user.x)", setxattr(f, "user.x", "1", 1, 0));
    expect_erofs("removexattr(user.x)", removexattr(f, "user.x"));
    expect_erofs("mknod(S_IFREG)", mknod(nn, S_IFREG | 0644, 0));
    expect_erofs("mknod(S_IFIFO)", mknod(nn, S_IFIFO | 0644, 0));
    expect_erofs("mknod(S_IFCHR 1:3)", mknod(nn, S_IFCHR | 0644, makedev(1, 3)));
    char ctl[8192];
    st_fmt(ctl, sizeof ctl, "%s/.l3fs/stats.json", argv[1]);
    expect_erofs("open(.l3fs/stats.json, O_WRONLY)", fd = open(ctl, O_WRONLY));
    if (fd >= 0)
        close(fd);
    /* nothing changed */
    struct stat st2;
    if (stat(f, &st2) < 0 || st2.st_size != st.st_size || st2.st_mode != st.st_mode) {
        printf("FAIL %s changed after the write attempts\n", argv[2]);
        n_fail++;
    }
    if (lstat(nn, &st2) == 0) {
        printf("FAIL %s appeared\n", nn);
        n_fail++;
    }
    printf("%s escape: %d write attempts%s\n", n_fail ? "FAIL" : "PASS", n_tried,
           n_fail ? " not all refused with EROFS" : " all refused with EROFS, nothing changed");
    return n_fail ? 1 : 0;
}

/* as-user UID GID PATH: prints and returns (as exit status) the errno of
 * open+read of PATH by that user (0 = read fine). */
int cmd_as_user(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    uid_t uid = (uid_t)atol(argv[1]);
    gid_t gid = (gid_t)atol(argv[2]);
    pid_t p = fork();
    if (p == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0)
            _exit(100);
        alarm(20);
        int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            _exit(errno);
        char b[4096];
        ssize_t r;
        while ((r = read(fd, b, sizeof b)) > 0)
            ;
        _exit(r < 0 ? errno : 0);
    }
    int status;
    waitpid(p, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 101;
    printf("as uid %u: open+read %s -> %s\n", (unsigned)uid, argv[3],
           code == 0 ? "OK" : code == 100 ? "cannot switch user"
                          : code == 101 ? "killed" : strerror(code));
    return code;
}

/* json FILE PATH: the number at a dotted path in an l3fs stats.json. */
int cmd_json(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    const char *step;
    if (read_all(argv[1], &buf, &cap, &len, NULL, &step) < 0)
        return 1;
    buf[len < cap ? len : cap - 1] = 0;
    double v;
    if (l3fs_json_number((char *)buf, argv[2], &v) < 0) {
        char s[256];
        if (l3fs_json_string((char *)buf, argv[2], s, sizeof s) < 0) {
            fprintf(stderr, "json: %s not found\n", argv[2]);
            return 1;
        }
        printf("%s\n", s);
    } else {
        printf("%.0f\n", v);
    }
    free(buf);
    return 0;
}
