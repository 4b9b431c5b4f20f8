"""Backends written in Python: a gp_plugin table (kernels/gp_plugin_abi.h, ABI version 3)
whose entries are ctypes callbacks into a Python object. gradprec's runner calls them as it
calls any plugin; the arrays it passes are shown to the object as torch tensors that view
gradprec's memory (no copies). Nothing numeric happens here: the object's methods do the
arithmetic under test (the adapters in gradprec.torch call torch), gradprec judges it.

A backend object has methods named after the table's entries, each taking one argument
object (below) and returning None; `accumulate`, `unscale` and `adamw` are required,
`grad_sumsq`, `grad_scale` and `scaler_update` optional (absent: gradprec's CPU emulation
does that part and the report says so). `name` (optional) names it in reports.
Raise NotImplementedError for a configuration it does not implement (gradprec then refuses
the scenario: status 2); any other exception is the subject's failure (status 3, the line
names the entry and the exception).
"""
import ctypes
import threading

from ._lib import format_bytes, vocab

ABI_VERSION = 3
# The names of the ABI's values come from the library (kernels/gp_vocab.h): vocab("format")
# for GP_PLUGIN_FP32 ..., "acc_rounding", "adamw_variant", "adamw_evaluation", "state"
# (GP_PLUGIN_STATE_*: plain, then the low-bit states of optimizer.state).
_VOCAB = {"FORMATS": "format", "ROUNDINGS": "acc_rounding", "VARIANTS": "adamw_variant",
          "EVALUATIONS": "adamw_evaluation", "STATES": "state"}


def __getattr__(name):  # FORMATS, ROUNDINGS, VARIANTS, EVALUATIONS, STATES: the library's lists
    if name in _VOCAB:
        return vocab(_VOCAB[name])
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _name(kind, i):
    names = vocab(kind)
    return names[i] if 0 <= i < len(names) else i

_u32, _i32, _u64, _i64, _vp = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p


class AccumulateArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("grad_format", _i32), ("acc_format", _i32), ("rounding", _i32),
                ("ftz", _i32), ("seed", _u64), ("stream", _u64), ("first_index", _u64), ("n", _u64),
                ("microbatch", _u32), ("grad", _vp), ("acc", _vp), ("comp", _vp)]


class UnscaleArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("acc_format", _i32), ("ftz", _i32), ("inv_scale", ctypes.c_float),
                ("n", _u64), ("acc", _vp), ("found_inf", _i32)]


class AdamwArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("param_format", _i32), ("state_format", _i32), ("grad_format", _i32),
                ("variant", _i32), ("rounding", _i32), ("lr", ctypes.c_double), ("beta1", ctypes.c_double),
                ("beta2", ctypes.c_double), ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("step", _i64), ("inv_scale", ctypes.c_float), ("found_inf", ctypes.POINTER(_i32)),
                ("seed", _u64), ("stream", _u64), ("first_index", _u64), ("n", _u64), ("grad", _vp),
                ("param", _vp), ("master", _vp), ("comp", _vp), ("m", _vp), ("v", _vp), ("evaluation", _i32),
                ("state_quant", _i32), ("block", _i32), ("m_codes", _vp), ("v_codes", _vp), ("m_scales", _vp),
                ("v_scales", _vp)]


class SumsqArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("format", _i32), ("n", _u64), ("grad", _vp), ("sumsq", ctypes.c_float)]


class ScaleArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("format", _i32), ("ftz", _i32), ("coef", ctypes.c_float), ("n", _u64),
                ("grad", _vp)]


class ScalerArgs(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("scale", ctypes.POINTER(ctypes.c_float)), ("tracker", ctypes.POINTER(_i32)),
                ("found_inf", ctypes.POINTER(_i32)), ("growth", ctypes.c_double), ("backoff", ctypes.c_double),
                ("interval", _i32)]


_ACC_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(AccumulateArgs))
_UNS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(UnscaleArgs))
_ADAM_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(AdamwArgs))
_SSQ_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(SumsqArgs))
_SCALE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ScaleArgs))
_SCALER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ScalerArgs))
_MANY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(AccumulateArgs), ctypes.c_uint32)


class Table(ctypes.Structure):
    _fields_ = [("abi_version", _u32), ("name", ctypes.c_char_p), ("memory", _u32), ("accumulate", _ACC_FN),
                ("unscale", _UNS_FN), ("adamw", _ADAM_FN), ("grad_sumsq", _SSQ_FN), ("grad_scale", _SCALE_FN),
                ("scaler_update", _SCALER_FN), ("accumulate_many", _MANY_FN)]


def _torch():
    import torch  # only a backend needs torch; `import gradprec` does not

    return torch


_DTYPES = None


def tensor_at(address, fmt, n):
    """A 1-D torch tensor of n elements of gradprec format `fmt` (an index of FORMATS)
    viewing the memory at `address` (no copy; writes go to gradprec's array). bf16 and
    fp16 are torch.bfloat16 / torch.float16, fp8 torch.float8_e4m3fn / float8_e5m2.
    None for a NULL address; NotImplementedError for a format torch has no dtype of."""
    global _DTYPES
    torch = _torch()
    if _DTYPES is None:  # torch's dtype of each gradprec format name
        _DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
                   "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
    if not address:
        return None
    name = _name("format", fmt)
    if name not in _DTYPES:
        raise NotImplementedError("format %s has no torch dtype here" % name)
    if n == 0:
        return torch.empty(0, dtype=_DTYPES[name])
    buf = (ctypes.c_uint8 * (n * format_bytes(fmt))).from_address(address)
    return torch.frombuffer(buf, dtype=_DTYPES[name])


class _Args:
    """What a backend method receives: the call's fields as attributes (formats, rounding,
    variant and evaluation as names: "bf16", "rne", "plain", "torch_cpu"), arrays as
    tensors viewing gradprec's memory. `raw` is the ctypes struct itself."""

    def __init__(self, raw, **kw):
        self.raw = raw
        self.__dict__.update(kw)

    def __repr__(self):
        keys = ", ".join("%s=%r" % (k, v) for k, v in self.__dict__.items() if k != "raw" and not hasattr(v, "shape"))
        return "Args(%s)" % keys


def _accumulate_args(a):
    n = a.n
    return _Args(a, grad_format=_name("format", a.grad_format), acc_format=_name("format", a.acc_format),
                 rounding=_name("acc_rounding", a.rounding), ftz=bool(a.ftz), seed=a.seed, stream=a.stream,
                 first_index=a.first_index, n=n, microbatch=a.microbatch,
                 grad=tensor_at(a.grad, a.grad_format, n), acc=tensor_at(a.acc, a.acc_format, n),
                 comp=tensor_at(a.comp, a.acc_format, n))


def _unscale_args(a):
    return _Args(a, acc_format=_name("format", a.acc_format), ftz=bool(a.ftz), inv_scale=a.inv_scale, n=a.n,
                 acc=tensor_at(a.acc, a.acc_format, a.n), found_inf=False)


def _bytes_at(address, n, dtype):
    """n elements of torch dtype `dtype` viewing the memory at address (None when NULL)."""
    torch = _torch()
    if not address:
        return None
    if n == 0:
        return torch.empty(0, dtype=dtype)
    width = torch.empty(0, dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_uint8 * (n * width)).from_address(address), dtype=dtype)


def _adamw_args(a):
    """The adamw call. With a low-bit optimizer state (state_quant != 0), state_format is
    the state's name ("bnb8_blockwise", ...), m and v (also named m_codes, v_codes) are the
    library's codes (uint8, n: one per element) and m_scales / v_scales (fp32, n / block)
    its block scales, all updated in place: an AdamW that expects m and v in a float dtype
    sees uint8 and refuses, as it should."""
    n = a.n
    full = a.struct_size >= ctypes.sizeof(AdamwArgs)
    ev = a.evaluation if full else 0
    quant = a.state_quant if full and 0 < a.state_quant < len(vocab("state")) else 0
    torch = _torch() if quant else None
    extra = {}
    if quant:
        nb = n // a.block if a.block > 0 else 0
        extra = dict(block=a.block, m_codes=_bytes_at(a.m_codes, n, torch.uint8),
                     v_codes=_bytes_at(a.v_codes, n, torch.uint8), m_scales=_bytes_at(a.m_scales, nb, torch.float32),
                     v_scales=_bytes_at(a.v_scales, nb, torch.float32))
    return _Args(a, param_format=_name("format", a.param_format),
                 state_format=_name("state", quant) if quant else _name("format", a.state_format), **extra,
                 grad_format=_name("format", a.grad_format),
                 variant=_name("adamw_variant", a.variant),
                 rounding=_name("acc_rounding", a.rounding), lr=a.lr, beta1=a.beta1, beta2=a.beta2, eps=a.eps,
                 weight_decay=a.weight_decay, step=a.step, inv_scale=a.inv_scale,
                 found_inf=bool(a.found_inf[0]), seed=a.seed, stream=a.stream, first_index=a.first_index, n=n,
                 evaluation=_name("adamw_evaluation", ev),
                 grad=tensor_at(a.grad, a.grad_format, n), param=tensor_at(a.param, a.param_format, n),
                 master=tensor_at(a.master, 0, n), comp=tensor_at(a.comp, a.param_format, n),
                 m=extra["m_codes"] if quant else tensor_at(a.m, a.state_format, n),
                 v=extra["v_codes"] if quant else tensor_at(a.v, a.state_format, n))


def _sumsq_args(a):
    return _Args(a, format=_name("format", a.format), n=a.n, grad=tensor_at(a.grad, a.format, a.n), sumsq=None)


def _scale_args(a):
    return _Args(a, format=_name("format", a.format), ftz=bool(a.ftz), coef=a.coef, n=a.n,
                 grad=tensor_at(a.grad, a.format, a.n))


def _scaler_args(a):
    torch = _torch()
    return _Args(a, scale=torch.frombuffer((ctypes.c_float * 1).from_address(ctypes.addressof(a.scale.contents)),
                                           dtype=torch.float32),
                 tracker=torch.frombuffer((_i32 * 1).from_address(ctypes.addressof(a.tracker.contents)),
                                          dtype=torch.int32),
                 found_inf=bool(a.found_inf[0]), growth=a.growth, backoff=a.backoff, interval=a.interval)


class PythonBackend:
    """The gp_plugin table of a Python backend object `obj` (kept alive with it).
    `table` is the ctypes struct; pass ctypes.byref(pb.table) where gradprec wants a
    `const struct gp_plugin *`. The first exception a method raises (other than
    NotImplementedError) is kept in `error` as one line; `fault` is a buffer that
    line is also written to (gradprec_serve passes it to the parent process)."""

    def __init__(self, obj, label=None):
        for need in ("accumulate", "unscale", "adamw"):
            if not callable(getattr(obj, need, None)):
                raise TypeError("%s: a backend needs the methods accumulate, unscale and adamw (no %s)"
                                % (label or type(obj).__name__, need))
        self.obj = obj
        self.label = label or getattr(obj, "name", None) or type(obj).__name__
        self.error = None
        self.refusal = None  # the first NotImplementedError's message ("entry: why")
        self.fault = ctypes.create_string_buffer(512)
        self._lock = threading.Lock()
        self._name = str(self.label).encode()
        t = Table()
        t.abi_version = ABI_VERSION
        t.name = self._name
        t.memory = 0
        t.accumulate = _ACC_FN(self._wrap("accumulate", _accumulate_args))
        t.unscale = _UNS_FN(self._wrap("unscale", _unscale_args, out=self._unscale_out))
        t.adamw = _ADAM_FN(self._wrap("adamw", _adamw_args))
        if callable(getattr(obj, "grad_sumsq", None)):
            t.grad_sumsq = _SSQ_FN(self._wrap("grad_sumsq", _sumsq_args, out=self._sumsq_out))
        if callable(getattr(obj, "grad_scale", None)):
            t.grad_scale = _SCALE_FN(self._wrap("grad_scale", _scale_args))
        if callable(getattr(obj, "scaler_update", None)):
            t.scaler_update = _SCALER_FN(self._wrap("scaler_update", _scaler_args))
        self.table = t

    @staticmethod
    def _unscale_out(raw, args, ret):
        if args.found_inf or ret:
            raw.found_inf = 1

    @staticmethod
    def _sumsq_out(raw, args, ret):
        v = ret if ret is not None else args.sumsq
        if v is None:
            raise TypeError("grad_sumsq must return the sum of squares (or set args.sumsq)")
        raw.sumsq = float(v)

    def _wrap(self, entry, make, out=None):
        method = getattr(self.obj, entry)

        def call(p):
            try:
                args = make(p.contents)
                ret = method(args)
                if out:
                    out(p.contents, args, ret)
                return 0
            except NotImplementedError as e:
                why = "%s: %s" % (entry, " ".join(str(e).split())) if str(e) else None
                with self._lock:
                    if self.refusal is None and why:
                        self.refusal = why
                if why:  # through a worker (`gradprec run --backend python:...`): the reason travels
                    self.fault.value = why.encode("utf-8", "replace")[:500]
                return 1
            except BaseException as e:  # the subject's failure: report it, never unwind into C
                line = "backend %s: %s raised %s: %s" % (self.label, entry, type(e).__name__, e)
                line = " ".join(line.split())[:500]
                with self._lock:
                    if self.error is None:
                        self.error = line
                self.fault.value = line.encode("utf-8", "replace")[:500]
                return 2

        return call
