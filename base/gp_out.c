/* gp_out.c — see gp_out.h. Temporary names are ".BASE.gp-PID-NNNNNNNN" beside the
 * target, created with O_EXCL (files) or mkdir (folders), retried on a clash, so
 * nothing planted in advance (a symlink at a predictable name) can redirect a write.
 * A temporary folder whose process has died (killed mid-write) is swept by the next
 * gp_out_set_begin on the same folder (a real folder owned by this user: a symlink planted
 * under such a name is never followed). */
#define _GNU_SOURCE /* renameat2's RENAME_EXCHANGE through syscall() */
#include "gp_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gp_file.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* ---- names ---- */

/* Split path into its folder (".") and last component; trailing slashes dropped. */
static int split(const char *path, char *dir, char *base)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= GP_OUT_PATH_MAX)
        return -1;
    size_t slash = n;
    while (slash > 0 && path[slash - 1] != '/')
        slash--;
    if (slash == 0)
        strcpy(dir, ".");
    else if (slash == 1)
        strcpy(dir, "/");
    else {
        memcpy(dir, path, slash - 1);
        dir[slash - 1] = '\0';
    }
    memcpy(base, path + slash, n - slash);
    base[n - slash] = '\0';
    return 0;
}

/* A fresh candidate temporary name for base in dir; -1 when it does not fit in
 * GP_OUT_PATH_MAX bytes (a path that long cannot be written beside). */
_Static_assert(GP_OUT_PATH_MAX >= 4096, "temp_name's precisions assume 4096-byte paths");
static int temp_name(char *out, const char *dir, const char *base)
{
    static unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned r = (unsigned)ts.tv_nsec ^ (++counter * 2654435761u) ^ ((unsigned)(uintptr_t)out << 7);
    /* The precisions bound the name below 3700 + 2 + 200 + 4 + 20 + 1 + 8 + 1 < 4096 bytes
     * (GP_OUT_PATH_MAX), so the compiler sees it fits; a longer dir is refused, never cut. */
    if (strlen(dir) > 3700)
        return -1;
    snprintf(out, GP_OUT_PATH_MAX, "%.3700s/.%.200s.gp-%ld-%08x", dir, base, (long)getpid(), r);
    return 0;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Which input (index) path is, or -1. */
static long find_input(const struct stat *st, const char *const *inputs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct stat in;
        if (inputs[i] && stat(inputs[i], &in) == 0 && same_file(st, &in))
            return (long)i;
    }
    return -1;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Write all of data to fd and flush it to disk. */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t k = write(fd, data, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        data += k;
        len -= (size_t)k;
    }
    return fsync(fd);
}

/* ---- single files ---- */

/* A symbolic link at path whose target exists and is not a regular file (a FIFO, a
 * device, a socket, a folder), or that points into /proc (/dev/stdout, /dev/stderr): one
 * line naming it in err, -1; else 0.
 * Replacing such a link would put a regular file where the user named a stream. */
static int link_to_special(const char *what, const char *path, gp_error *err)
{
    struct stat ls, ts;
    if (lstat(path, &ls) != 0 || !S_ISLNK(ls.st_mode))
        return 0;
    char t[16];
    ssize_t k = readlink(path, t, sizeof t - 1);
    if (k >= 6 && strncmp(t, "/proc/", 6) == 0) /* /dev/stdout: whatever the descriptor is now */
        return gp_error_set(err, "%s %s: is a symbolic link to a file descriptor (/proc/...), not a regular file",
                            what, path);
    if (stat(path, &ts) != 0 || S_ISREG(ts.st_mode))
        return 0;
    return gp_error_set(err, "%s %s: is a symbolic link to %s, not a regular file (gradprec replaces the file it "
                        "writes; write to a file and copy it)", what, path, gp_file_kind((unsigned)ts.st_mode));
}

int gp_out_check_file(const char *what, const char *path, const char *const *inputs, size_t n,
                      gp_error *err)
{
    if (!path || !*path)
        return gp_error_set(err, "%s: empty path", what);
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0; /* a new file: where it goes is checked when it is written */
    if (S_ISDIR(st.st_mode))
        return gp_error_set(err, "%s %s: is a directory", what, path);
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return gp_error_set(err, "%s %s: is %s, not a regular file", what, path,
                            gp_file_kind((unsigned)st.st_mode));
    if (link_to_special(what, path, err) != 0)
        return -1;
    if (stat(path, &st) == 0) {
        long i = find_input(&st, inputs, n);
        if (i >= 0)
            return gp_error_set(err, "%s %s: is the input %s (refusing to overwrite an input)", what, path,
                                inputs[i]);
    }
    return 0;
}

int gp_out_write_file(const char *path, const char *data, size_t len, gp_error *err)
{
    char dir[GP_OUT_PATH_MAX], base[GP_OUT_PATH_MAX], tmp[GP_OUT_PATH_MAX];
    if (!path || split(path, dir, base) != 0)
        return gp_error_set(err, "%s: empty or too long a path", path ? path : "(null)");
    if (link_to_special("output", path, err) != 0)
        return -1;
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        if (temp_name(tmp, dir, base) != 0)
            return gp_error_set(err, "%s: too long a path to write beside", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return gp_error_set(err, "%s: cannot write: %s", path, strerror(errno));
    }
    if (fd < 0)
        return gp_error_set(err, "%s: cannot create a temporary file beside it", path);
    int bad = write_all(fd, data, len) != 0;
    int eno = errno;
    bad |= close(fd) != 0;
    if (!bad && rename(tmp, path) != 0)
        bad = 1, eno = errno;
    if (bad) {
        unlink(tmp);
        return gp_error_set(err, "%s: cannot write: %s", path, strerror(eno ? eno : EIO));
    }
    sync_dir(dir);
    return 0;
}

/* ---- sets ---- */

static int in_set(const gp_out_set *s, const char *name)
{
    for (size_t i = 0; i < s->nnames; i++)
        if (strcmp(s->names[i], name) == 0)
            return 1;
    return 0;
}

/* Delete the set's files in folder path, then the folder (it stays if anything else is
 * there). path must be a folder itself: a symbolic link (planted where a temporary folder
 * is expected) is not followed, and the names are removed relative to the opened folder,
 * so nothing outside it is deleted. */
static void remove_set_folder(const gp_out_set *s, const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    for (size_t i = 0; i < s->nnames; i++)
        unlinkat(fd, s->names[i], 0);
    close(fd);
    rmdir(path);
}

/* Temporary folders ".BASE.gp-PID-*" beside the target whose process is gone. */
static void sweep_stale(const gp_out_set *s, const char *parent, const char *base)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    char prefix[300], p[GP_OUT_PATH_MAX + 300];
    int np = snprintf(prefix, sizeof prefix, ".%.200s.gp-", base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)np) != 0)
            continue;
        long pid = strtol(e->d_name + np, NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat ls;
        if (snprintf(p, sizeof p, "%s/%s", parent, e->d_name) < (int)sizeof p && lstat(p, &ls) == 0 &&
            S_ISDIR(ls.st_mode) && ls.st_uid == geteuid())
            remove_set_folder(s, p); /* only a real folder of ours: never through a link */
    }
    closedir(d);
}

/* mkdir -p of path's parents (not path). */
static int make_parents(const char *what, const char *dir, gp_error *err)
{
    char buf[GP_OUT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            int eno = errno;
            *p = '/';
            return gp_error_set(err, "%s %s: cannot create the folder %.*s: %s", what, dir, (int)(p - buf), buf,
                                strerror(eno));
        }
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return gp_error_set(err, "%s %s: cannot create the folder %s: %s", what, dir, buf, strerror(errno));
    return 0;
}

int gp_out_set_begin(gp_out_set *s, const char *what, const char *dir, const char *const *names,
                     size_t nnames, const char *const *inputs, size_t n, gp_error *err)
{
    memset(s, 0, sizeof *s);
    if (nnames > GP_OUT_SET_MAX)
        return gp_error_set(err, "%s: too many files in one set", what);
    for (size_t i = 0; i < nnames; i++)
        s->names[i] = names[i];
    s->nnames = nnames;
    if (!dir || !*dir)
        return gp_error_set(err, "%s: empty path", what);
    char parent[GP_OUT_PATH_MAX], base[GP_OUT_PATH_MAX], rparent[GP_OUT_PATH_MAX];
    if (split(dir, parent, base) != 0 || strlen(dir) > GP_OUT_PATH_MAX - 300)
        return gp_error_set(err, "%s: path too long", what);
    struct stat st;
    mode_t mode = 0;
    if (lstat(dir, &st) == 0) {
        if (S_ISLNK(st.st_mode) && stat(dir, &st) != 0)
            return gp_error_set(err, "%s %s: is a dangling symbolic link", what, dir);
        if (!S_ISDIR(st.st_mode))
            return gp_error_set(err, "%s %s: is %s, not a folder", what, dir, gp_file_kind((unsigned)st.st_mode));
        if (!realpath(dir, s->dir))
            return gp_error_set(err, "%s %s: %s", what, dir, strerror(errno));
        if (strcmp(s->dir, "/") == 0)
            return gp_error_set(err, "%s %s: is the root folder", what, dir);
        mode = st.st_mode & 07777;
        DIR *d = opendir(s->dir);
        if (!d)
            return gp_error_set(err, "%s %s: cannot read the folder: %s", what, dir, strerror(errno));
        struct dirent *e;
        char foreign[256] = "";
        long input = -1;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if (!in_set(s, e->d_name)) {
                snprintf(foreign, sizeof foreign, "%s", e->d_name);
                break;
            }
            char f[GP_OUT_PATH_MAX + 256];
            struct stat fs;
            snprintf(f, sizeof f, "%s/%s", s->dir, e->d_name);
            if (input < 0 && stat(f, &fs) == 0)
                input = find_input(&fs, inputs, n);
        }
        closedir(d);
        if (*foreign)
            return gp_error_set(err, "%s %s: holds '%.100s', which gradprec did not write (use an empty or new folder)",
                                what, dir, foreign);
        if (input >= 0)
            return gp_error_set(err, "%s %s: holds the input %s (refusing to overwrite an input)", what, dir,
                                inputs[input]);
        if (split(s->dir, parent, base) != 0)
            return gp_error_set(err, "%s: path too long", what);
    } else if (errno != ENOENT) {
        return gp_error_set(err, "%s %s: %s", what, dir, strerror(errno));
    } else {
        if (!strcmp(base, ".") || !strcmp(base, ".."))
            return gp_error_set(err, "%s %s: not a folder name", what, dir);
        if (make_parents(what, parent, err) != 0)
            return -1;
        if (!realpath(parent, rparent))
            return gp_error_set(err, "%s %s: %s", what, parent, strerror(errno));
        if (snprintf(s->dir, sizeof s->dir, "%s/%s", strcmp(rparent, "/") ? rparent : "", base) >= (int)sizeof s->dir)
            return gp_error_set(err, "%s: path too long", what);
        snprintf(parent, sizeof parent, "%s", rparent);
    }
    sweep_stale(s, parent, base);
    for (int tries = 0; tries < 100; tries++) {
        temp_name(s->tmp, parent, base);
        if (mkdir(s->tmp, 0777) == 0)
            break;
        if (errno != EEXIST) {
            int eno = errno;
            s->tmp[0] = '\0';
            return gp_error_set(err, "%s %s: cannot create a folder in %s: %s", what, dir, parent, strerror(eno));
        }
        s->tmp[0] = '\0';
    }
    if (!s->tmp[0])
        return gp_error_set(err, "%s %s: cannot create a temporary folder beside it", what, dir);
    if (mode && chmod(s->tmp, mode) != 0) {
        /* keep the default mode */
    }
    return 0;
}

int gp_out_set_add(gp_out_set *s, const char *name, const char *data, size_t len, gp_error *err)
{
    if (!s->tmp[0] || !in_set(s, name))
        return gp_error_set(err, "%s: not part of the output set", name);
    char f[GP_OUT_PATH_MAX + 256];
    snprintf(f, sizeof f, "%s/%s", s->tmp, name);
    int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return gp_error_set(err, "%s/%s: cannot write: %s", s->dir, name, strerror(errno));
    int bad = write_all(fd, data, len) != 0;
    int eno = errno;
    bad |= close(fd) != 0;
    if (bad) {
        unlink(f);
        return gp_error_set(err, "%s/%s: cannot write: %s", s->dir, name, strerror(eno ? eno : EIO));
    }
    s->written++;
    return 0;
}

/* The commit failed with errno eno: clean up, say so. */
static int commit_failed(gp_out_set *s, int eno, gp_error *err)
{
    gp_out_set_abort(s);
    return gp_error_set(err, "%s: cannot replace: %s", s->dir, strerror(eno));
}

int gp_out_set_commit(gp_out_set *s, gp_error *err)
{
    if (!s->tmp[0])
        return gp_error_set(err, "%s: no output set was begun", s->dir);
    char parent[GP_OUT_PATH_MAX], base[GP_OUT_PATH_MAX], old[GP_OUT_PATH_MAX];
    split(s->dir, parent, base);
    sync_dir(s->tmp);
    old[0] = '\0';
    if (rename(s->tmp, s->dir) == 0) { /* no folder there: one rename */
        s->tmp[0] = '\0';
    } else if (errno != EEXIST && errno != ENOTEMPTY && errno != EISDIR) {
        return commit_failed(s, errno, err);
    } else if (syscall(SYS_renameat2, AT_FDCWD, s->tmp, AT_FDCWD, s->dir, RENAME_EXCHANGE) == 0) {
        snprintf(old, sizeof old, "%s", s->tmp); /* the tmp name now holds the old set */
    } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
        return commit_failed(s, errno, err);
    } else {
        /* No atomic exchange on this file system: move the old set aside, then the new
         * in. In between the folder is absent (never mixed); the old set waits beside it. */
        int moved = 0;
        for (int tries = 0; tries < 100 && !moved; tries++) {
            temp_name(old, parent, base);
            moved = rename(s->dir, old) == 0;
            if (!moved && errno != EEXIST && errno != ENOTEMPTY)
                break;
        }
        if (!moved || rename(s->tmp, s->dir) != 0) {
            int eno = errno;
            if (moved)
                rename(old, s->dir);
            return commit_failed(s, eno, err);
        }
    }
    if (old[0])
        remove_set_folder(s, old);
    s->tmp[0] = '\0';
    sync_dir(parent);
    return 0;
}

void gp_out_set_abort(gp_out_set *s)
{
    if (s->tmp[0])
        remove_set_folder(s, s->tmp);
    s->tmp[0] = '\0';
}
