/* usage.c — the text of `l3fs --help` (and the short usage of a bad command
 * line). man/l3fs.8 is made from it (help2man, man/meson.build), so this is
 * the one place that lists the options. */
#include <stdio.h>
#include <string.h>

#include "l3fs.h"

void l3fs_usage(const char *prog, int full)
{
    FILE *out = full ? stdout : stderr;
    const char *base = strrchr(prog, '/');
    prog = base ? base + 1 : prog; /* the command's name, as the man page shows it */
    fprintf(out,
            "usage: %s SOURCE MOUNTPOINT [options]\n"
            "       %s stats MOUNTPOINT\n"
            "       %s warm MOUNTPOINT [PATH] [-j N]\n"
            "       %s cache stats|verify|gc|clear --cache-dir DIR\n",
            prog, prog, prog, prog);
    if (!full) {
        fprintf(out, "Try '%s --help' for the options.\n", prog);
        return;
    }
    fprintf(out,
            "\nShows the PNG tree SOURCE at MOUNTPOINT with every PNG as NAME.l3,\n"
            "encoded on first access and kept in a content-addressed cache.\n"
            "\nOptions (each also as -o name=value, with '_' for '-'):\n"
            "  --cache-dir DIR       cache directory (default $XDG_CACHE_HOME/l3fs,\n"
            "                        /var/cache/l3fs for root)\n"
            "  --cache-size SIZE     cap on cached objects: 50G, 512M, 10%% (default: none)\n"
            "  --exclude GLOB        keep matching PNGs as PNG (repeatable); a glob with '/'\n"
            "                        matches the path under SOURCE, else the file name\n"
            "  --jobs N, --threads N\n"
            "                        encodes running at once (default: number of CPUs)\n"
            "  --encode-threads N    threads inside one encode (default: number of CPUs)\n"
            "  --effort E            encoder effort: -1 fastest first access (no LZ\n"
            "                        planes), 0 default, 2 smallest files, slow\n"
            "  --max-threads N       FUSE request threads (default 64)\n"
            "  --max-pixels N        larger images are not encoded (EIO); default 256M\n"
            "  --max-memory SIZE     memory one encode may use (default 4G)\n"
            "  --timeout SEC         kernel entry/attribute timeout of .l3 files (default 10)\n"
            "  --dir-timeout SEC     the same for directories and other files (default 1)\n"
            "  --no-watch            no inotify: source changes show after the timeouts only\n"
            "  --keep-names          show an encoded PNG under its own name (x.png holds L3\n"
            "                        bytes) instead of x.l3, for loaders with *.png globs;\n"
            "                        tools that trust the extension then misread it\n"
            "  --no-verify           serve cache objects after a header check only (for\n"
            "                        storage that checks itself); default: every read\n"
            "                        checked on the checksums of the chunks it touches\n"
            "                        (older objects: whole, when new, changed or uncached)\n"
            "  --cache-shared        the cache directory is shared between users: made\n"
            "                        0755, objects 0644, files not readable by everyone\n"
            "                        kept out of it (default: private, 0700)\n"
            "  --fsync none|object|all  cache durability policy (default object)\n"
            "  --log-level LEVEL     error, warn, info, debug (default warn)\n"
            "  --log-file FILE       append log lines to FILE (in the foreground too)\n"
            "  --syslog              log to syslog (default in the background; without\n"
            "                        /dev/log: CACHE_DIR/l3fs.log, said at start)\n"
            "  -f                    stay in the foreground\n"
            "  -d                    trace FUSE requests (implies -f, log level debug)\n"
            "  -s                    single-threaded request loop\n"
            "  -o OPT[,OPT...]       the above, or FUSE/mount options: allow_other,\n"
            "                        default_permissions, ro, fsname=, ...\n"
            "  -h, --help            this text\n"
            "  -V, --version         print the version\n");
}
