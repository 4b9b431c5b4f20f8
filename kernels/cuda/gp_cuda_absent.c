/* gp_cuda_absent.c — what gp_cuda.h answers when gradprec was built without nvcc. */
#include "gp_cuda.h"

#include <stdio.h>

int gp_cuda_device_count(void)
{
    return 0;
}

int gp_cuda_probe(char *why, size_t whylen)
{
    snprintf(why, whylen, "the CUDA backend was not built (nvcc not found at configure time)");
    return -1;
}

int gp_cuda_convert_range(gp_format f, gp_rmode mode, int ftz, uint64_t seed, uint32_t start,
                          size_t n, uint32_t *out_bits, uint8_t *out_ev, gp_error *err)
{
    (void)f; (void)mode; (void)ftz; (void)seed; (void)start; (void)n; (void)out_bits; (void)out_ev;
    return gp_error_set(err, "the CUDA backend was not built (nvcc not found at configure time)");
}

int gp_cuda_scaled_quantize(const gp_scaled_cfg *c, size_t rows, size_t cols, const float *x, float *y,
                            uint8_t *codes, float *scales, float ts, float given, uint64_t seed, uint64_t stream,
                            gp_error *err)
{
    (void)c; (void)rows; (void)cols; (void)x; (void)y; (void)codes; (void)scales; (void)ts; (void)given;
    (void)seed; (void)stream;
    return gp_error_set(err, "the CUDA backend was not built (nvcc not found at configure time)");
}

const gp_plugin *gp_cuda_device_plugin(void)
{
    return NULL;
}

const gp_plugin *gp_cuda_backend(void)
{
    return NULL;
}

const char *gp_cuda_refusal(void)
{
    return NULL;
}

const gp_plugin *gp_cuda_stage_open(const gp_plugin *dev, gp_error *err)
{
    (void)dev;
    gp_error_set(err, "the CUDA backend was not built (nvcc not found at configure time)");
    return NULL;
}

void gp_cuda_stage_close(const gp_plugin *staged)
{
    (void)staged;
}
