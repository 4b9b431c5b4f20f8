/* gp_file.c — see gp_file.h. Open non-blocking (a FIFO without a writer must not hang
 * us), fstat the descriptor we hold (no check-then-open race), refuse what is not a
 * regular file, then read at most max_bytes + 1 bytes. */
#include "gp_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *gp_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    case S_IFREG: return "a regular file";
    default: return "not a regular file";
    }
}

int gp_file_open_input(const char *path, size_t max_bytes, size_t *size, gp_error *err)
{
    if (!path || !*path) {
        gp_error_set(err, "(empty path): no file named");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        gp_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gp_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        gp_error_set(err, "%s: is a directory", path);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        gp_error_set(err, "%s: is %s, not a regular file", path, gp_file_kind((unsigned)st.st_mode));
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        gp_error_set(err, "%s: %lld bytes, larger than the limit of %zu bytes", path, (long long)st.st_size,
                     max_bytes);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (size_t)st.st_size;
    return fd;
}

int gp_file_check_input(const char *path, size_t max_bytes, gp_error *err)
{
    size_t size;
    int fd = gp_file_open_input(path, max_bytes, &size, err);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

char *gp_file_read(const char *path, size_t max_bytes, size_t *len, gp_error *err)
{
    size_t size = 0;
    int fd = gp_file_open_input(path, max_bytes, &size, err);
    if (fd < 0)
        return NULL;
    /* st_size is a hint (procfs files say 0): read until end of file, never past max_bytes. */
    size_t cap = size + 2 < 4096 ? 4096 : size + 2, n = 0;
    char *buf = malloc(cap);
    const char *why = buf ? NULL : "out of memory";
    int eno = 0;
    while (!why) {
        if (cap - n < 2) {
            size_t ncap = cap * 2 > max_bytes + 2 ? max_bytes + 2 : cap * 2;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                why = ncap > cap ? "out of memory" : "too large";
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            eno = errno;
            why = "read";
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n > max_bytes)
            why = "too large";
    }
    close(fd);
    if (why) {
        free(buf);
        if (strcmp(why, "read") == 0)
            gp_error_set(err, "%s: cannot read: %s", path, strerror(eno));
        else if (strcmp(why, "too large") == 0)
            gp_error_set(err, "%s: larger than the limit of %zu bytes", path, max_bytes);
        else
            gp_error_set(err, "%s: %s", path, why);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
