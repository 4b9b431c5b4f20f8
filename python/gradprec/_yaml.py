"""Writes scenario YAML from plain Python values (dict, list, str, int, float, bool), so
that neither `run(dict)` nor the capture needs a YAML library. Mappings and lists are
written in block style; strings double-quoted (JSON escapes are valid YAML); floats as
repr (shortest round-trip decimal), never NaN or inf (gradprec refuses them)."""
import json
import math


def _scalar(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("%s: %r is not a finite number (gradprec refuses NaN and inf)" % (where, v))
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    raise TypeError("%s: cannot write %s to a scenario" % (where, type(v).__name__))


def _inline(v, where):
    """A flow-style rendering for short lists of scalars (e.g. tokens, betas)."""
    return "[" + ", ".join(_scalar(x, "%s[%d]" % (where, i)) for i, x in enumerate(v)) + "]"


def _emit(v, indent, where, out):
    pad = "  " * indent
    if isinstance(v, dict):
        for k, x in v.items():
            key = str(k)
            w = "%s.%s" % (where, key) if where else key
            if isinstance(x, dict) and x:
                out.append("%s%s:" % (pad, key))
                _emit(x, indent + 1, w, out)
            elif isinstance(x, dict):
                out.append("%s%s: {}" % (pad, key))
            elif isinstance(x, (list, tuple)) and x and any(isinstance(e, (dict, list, tuple)) for e in x):
                out.append("%s%s:" % (pad, key))
                _emit(list(x), indent + 1, w, out)
            elif isinstance(x, (list, tuple)):
                out.append("%s%s: %s" % (pad, key, _inline(x, w)))
            else:
                out.append("%s%s: %s" % (pad, key, _scalar(x, w)))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            w = "%s[%d]" % (where, i)
            if isinstance(x, dict):
                sub = []
                _emit(x, indent + 1, w, sub)
                first = sub[0].lstrip() if sub else "{}"
                out.append("%s- %s" % (pad, first))
                out.extend(sub[1:])
            elif isinstance(x, (list, tuple)):
                out.append("%s- %s" % (pad, _inline(x, w)))
            else:
                out.append("%s- %s" % (pad, _scalar(x, w)))
    else:
        out.append(pad + _scalar(v, where))


def dump(doc, header=None):
    """YAML text for doc (a dict); header: comment lines put first."""
    if not isinstance(doc, dict):
        raise TypeError("a scenario is a mapping (dict), not %s" % type(doc).__name__)
    out = []
    for line in (header or "").splitlines():
        out.append("# " + line if line else "#")
    _emit(doc, 0, "", out)
    return "\n".join(out) + "\n"
