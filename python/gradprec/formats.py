"""The scaled and block formats of libgradprec (docs/formats.md, "Scaled and block
formats") on numpy arrays: quantize a 2-D fp32 array and get back what it dequantizes
to, each element's code and each block's scale, bit for bit as gradprec models them."""
import ctypes

import numpy as np

from . import _lib
from ._errors import GradprecError


def format_info(fmt, rows=1, cols=1):
    """(canonical name, number of scales of a rows x cols tensor) of scaled format fmt."""
    name = ctypes.create_string_buffer(128)
    n = ctypes.c_uint64()
    err = ctypes.create_string_buffer(256)
    if _lib.lib().gradprec_format_info(fmt.encode(), name, 128, rows, cols, ctypes.byref(n), err, 256) != 0:
        raise GradprecError(2, err.value.decode())
    return name.value.decode(), n.value


def quantize(x, fmt, scale_in=1.0, seed=0):
    """Quantize x (a 1-D or 2-D array, converted to C-contiguous fp32; 1-D is one row)
    with scaled format fmt. Returns (y, codes, scales, tensor_scale): y the dequantized
    fp32 values (x's shape), codes uint8 (x's shape), scales fp32 (one per block,
    row-major over the blocks), tensor_scale (NVFP4's fp32 tensor scale, else 1.0).
    scale_in: the multiplier of ":delayed"; seed: the Philox seed of ":sr"."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    shape = x.shape
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    if x2.ndim != 2:
        raise GradprecError(2, "quantize: x must be 1-D or 2-D")
    rows, cols = x2.shape
    _, ns = format_info(fmt, rows, cols)
    y = np.empty_like(x2)
    codes = np.empty(x2.shape, dtype=np.uint8)
    scales = np.empty(ns, dtype=np.float32)
    ts = ctypes.c_float(1.0)
    err = ctypes.create_string_buffer(256)
    rc = _lib.lib().gradprec_quantize(fmt.encode(), rows, cols, x2.ctypes.data, y.ctypes.data, codes.ctypes.data,
                                      scales.ctypes.data, ns, ctypes.addressof(ts), scale_in, seed, err, 256)
    if rc != 0:
        raise GradprecError(rc, err.value.decode())
    return y.reshape(shape), codes.reshape(shape), scales, ts.value


def fp8_delayed_scale(fmt, amax, margin=0, prev=1.0, pow2=False):
    """Transformer Engine's DelayedScaling scale (gradprec_fp8_delayed_scale)."""
    return _lib.lib().gradprec_fp8_delayed_scale(fmt.encode(), amax, margin, prev, int(pow2))
