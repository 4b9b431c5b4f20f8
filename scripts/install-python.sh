#!/usr/bin/env bash
# Creates the project-local virtual environment .venv/ (gitignored) for gradprec's Python
# package and its tests: numpy, safetensors, torch (PyPI's default wheel), pytest, the
# third-party optimizers tested as subjects (torch-optimi, torchao, bitsandbytes and its
# one other dependency, packaging; ml_dtypes, an oracle of the scaled formats; installed
# without their dependencies so that torch is
# never replaced), tensorboard (the monitor's
# SummaryWriter), jsonschema (tests/report.schema.json), and ./python itself. Idempotent: what is already installed is kept (torch is large), only
# ./python is reinstalled, offline. GP_VENV=DIR picks another folder, PYTHON=... the
# interpreter (default: Debian's python3, whose venv module scripts/install-deps.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${GP_VENV:-.venv}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "install-python: creating $venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$venv"
fi
py="$venv/bin/python"

# pip without its cache (--no-cache-dir: the cache would hold a second copy of the wheels,
# about 2.7 GB with torch's CUDA libraries) and with its temporary folder on whichever of
# $TMPDIR and the venv's file system has more room: CI stop 37 ran out of space in this
# step. Measured on a fresh venv: 8.5 GB at the peak with every wheel held to the end, the
# venv's own 5.9 GB installing one distribution at a time (docs/python.md). A failed pip
# says how much room each folder had.
tmp_default="${TMPDIR:-/tmp}"
free_kb() { df -Pk "$1" 2>/dev/null | awk 'NR==2 {print $4}'; }
pip_tmp="$tmp_default"
if [ "$(free_kb "$venv")" -gt "$(free_kb "$tmp_default")" ] 2>/dev/null; then
  pip_tmp="$venv/.pip-tmp"
  mkdir -p "$pip_tmp"
  trap 'rm -rf "$venv/.pip-tmp"' EXIT
fi
pip_install() {
  if ! TMPDIR="$pip_tmp" "$py" -m pip install --disable-pip-version-check --no-cache-dir -q "$@"; then
    echo "install-python: pip failed; free space: $venv $(( $(free_kb "$venv") / 1024 )) MiB," \
      "pip's temporary folder $pip_tmp $(( $(free_kb "$pip_tmp") / 1024 )) MiB" >&2
    exit 1
  fi
}

# Resolves the requirements once (pip --dry-run --report), then installs each resolved
# distribution alone (--no-deps): at most one wheel waits in the temporary folder at a time.
pip_install_each() {
  local report req
  report="$(mktemp "$pip_tmp/gp-resolve.XXXXXX")"
  TMPDIR="$pip_tmp" "$py" -m pip install --disable-pip-version-check --no-cache-dir -q \
    --dry-run --report "$report" "$@" || { rm -f "$report"; echo "install-python: pip could not resolve $*" >&2; exit 1; }
  for req in $("$py" -c 'import json, sys
for d in json.load(open(sys.argv[1]))["install"]:
    print(d["metadata"]["name"] + "==" + d["metadata"]["version"])' "$report"); do
    pip_install --no-deps "$req"
  done
  rm -f "$report"
}

# module name -> PyPI name; a module that imports is left as it is.
missing=()
for pair in numpy:numpy safetensors:safetensors torch:torch pytest:pytest setuptools:setuptools jsonschema:jsonschema; do
  mod="${pair%%:*}"
  if ! "$py" -c "import $mod" >/dev/null 2>&1; then missing+=("${pair##*:}"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-python: installing ${missing[*]} from PyPI"
  echo "install-python: free space for it: $(( $(free_kb "$venv") / 1024 )) MiB in $venv's file system, $(( $(free_kb "$pip_tmp") / 1024 )) MiB in $pip_tmp"
  pip_install_each "${missing[@]}"
else
  echo "install-python: numpy, safetensors, torch, pytest, jsonschema present in $venv"
fi

# Optimizers under test (tests/python/test_backends.py, test_lowbit.py): Python packages
# over torch; bitsandbytes' wheel carries its own CPU library (the 8-bit quantizer that
# optimizer.state: bnb8_blockwise models; docs/python.md, "Low-bit optimizers"); torchao
# and ml_dtypes are also the oracles of the scaled formats (tests/python/test_scaled_formats.py).
extra=()
for pair in optimi:torch-optimi torchao:torchao packaging:packaging bitsandbytes:bitsandbytes ml_dtypes:ml-dtypes; do
  mod="${pair%%:*}"
  if ! "$py" -c "import $mod" >/dev/null 2>&1; then extra+=("${pair##*:}"); fi
done
if [ ${#extra[@]} -gt 0 ]; then
  echo "install-python: installing ${extra[*]} from PyPI (--no-deps: torch stays as it is)"
  pip_install --no-deps "${extra[@]}"
fi

# TensorBoard for gradprec.torch.monitor(writer=SummaryWriter(...)) and its test
# (tests/python/test_monitor.py): with its dependencies (protobuf, grpcio, ...), none of
# which is torch.
if ! "$py" -c "import tensorboard" >/dev/null 2>&1; then
  echo "install-python: installing tensorboard from PyPI"
  pip_install_each tensorboard
fi

# The package itself: no network, no build isolation (the venv's setuptools builds it).
"$py" -m pip install --disable-pip-version-check -q --no-index --no-deps --no-build-isolation \
  --force-reinstall ./python
echo "install-python: gradprec installed in $venv ($("$py" -c 'import gradprec; print(gradprec.__file__)'))"
