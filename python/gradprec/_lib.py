"""Finds and loads libgradprec.so and declares the C API's signatures (include/gradprec.h).

Search order: $GRADPREC_LIB (a path to the library); the build/ folder of the checkout
this package was imported or installed from; a copy inside the package folder.
"""
import ctypes
import os
import sys

from ._errors import GradprecError

API_VERSION = 1  # GRADPREC_API_VERSION this module was written against
_LIBNAME = "libgradprec.so"


def _candidates():
    env = os.environ.get("GRADPREC_LIB")
    if env:
        return [("GRADPREC_LIB", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    roots = []
    try:
        from . import _origin  # written by setup.py when installed

        roots.append(_origin.REPO)
    except ImportError:
        pass
    parent = os.path.dirname(here)
    if os.path.basename(parent) == "python":  # imported from python/ in a checkout
        roots.append(os.path.dirname(parent))
    out = []
    for r in roots:
        out.append(("checkout", os.path.join(r, "build", _LIBNAME)))
    out.append(("package", os.path.join(here, _LIBNAME)))
    return out


def _declare(lib):
    c = ctypes
    vp, sz, cp = c.c_void_p, c.c_size_t, c.c_char_p
    sigs = {
        "gradprec_api_version": (c.c_int, []),
        "gradprec_version": (cp, []),
        "gradprec_vocab_name": (cp, [cp, c.c_int]),
        "gradprec_format_bits": (c.c_int, [c.c_int]),
        "gradprec_load_file": (vp, [cp, cp, sz]),
        "gradprec_load_yaml": (vp, [cp, sz, cp, cp, sz]),
        "gradprec_set_count": (sz, [vp]),
        "gradprec_set_name": (cp, [vp, sz]),
        "gradprec_set_seed": (None, [vp, c.c_uint64]),
        "gradprec_set_free": (None, [vp]),
        "gradprec_sample_indices": (c.c_int, [c.c_uint64, sz, c.c_uint64, c.c_uint64, c.POINTER(c.c_uint64), cp, sz]),
        "gradprec_run": (c.c_int, [vp, cp, vp, cp, c.c_int, c.POINTER(vp), cp, sz]),
        "gradprec_result_count": (sz, [vp]),
        "gradprec_result_failed": (sz, [vp]),
        "gradprec_result_name": (cp, [vp, sz]),
        "gradprec_result_verdict": (cp, [vp, sz]),
        "gradprec_result_dominant": (cp, [vp, sz]),
        "gradprec_result_metric": (c.c_double, [vp, sz, cp]),
        "gradprec_result_tensor_count": (sz, [vp, sz]),
        "gradprec_result_tensor_name": (cp, [vp, sz, sz]),
        "gradprec_result_tensor_metric": (c.c_double, [vp, sz, sz, cp]),
        "gradprec_result_json": (cp, [vp]),
        "gradprec_result_write": (c.c_int, [vp, cp, cp, sz]),
        "gradprec_result_free": (None, [vp]),
        "gradprec_adamw_step": (
            c.c_int,
            [cp, cp, cp, cp, c.c_double, c.c_double, c.c_double, c.c_double, c.c_double, c.c_int64,
             c.c_uint64, vp, vp, vp, vp, cp, sz],
        ),
        "gradprec_torch_sqrtf": (c.c_int, [cp, c.c_uint64, vp, vp, cp, sz]),
        "gradprec_quantize": (
            c.c_int,
            [cp, c.c_uint64, c.c_uint64, vp, vp, vp, vp, c.c_uint64, vp, c.c_float, c.c_uint64, cp, sz],
        ),
        "gradprec_fp8_delayed_scale": (c.c_float, [cp, c.c_float, c.c_int, c.c_float, c.c_int]),
        "gradprec_format_info": (c.c_int, [cp, cp, sz, c.c_uint64, c.c_uint64, c.POINTER(c.c_uint64), cp, sz]),
        "gradprec_lowbit_quantize": (c.c_int, [cp, c.c_int, c.c_uint64, vp, vp, vp, cp, sz]),
        "gradprec_lowbit_dequantize": (c.c_int, [cp, c.c_int, c.c_uint64, vp, vp, vp, cp, sz]),
        "gradprec_lowbit_adamw_step": (
            c.c_int,
            [cp, cp, cp, c.c_double, c.c_double, c.c_double, c.c_double, c.c_double, c.c_int64, c.c_uint64,
             vp, vp, vp, vp, vp, vp, cp, sz],
        ),
        "gradprec_serve": (c.c_int, [c.c_int, vp, cp, cp, sz]),
        "gradprec_serve_plugin": (c.c_int, [c.c_int, cp]),
        "gradprec_set_worker_program": (c.c_int, [c.POINTER(cp)]),
    }
    u64 = c.c_uint64
    stream = {  # API minor 1: declared where the library has them (Stream refuses otherwise)
        "gradprec_api_minor": (c.c_int, []),
        "gradprec_stream_open": (vp, [cp, sz, cp, c.c_int, cp, sz]),
        "gradprec_stream_free": (None, [vp]),
        "gradprec_stream_tensor_count": (sz, [vp]),
        "gradprec_stream_tensor_name": (cp, [vp, sz]),
        "gradprec_stream_tensor_size": (u64, [vp, sz]),
        "gradprec_stream_tensor_fed": (u64, [vp, sz]),
        "gradprec_stream_tensor_indices": (c.POINTER(u64), [vp, sz]),
        "gradprec_stream_grad": (c.c_int, [vp, sz, cp, vp, u64, cp, sz]),
        "gradprec_stream_tokens": (c.c_int, [vp, c.c_int64, cp, sz]),
        "gradprec_stream_optimizer": (c.c_int, [vp, sz, c.c_int, cp, cp, vp, u64, c.c_int64, cp, sz]),
        "gradprec_stream_close": (c.c_int, [vp, cp, sz, c.POINTER(vp), c.POINTER(c.c_void_p), cp, sz]),
        "gradprec_stream_text_free": (None, [vp]),
        "gradprec_stream_discard": (None, [vp]),
    }
    for name, sig in stream.items():
        if hasattr(lib, name):
            sigs[name] = sig
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


_lib = None
_path = None


def lib():
    """The loaded library (loaded on first use). Raises GradprecError when none is found
    or its API version differs from this package's."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    for origin, path in _candidates():
        if not os.path.isfile(path):
            tried.append("%s (%s: not found)" % (path, origin))
            continue
        try:
            handle = ctypes.CDLL(path)
            _declare(handle)
        except (OSError, AttributeError) as e:
            raise GradprecError(3, "%s: cannot load: %s" % (path, e)) from None
        v = handle.gradprec_api_version()
        if v != API_VERSION:
            raise GradprecError(3, "%s: API version %d, this package needs %d" % (path, v, API_VERSION))
        # A device-memory plugin's worker is this interpreter started afresh (CUDA cannot
        # be used in a child forked after torch, say, initialised it): docs/plugins.md.
        interp = os.environ.get("GP_PYTHON") or sys.executable
        if interp:
            argv = (ctypes.c_char_p * 4)(os.fsencode(interp), b"-m", b"gradprec._serve", None)
            handle.gradprec_set_worker_program(argv)
        _lib, _path = handle, path
        return _lib
    raise GradprecError(
        3,
        "libgradprec.so not found; build it (cmake --build build) or set GRADPREC_LIB. Tried: "
        + "; ".join(tried),
    )


def path():
    """The file the library was loaded from (loads it if needed)."""
    lib()
    return _path


_vocab = {}


def vocab(kind):
    """The names of one of the library's vocabularies (kernels/gp_vocab.h), in the order of
    their values (the plugin ABI's): kind "format", "rounding", "acc_rounding",
    "adamw_variant", "adamw_evaluation", "state" (optimizer state storage: "plain", then
    the low-bit states), "metric" (report order) or "mechanism" (the verdict's precedence).
    A tuple of str; loads the library."""
    if kind not in _vocab:
        out = []
        while True:
            name = lib().gradprec_vocab_name(kind.encode(), len(out))
            if name is None:
                break
            out.append(name.decode())
        if not out:
            raise GradprecError(3, "the library has no vocabulary %r" % kind)
        _vocab[kind] = tuple(out)
    return _vocab[kind]


def format_bytes(fmt):
    """Storage bytes of the format whose value is fmt (an index of vocab("format"))."""
    return lib().gradprec_format_bits(fmt) // 8
