#!/usr/bin/env python3
"""gp_mutate.py — plants one bug in a copy of a source: gp_mutate.py IN OUT OLD NEW writes IN
with the text OLD replaced by NEW. OLD must occur exactly once (else exit 2 with one line),
so a mutant can never silently equal the original after the source changes."""
import os
import sys

if len(sys.argv) != 5:
    sys.exit("usage: gp_mutate.py IN OUT OLD NEW")
src, dst, old, new = sys.argv[1:]
text = open(src, encoding="utf-8").read()
if text.count(old) != 1:
    sys.exit(f"{src}: the text to mutate occurs {text.count(old)} times, expected once: {old!r}")
os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
with open(dst, "w", encoding="utf-8") as f:
    f.write(text.replace(old, new))
