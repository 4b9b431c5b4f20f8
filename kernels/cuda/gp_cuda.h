/* gp_cuda.h — host entry points of the CUDA kernels. Built from the .cu files of kernels/cuda
 * when nvcc is found, else from gp_cuda_absent.c (every call reports "not built").
 * The kernels call kernels/arith, so their results equal the CPU emulation's. */
#ifndef GP_CUDA_H
#define GP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../../harness/gp_error.h"
#include "../arith/gp_format.h"
#include "../gp_plugin_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices: 0 when CUDA is not built in, no driver is
 * installed, or no device is present. Never fails. */
int gp_cuda_device_count(void);

/* Convert the fp32 bit patterns start, start+1, ..., start+n-1 (wrapping at 2^32) to
 * format f on the device; out_bits[i] and out_ev[i] receive the result and events of
 * pattern start+i. Stochastic rounding draws gp_rand_u32(seed, 0, pattern). Host
 * buffers are the caller's. Returns 0, or -1 with err set (no device, CUDA error). */
int gp_cuda_convert_range(gp_format f, gp_rmode mode, int ftz, uint64_t seed, uint32_t start,
                          size_t n, uint32_t *out_bits, uint8_t *out_ev, gp_error *err);

/* The CUDA backend's table (host-memory interface: it copies to the device, runs
 * the kernels of gp_cuda_accum.cu and copies back), or NULL without a device. */
const gp_plugin *gp_cuda_backend(void);

#ifdef __cplusplus
}
#endif

#endif
