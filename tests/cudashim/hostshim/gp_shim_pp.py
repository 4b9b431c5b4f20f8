#!/usr/bin/env python3
"""gp_shim_pp.py — turns a CUDA source into host C++ for the launch shim (see README.md here).

Usage: gp_shim_pp.py IN.cu OUT.cpp

Three rewrites, each on its own line (no line is added or removed, and a #line directive
names the original file, so compiler messages and __FILE__/__LINE__ point at the .cu):
  kernel<<<grid, block[, shmem[, stream]]>>>(args)
      -> gp_shim_launch(kernel, "kernel", __FILE__, __LINE__, grid, block[, shmem[, stream]])(args)
  [static] __device__|__constant__ T name[DIMS];  (a device variable at file scope)
      -> [static] T (&name)[DIMS] = gp_shim_symbol<T[DIMS]>("name", __FILE__, __LINE__);
  __shared__ T name[N];                              (inside a kernel)
      -> __shared__ T name[N]; gp_shim_shared_seen(&name, sizeof name);
Anything else is copied as it is. Exit 2 with one line on a construct it cannot rewrite."""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEVVAR = re.compile(r"^(\s*)(static\s+)?(?:__device__|__constant__)\s+(static\s+)?([^;(){}=]*?[\w>*&\s])\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*);\s*(//.*|/\*.*\*/)?\s*$")
SHARED = re.compile(r"__shared__\s+[^;(){}=]*?\b([A-Za-z_]\w*)\s*(\[[^;]*\])?\s*;")


def callee_start(line, end):
    """Index where the launched expression ending at line[:end] begins: an identifier,
    optionally qualified (a::b) and with template arguments (k<T, 4>)."""
    i = end
    while i > 0 and line[i - 1] in " \t":
        i -= 1
    while True:
        if i > 0 and line[i - 1] == ">":          # template arguments: balance <...>
            depth, j = 0, i - 1
            while j >= 0:
                if line[j] == ">":
                    depth += 1
                elif line[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            if j < 0:
                return -1
            i = j
        j = i
        while j > 0 and (line[j - 1].isalnum() or line[j - 1] == "_"):
            j -= 1
        if j == i or not IDENT.match(line[j:i]):
            return -1
        i = j
        if line[max(0, i - 2):i] == "::":
            i -= 2
            continue
        return i


def rewrite_launches(line, where):
    out = ""
    while True:
        k = line.find("<<<")
        if k < 0:
            return out + line
        close = line.find(">>>", k)
        if close < 0:
            sys.exit(f"{where}: a launch's <<< ... >>> must be on one line")
        s = callee_start(line, k)
        if s < 0:
            sys.exit(f"{where}: cannot find the kernel launched before <<<")
        callee = line[s:k].strip()
        cfg = line[k + 3:close]
        rest = line[close + 3:].lstrip()
        if not rest.startswith("("):
            sys.exit(f"{where}: expected '(' after >>>")
        name = callee.replace('"', "")
        out += line[:s] + f'gp_shim_launch({callee}, "{name}", __FILE__, __LINE__, {cfg})'
        line = rest


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: gp_shim_pp.py IN.cu OUT.cpp\n")
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    try:
        with open(src, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        sys.stderr.write(f"{src}: cannot read: {e.strerror}\n")
        return 2
    out = ['#line 1 "' + src.replace("\\", "\\\\").replace('"', '\\"') + '"']
    depth = 0  # brace depth: device variables are rewritten at file scope only
    for n, line in enumerate(lines, 1):
        where = f"{src}:{n}"
        m = DEVVAR.match(line) if depth == 0 else None
        if m:
            ind, st1, st2, typ, name = m.group(1), m.group(2), m.group(3), m.group(4).strip(), m.group(5)
            dims = m.group(6).replace(" ", "")
            st = "static " if (st1 or st2) else ""
            ref = f"(&{name}){dims}" if dims else f"&{name}"
            line = f'{ind}{st}{typ} {ref} = gp_shim_symbol<{typ}{dims}>("{name}", __FILE__, __LINE__);'
        elif "__shared__" in line:
            m = SHARED.search(line)
            if not m or "extern" in line:
                sys.exit(f"{where}: only '__shared__ T name[N];' on one line is supported")
            line = line[:m.end()] + f" gp_shim_shared_seen(&{m.group(1)}, sizeof {m.group(1)});" + line[m.end():]
        elif "<<<" in line:
            line = rewrite_launches(line, where)
        code = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'|//.*', "", line)
        depth += code.count("{") - code.count("}")
        out.append(line)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        with open(dst, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
    except OSError as e:
        sys.stderr.write(f"{dst}: cannot write: {e.strerror}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
