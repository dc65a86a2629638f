#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, skipping whatever is
# already there, so `make test` works from a clean clone. `make run` never
# runs this: it needs only Go, a C compiler and the model.
#
#   setup.sh [VENV]   VENV: the virtual environment for the Python test
#                     tools (default .venv, inside the repository)
#
# The Python packages go into VENV, never into the system Python: Debian's
# python3 refuses pip installs there (externally-managed-environment), and a
# test run should change nothing outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.venv}

apt_needed=()
command -v gcc >/dev/null || apt_needed+=(gcc)
# The C++ wrapper's test and `make test-install` (pkg-config finds the installed files).
command -v g++ >/dev/null || apt_needed+=(g++)
command -v pkg-config >/dev/null || apt_needed+=(pkg-config)
command -v make >/dev/null || apt_needed+=(make)
command -v valgrind >/dev/null || apt_needed+=(valgrind)
command -v unzip >/dev/null || apt_needed+=(unzip)
# make test-serve streams from lmstream-serve with curl, as its users do.
command -v curl >/dev/null || apt_needed+=(curl)
# ... and puts two of them behind nginx (Debian's package) as one pool.
{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null || apt_needed+=(nginx)
command -v python3 >/dev/null || apt_needed+=(python3)
# venv needs ensurepip, which Debian splits off into python3-venv.
if [ ! -x "$venv/bin/python" ] && ! python3 -c "import ensurepip" 2>/dev/null; then
  apt_needed+=(python3-venv)
fi
# The Elixir binding: mix and the erl_nif headers (Hex is not used).
command -v mix >/dev/null || apt_needed+=(elixir)
[ -f /usr/lib/erlang/usr/include/erl_nif.h ] || ls /usr/lib/erlang/erts-*/include/erl_nif.h >/dev/null 2>&1 || apt_needed+=(erlang-dev)
if [ ${#apt_needed[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${apt_needed[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_needed[@]}"
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the virtual environment $venv"
  python3 -m venv "$venv"
fi
py="$venv/bin/python"

# pytest runs the Python suites; tokenizers, gguf and regex are the independent
# oracles the tokenizer parity tests compare against; jinja2 cross-checks the
# chat templates (core/chat, through the python3 first on PATH).
py_needed=()
"$py" -c "import pytest" 2>/dev/null || py_needed+=(pytest)
"$py" -c "import tokenizers" 2>/dev/null || py_needed+=(tokenizers)
"$py" -c "import gguf" 2>/dev/null || py_needed+=(gguf)
"$py" -c "import regex" 2>/dev/null || py_needed+=(regex)
"$py" -c "import jinja2" 2>/dev/null || py_needed+=(jinja2)
# jsonschema validates structured output independently of the converter.
"$py" -c "import jsonschema" 2>/dev/null || py_needed+=(jsonschema)
# ruff and mypy check the Python package (make lint).
"$py" -c "import ruff" 2>/dev/null || py_needed+=(ruff)
"$py" -c "import mypy" 2>/dev/null || py_needed+=(mypy)
# openai is the client make test-serve streams from lmstream-serve with.
"$py" -c "import openai" 2>/dev/null || py_needed+=(openai)
# The OpenAI Agents SDK drives a two-tool task against lmstream-serve
# (tests/serve/test_tools.py): an agent framework as users run one.
"$py" -c "import agents" 2>/dev/null || py_needed+=(openai-agents)
# ray[serve] runs lmstream.Runtime replicas as a Ray Serve deployment
# (tests/serve/test_ray_serve.py, examples/ray_serve.py) on a local Ray.
"$py" -c "import ray.serve" 2>/dev/null || py_needed+=("ray[serve]")
# NVRTC (CUDA 13) for the CUDA kernels' compile tests; no GPU is needed. The
# Go tests find it through $VIRTUAL_ENV (the Makefile sets it).
"$py" -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1 || py_needed+=(nvidia-cuda-nvrtc)
if [ ${#py_needed[@]} -gt 0 ]; then
  echo "setup: installing PyPI packages into $venv: ${py_needed[*]}"
  "$py" -m pip install -q "${py_needed[@]}"
fi

go mod download
