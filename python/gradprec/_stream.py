"""gradprec.Stream: the streaming C API (include/gradprec.h, gradprec_stream_*) from
Python: a scenario skeleton, then per optimizer step each micro-batch's gradients and
tokens and the optimizer's state before and after; close() runs the step as the one-step
scenario a replay of it would be (the C loader and runner of `gradprec run`) and returns
a RunResult. Arrays are passed as (format name, address, element count): a torch tensor's
data_ptr(), a numpy array's ctypes.data; they are copied during the call. Nothing is
written to disk. docs/monitor.md, "The streaming C API"."""
import ctypes

from . import _lib, _yaml
from ._errors import GradprecError

_ERRLEN = 1024


class Stream:
    """A streaming session; `skeleton` is a scenario dict or YAML text (gradprec.h,
    gradprec_stream_open, says what it holds)."""

    _h = None

    def __init__(self, skeleton, backend="cpu", jobs=1):
        lib = _lib.lib()
        if not hasattr(lib, "gradprec_stream_open") or lib.gradprec_api_minor() < 1:
            raise GradprecError(3, "%s: no streaming API (API minor 1); rebuild libgradprec.so" % _lib.path())
        self._lib = lib
        self._err = ctypes.create_string_buffer(_ERRLEN)
        text = (_yaml.dump(skeleton) if isinstance(skeleton, dict) else skeleton).encode()
        self._h = lib.gradprec_stream_open(text, len(text), backend.encode(), jobs, self._err, _ERRLEN)
        if not self._h:
            raise GradprecError(2, self._msg())
        n = lib.gradprec_stream_tensor_count(self._h)
        self.names = [lib.gradprec_stream_tensor_name(self._h, t).decode() for t in range(n)]
        self.sizes = [lib.gradprec_stream_tensor_size(self._h, t) for t in range(n)]
        self.fed = [lib.gradprec_stream_tensor_fed(self._h, t) for t in range(n)]

    def _msg(self):
        return self._err.value.decode("utf-8", "replace")

    def _check(self, rc):
        if rc != 0:
            raise GradprecError(rc, self._msg())

    def indices(self, t):
        """Tensor t's sampled elements (a list of increasing ints), None when fed whole."""
        p = self._lib.gradprec_stream_tensor_indices(self._h, t)
        return None if not p else p[: self.fed[t]]

    def indices_buffer(self, t):
        """The same as a ctypes array of uint64 (shared with the session; for frombuffer)."""
        p = self._lib.gradprec_stream_tensor_indices(self._h, t)
        return None if not p else (ctypes.c_uint64 * self.fed[t]).from_address(ctypes.addressof(p.contents))

    def grad(self, t, fmt, addr, n):
        self._check(self._lib.gradprec_stream_grad(self._h, t, fmt.encode(), addr, n, self._err, _ERRLEN))

    def tokens(self, n):
        self._check(self._lib.gradprec_stream_tokens(self._h, n, self._err, _ERRLEN))

    def optimizer(self, t, after, what, fmt, addr, n, step=0):
        self._check(self._lib.gradprec_stream_optimizer(self._h, t, 1 if after else 0, what.encode(), fmt.encode(),
                                                        addr, n, step, self._err, _ERRLEN))

    def close(self, overrides=None, out_dir=None):
        """Closes the step and runs it: a RunResult (one scenario). overrides: a dict (or
        YAML text) of the step's own settings merged over the skeleton."""
        from . import _result

        text = b""
        if overrides:
            text = (_yaml.dump(overrides) if isinstance(overrides, dict) else overrides).encode()
        res, scen = ctypes.c_void_p(), ctypes.c_void_p()
        rc = self._lib.gradprec_stream_close(self._h, text or None, len(text), ctypes.byref(res), ctypes.byref(scen),
                                             self._err, _ERRLEN)
        self.scenario = ctypes.string_at(scen.value).decode() if scen.value else None
        self._lib.gradprec_stream_text_free(scen)
        self._check(rc)
        try:
            return _result(self._lib, res, out_dir, self._err)
        finally:
            self._lib.gradprec_result_free(res)

    def discard(self):
        """Drops the step being fed (a failed training step)."""
        self._lib.gradprec_stream_discard(self._h)

    def free(self):
        """Frees the session (and a step being fed); closing it again is a no-op."""
        if self._h:
            self._lib.gradprec_stream_free(self._h)
            self._h = None

    __del__ = free
