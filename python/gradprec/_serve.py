"""The worker side of `gradprec run --backend python:MODULE:NAME`: gradprec forks a worker
process that execs `$GP_PYTHON -m gradprec._serve MODULE:NAME FD` (docs/python.md).
`plugin:PATH FD` instead serves a device-memory C plugin for a Python host
(gradprec_set_worker_program, docs/plugins.md): libgradprec's gradprec_serve_plugin. This
imports MODULE, takes NAME (a class or a factory is called with no arguments; any other
object is the backend itself), and serves its table (gradprec._plugin) on the socket FD
through libgradprec's gradprec_serve until gradprec closes it. A module or name that
cannot be loaded, or an object that is no backend, is refused with one line (gradprec
prints it and exits 2); an exception inside a method reaches gradprec as one line (exit 3).
"""
import ctypes
import importlib
import sys


def load_backend(spec):
    """The backend object named by "MODULE:NAME" (NAME may be dotted: a class attribute).
    Raises ValueError with one line when it cannot be had."""
    mod_name, sep, name = spec.rpartition(":")
    if not sep or not mod_name or not name:
        raise ValueError("expected MODULE:NAME, got %r" % spec)
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # ImportError, or the module raised while importing
        raise ValueError("cannot import module %s: %s: %s" % (mod_name, type(e).__name__, e)) from None
    obj = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ValueError("module %s has no attribute %s" % (mod_name, name))
        obj = getattr(obj, part)
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "adamw")):
        try:
            obj = obj()
        except Exception as e:
            raise ValueError("%s:%s() raised %s: %s" % (mod_name, name, type(e).__name__, e)) from None
    return obj


def main(argv):
    from . import _lib, _plugin

    if len(argv) != 2:
        sys.stderr.write("usage: python -m gradprec._serve MODULE:NAME|plugin:PATH FD (started by gradprec)\n")
        return 2
    spec, fd = argv[0], int(argv[1])
    lib = _lib.lib()
    if spec.startswith("plugin:"):  # a device-memory C plugin: libgradprec serves it
        rc = lib.gradprec_serve_plugin(fd, spec[len("plugin:"):].encode())
        return 0 if rc in (0, 2) else rc
    pb = None
    refusal = None
    try:
        pb = _plugin.PythonBackend(load_backend(spec), label="python:" + spec)
    except (ValueError, TypeError) as e:
        refusal = " ".join(str(e).split())
    table = ctypes.byref(pb.table) if pb else None
    rc = lib.gradprec_serve(fd, table, refusal.encode() if refusal else None, pb.fault if pb else None,
                            len(pb.fault) if pb else 0)
    return 0 if rc in (0, 2) else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
