/* mount_opts.h — -o items that are not l3fs's own (fs/mount_opts.c). */
#ifndef L3FS_MOUNT_OPTS_H
#define L3FS_MOUNT_OPTS_H

/* 1 for what a mount helper or fstab hands over that means nothing here
 * (defaults, noauto, nofail, _netdev, user, x-..., comment=...). */
int l3fs_mount_opt_ignored(const char *item);
/* 1 for a FUSE or kernel mount option a libfuse 3 low-level session accepts
 * ("name" or "name=value" as that option takes a value or not). */
int l3fs_fuse_opt_known(const char *item);
/* One line on stderr for an unknown item, naming the closest of the l3fs
 * options (valued: the names that take a value, NULL-terminated, '-' as in
 * --name), l3fs's flags and the FUSE options, when one is close. */
void l3fs_mount_opt_unknown(const char *item, const char *const valued[]);

#endif
