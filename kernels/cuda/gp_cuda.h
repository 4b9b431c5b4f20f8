/* gp_cuda.h — host entry points of the CUDA kernels. Built from the .cu files of kernels/cuda
 * when nvcc is found, else from gp_cuda_absent.c (every call reports "not built").
 * The kernels call kernels/arith, so their results equal the CPU emulation's. */
#ifndef GP_CUDA_H
#define GP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"
#include "../arith/gp_format.h"
#include "../arith/gp_scaled.h"
#include "../gp_plugin_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices: 0 when CUDA is not built in, no driver is
 * installed, or no device is present. Never fails. */
int gp_cuda_device_count(void);

/* Whether CUDA can be used in this process (cudaFree(0), which initialises the runtime
 * and the device's context): 0, else the CUDA error code, with the call and CUDA's
 * error name and text in why[whylen]. In a child forked after its parent used CUDA this
 * is GP_CUDA_INIT_ERROR (CUDA supports no such child). */
int gp_cuda_probe(char *why, size_t whylen);

/* cudaErrorInitializationError's value (driver_types.h). */
#define GP_CUDA_INIT_ERROR 3

/* Convert the fp32 bit patterns start, start+1, ..., start+n-1 (wrapping at 2^32) to
 * format f on the device; out_bits[i] and out_ev[i] receive the result and events of
 * pattern start+i. Stochastic rounding draws gp_rand_u32(seed, 0, pattern). Host
 * buffers are the caller's. Returns 0, or -1 with err set (no device, CUDA error). */
int gp_cuda_convert_range(gp_format f, gp_rmode mode, int ftz, uint64_t seed, uint32_t start,
                          size_t n, uint32_t *out_bits, uint8_t *out_ev, gp_error *err);

/* The scaled format c on the rows x cols fp32 tensor x (host memory), on the device, one
 * thread per row block (gp_scaled_row_block, as the CPU's gp_scaled_quantize): y the
 * dequantized values, codes, and scales (one per block, row-major). ts: NVFP4's tensor
 * scale; given: the multiplier of per-tensor delayed scaling. Not for :current and
 * :blockwise_128x128 (their scale spans rows: the host computes it). Random bits
 * gp_rand_u32(seed, stream, element). Returns 0, or -1 with err set. */
int gp_cuda_scaled_quantize(const gp_scaled_cfg *c, size_t rows, size_t cols, const float *x, float *y,
                            uint8_t *codes, float *scales, float ts, float given, uint64_t seed, uint64_t stream,
                            gp_error *err);

/* The kernels of gp_cuda_accum.cu as a device-memory table (memory GP_PLUGIN_DEVICE):
 * every array, found_inf, scale and tracker pointer is a device pointer; the argument
 * structs themselves are host memory. accumulate_many makes one launch for all its
 * segments. Kernels run on the legacy default stream: unscale and grad_sumsq wait for
 * their result, the others return after the launch. Thread-safe. NULL without a device. */
const gp_plugin *gp_cuda_device_plugin(void);

/* The CUDA backend: gp_cuda_device_plugin() behind gp_cuda_stage_open, opened once for
 * the process (host-memory interface), or NULL without a device. */
const gp_plugin *gp_cuda_backend(void);

/* Why the cuda backend's last call on this thread returned 1 (not supported): a
 * static sentence naming what the device does not run, or NULL (none refused, or a
 * refusal without one). gp_backend_refused adds it to the run's one-line error. */
const char *gp_cuda_refusal(void);

/* Most staged tables open at once. */
#define GP_CUDA_STAGE_MAX 16

/* Wrap a device-memory table dev into a host-memory one (same abi_version and name,
 * memory GP_PLUGIN_HOST). Each call copies its host arrays (and found_inf, scale,
 * tracker) into device buffers kept between calls (grow-only; every array 256-byte
 * aligned), calls dev's function, waits for the device, and copies back what that
 * function may write; accumulate_many stages all segments and makes one call to dev's.
 * Entries NULL in dev (grad_sumsq, grad_scale, scaler_update, accumulate_many) stay
 * NULL. Calls on one staged table are serialised. dev must stay valid until
 * gp_cuda_stage_close. Returns the table, or NULL with err set (no CUDA build or
 * device, dev not device memory, GP_CUDA_STAGE_MAX already open). */
const gp_plugin *gp_cuda_stage_open(const gp_plugin *dev, gp_error *err);

/* Free what gp_cuda_stage_open allocated for staged; NULL (or another table): nothing. */
void gp_cuda_stage_close(const gp_plugin *staged);

#ifdef __cplusplus
}
#endif

#endif
