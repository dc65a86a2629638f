#!/usr/bin/env bash
# Installs what building and testing lmstream needs on a fresh Debian machine,
# skipping whatever is already there, so `make test` works from a clean clone.
set -euo pipefail
cd "$(dirname "$0")/../.."

apt_needed=()
command -v gcc >/dev/null || apt_needed+=(gcc)
# The C++ wrapper's test and `make test-install` (pkg-config finds the installed files).
command -v g++ >/dev/null || apt_needed+=(g++)
command -v pkg-config >/dev/null || apt_needed+=(pkg-config)
command -v make >/dev/null || apt_needed+=(make)
command -v valgrind >/dev/null || apt_needed+=(valgrind)
command -v unzip >/dev/null || apt_needed+=(unzip)
command -v python3 >/dev/null || apt_needed+=(python3 python3-pip)
# The Elixir binding: mix and the erl_nif headers (Hex is not used).
command -v mix >/dev/null || apt_needed+=(elixir)
[ -f /usr/lib/erlang/usr/include/erl_nif.h ] || ls /usr/lib/erlang/erts-*/include/erl_nif.h >/dev/null 2>&1 || apt_needed+=(erlang-dev)
if [ ${#apt_needed[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${apt_needed[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_needed[@]}"
fi

# pytest runs the Python suites; tokenizers, gguf and regex are the independent
# oracles the tokenizer parity tests compare against.
py_needed=()
python3 -c "import pytest" 2>/dev/null || py_needed+=(pytest)
python3 -c "import tokenizers" 2>/dev/null || py_needed+=(tokenizers)
python3 -c "import gguf" 2>/dev/null || py_needed+=(gguf)
python3 -c "import regex" 2>/dev/null || py_needed+=(regex)
# NVRTC (CUDA 13) for the CUDA kernels' compile tests; no GPU is needed.
python3 -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1 || py_needed+=(nvidia-cuda-nvrtc)
if [ ${#py_needed[@]} -gt 0 ]; then
  echo "setup: installing PyPI packages: ${py_needed[*]}"
  python3 -m pip install -q "${py_needed[@]}"
fi

go mod download
