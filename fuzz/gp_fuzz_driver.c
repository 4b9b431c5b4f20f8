/* gp_fuzz_driver.c — the plain regression driver every fuzz target also links
 * against (no libFuzzer, no clang needed): runs LLVMFuzzerTestOneInput once on each
 * file named on the command line, so every corpus file is an ordinary CTest case. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot open\n", argv[i]);
            return 2;
        }
        uint8_t *buf = NULL;
        size_t n = 0, cap = 0;
        for (;;) {
            if (n == cap) {
                cap = cap ? cap * 2 : 4096;
                uint8_t *nb = realloc(buf, cap);
                if (!nb) {
                    fprintf(stderr, "%s: out of memory\n", argv[i]);
                    return 3;
                }
                buf = nb;
            }
            size_t k = fread(buf + n, 1, cap - n, f);
            if (k == 0)
                break;
            n += k;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
        printf("%s: ok (%zu bytes)\n", argv[i], n);
    }
    return 0;
}
