/* gp_api_scaled.c — the scaled and block formats of include/gradprec.h
 * (gradprec_quantize, gradprec_fp8_delayed_scale) over kernels/gp_scaled_tensor.h. */
#include "../include/gradprec.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/gp_scaled_tensor.h"

static int fail(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return GRADPREC_BAD_INPUT;
}

int gradprec_quantize(const char *format, uint64_t rows, uint64_t cols, const float *x, float *y, uint8_t *codes,
                      float *scales, uint64_t nscales, float *tensor_scale, float scale_in, uint64_t seed,
                      char *err, size_t errlen)
{
    char why[192], msg[256];
    gp_scaled_cfg c;
    if (!format || gp_scaled_parse(format, &c, why, sizeof why) != 0) {
        snprintf(msg, sizeof msg, "quantize: %s", format ? why : "format is NULL");
        return fail(err, errlen, msg);
    }
    if (rows > ((uint64_t)1 << 40) || cols > ((uint64_t)1 << 40) || (rows && cols > (((uint64_t)1 << 40) / rows)))
        return fail(err, errlen, "quantize: rows * cols above 2^40");
    if (rows && cols && (!x || !y))
        return fail(err, errlen, "quantize: x and y must be non-NULL");
    if (scales && nscales < gp_scaled_nscales(&c, rows, cols)) {
        snprintf(msg, sizeof msg, "quantize: scales holds %llu, %s needs %llu", (unsigned long long)nscales, format,
                 (unsigned long long)gp_scaled_nscales(&c, rows, cols));
        return fail(err, errlen, msg);
    }
    if (!rows || !cols)
        return GRADPREC_OK;
    gp_scaled_quantize(&c, rows, cols, x, y, codes, scales, tensor_scale, scale_in, seed, 0, 0, NULL);
    return GRADPREC_OK;
}

float gradprec_fp8_delayed_scale(const char *format, float amax, int margin, float prev, int pow2)
{
    gp_scaled_cfg c;
    char why[192];
    if (!format || gp_scaled_parse(format, &c, why, sizeof why) != 0 || c.kind >= GP_SC_MX || margin < -126 ||
        margin > 126)
        return gp_f32_from_bits(0x7fc00000u);
    return gp_fp8_scale_delayed(c.elem, amax, margin, prev, pow2);
}

int gradprec_format_info(const char *format, char *canonical, size_t n, uint64_t rows, uint64_t cols,
                         uint64_t *nscales, char *err, size_t errlen)
{
    char why[192], msg[256];
    gp_scaled_cfg c;
    if (!format || gp_scaled_parse(format, &c, why, sizeof why) != 0) {
        snprintf(msg, sizeof msg, "format_info: %s", format ? why : "format is NULL");
        return fail(err, errlen, msg);
    }
    if (canonical && n)
        gp_scaled_name(&c, canonical, n);
    if (nscales)
        *nscales = gp_scaled_nscales(&c, rows, cols);
    return GRADPREC_OK;
}
