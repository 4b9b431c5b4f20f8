/* gp_fuzz_driver.c — the plain regression driver every fuzz target also links
 * against (no libFuzzer, no clang needed): runs LLVMFuzzerTestOneInput once on each
 * file named on the command line, or on each file of a folder named there (in name
 * order, dot files skipped), so a target's whole corpus is one CTest case
 * (fuzz/<target>). Each input's path is printed before it runs: a crash names it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* run_file: read PATH whole and run the target on it. 0, or 2 (unreadable), 3 (memory). */
static int run_file(const char *path)
{
    printf("%s: ", path);
    fflush(stdout);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("cannot open\n");
        return 2;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                printf("out of memory\n");
                free(buf);
                fclose(f);
                return 3;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        if (k == 0)
            break;
        n += k;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        printf("read error\n");
        return 2;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    printf("ok (%zu bytes)\n", n);
    return 0;
}

static int visible(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* run_folder: every visible entry of DIR in name order; a folder with none is an error
 * (2): a corpus must not vanish unnoticed. */
static int run_folder(const char *dir)
{
    struct dirent **names = NULL;
    int k = scandir(dir, &names, visible, alphasort);
    if (k < 0) {
        fprintf(stderr, "%s: cannot read the folder\n", dir);
        return 2;
    }
    int rc = k == 0 ? 2 : 0;
    if (k == 0)
        fprintf(stderr, "%s: no inputs in the folder\n", dir);
    for (int i = 0; i < k; i++) {
        size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = 3;
        } else {
            snprintf(path, len, "%s/%s", dir, names[i]->d_name);
            if (rc == 0)
                rc = run_file(path);
            free(path);
        }
        free(names[i]);
    }
    free(names);
    if (rc == 0)
        printf("%s: %d inputs ok\n", dir, k);
    return rc;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int rc = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_folder(argv[i]) : run_file(argv[i]);
        if (rc)
            return rc;
    }
    return 0;
}
