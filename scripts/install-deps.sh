#!/usr/bin/env bash
# Installs, from Debian's packages, whatever gradprec needs and this machine lacks.
# Idempotent: packages already installed are left alone; nothing is installed when
# nothing is missing. Needs root (or sudo) only when something must be installed.
set -euo pipefail

pkgs=(
  build-essential cmake make pkg-config   # toolchain
  python3                                 # the CUDA host shim's source rewrite (tests/cudashim/hostshim)
  libmpfr-dev libgmp-dev                  # exact references and the rounding oracle
  libgsl-dev                              # input generators (distributions, RNG)
  libcmocka-dev                           # unit tests
  libyaml-dev                             # scenario files
  libjansson-dev                          # report.json and --json output
  clang libclang-rt-14-dev                # libFuzzer targets and sanitizer runtimes
  zip unzip                               # ClusterFuzzLite seed corpora (make fuzz-smoke)
  libxml2-utils                           # xmllint: the JUnit schema check in the tests
  chromium                                # headless rendering check of the HTML report
  python3-venv                            # the Python package's venv (scripts/install-python.sh)
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
