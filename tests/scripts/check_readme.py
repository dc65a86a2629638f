#!/usr/bin/env python3
"""Tests README.md as written: every fenced code block is compiled, run or
checked, so the README cannot drift from what works.

Each block is preceded by a tag, an HTML comment (invisible on GitHub)
saying how it is tested:

  <!-- example: examples/hello.c -->   the block is exactly that file, which
                                       is built and run (see EXAMPLES)
  <!-- make -->                        make command lines: each must be
                                       accepted by `make -n` (targets and
                                       variables exist); running them is what
                                       `make test` itself does
  <!-- pkg-config -->                  compile lines for an installed lmstream:
                                       run as written against the prefix of
                                       `make test-install`, with prog.c and
                                       prog.cpp being examples/hello.c(pp); the
                                       programs must then stream
  <!-- cli -->                         `python3 -m lmstream ...` lines: run
  <!-- runtime-config -->              a runtime config (JSON) the library
                                       must accept as a config: creating it
                                       may fail only for want of a device
                                       (LMS_ERR_BACKEND), never as bad JSON or
                                       a bad field
  <!-- checked-by: TARGET -->          commands exercised by `make TARGET`

Keeping snippets in examples/ (rather than extracting them) keeps them
ordinary files that compilers, linters and editors see; the exact-equality
check is what ties the README to them.

  check_readme.py README.md --prefix build/install-test/prefix [--python PY]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
# A model load and a short answer on a busy two-core machine, with margin;
# a run that blocks forever (waiting on a channel never attached) ends here.
TIMEOUT = 600
FAIL_TIMEOUT = 120

failures = []


def fail(msg):
    failures.append(msg)
    print(f"check-readme: FAIL: {msg}", file=sys.stderr)


def blocks(text):
    """(line number, tag, language, body) of every fenced block."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        body = "\n".join(lines[i + 1:j]) + "\n"
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        tag = None
        if k >= 0:
            t = re.match(r"^<!--\s*(.*?)\s*-->$", lines[k].strip())
            tag = t.group(1) if t else None
        out.append((start + 1, tag, lang, body))
        i = j + 1
    return out


def run(cmd, cwd=ROOT, env=None, timeout=TIMEOUT, shell=False):
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, shell=shell, errors="replace")
    except subprocess.TimeoutExpired:
        return None


def show(where, cmd, p, want_ok=True):
    """Reports p against the expectation; returns whether it met it."""
    what = cmd if isinstance(cmd, str) else shlex.join(cmd)
    if p is None:
        fail(f"{where}: `{what}` did not finish in time (blocked?)")
        return False
    if (p.returncode == 0) != want_ok:
        fail(f"{where}: `{what}` exited {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return False
    print(f"check-readme: {where}: `{what}` exited {p.returncode} as it should")
    return True


def py_env(python_path=True):
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_example(where, path, args):
    """Builds and runs one example: from the repository root it must stream
    an answer; from a directory without models/ it must fail, promptly."""
    ext = os.path.splitext(path)[1]
    src = os.path.join(ROOT, path)
    tmp = tempfile.mkdtemp(prefix="readme-")
    try:
        if ext in (".c", ".cpp"):
            exe = os.path.join(BUILD, "readme", os.path.basename(path) + ".bin")
            os.makedirs(os.path.dirname(exe), exist_ok=True)
            compiler = [os.environ.get("CC", "gcc"), "-std=c11"] if ext == ".c" else \
                [os.environ.get("CXX", "g++"), "-std=c++17"]
            cc = compiler + ["-O2", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"), src,
                             "-L" + BUILD, "-llmstream", "-Wl,-rpath," + BUILD, "-o", exe]
            if not show(where, cc, run(cc)):
                return
            cmd, env = [exe], None
        elif ext == ".py":
            cmd, env = [args.python, src], py_env()
        elif ext == ".exs":
            ebin = os.path.join(ROOT, "bindings", "elixir", "_build", "test", "lib", "lmstream", "ebin")
            cmd, env = ["elixir", "-pa", ebin, src], None
        else:
            fail(f"{where}: no way to run {path}")
            return
        p = run(cmd, env=env)
        if show(where, cmd, p) and not p.stdout.strip():
            fail(f"{where}: {path} printed no answer")
        # The same program where its relative model path finds nothing: a
        # clear error and a nonzero exit, never a wait without end.
        p = run(cmd, cwd=tmp, env=env, timeout=FAIL_TIMEOUT)
        if show(where + " (no model here)", cmd, p, want_ok=False) and "models/" not in p.stderr:
            fail(f"{where}: without a model, {path} does not name the missing file:\n{p.stderr[-1000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_make(where, body):
    for line in body.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = shlex.split(line)
        envs = [w for w in words if re.match(r"^[A-Z_]+=", w) and words.index(w) < words.index("make")] \
            if "make" in words else []
        if "make" not in words or words.index("make") != len(envs):
            fail(f"{where}: not a make command line: {line}")
            continue
        rest = words[len(envs) + 1:]
        cmd = ["make", "-n", "--no-print-directory"] + rest
        env = dict(os.environ, **dict(e.split("=", 1) for e in envs))
        show(where, "make -n " + shlex.join(rest), run(cmd, env=env, timeout=FAIL_TIMEOUT))


def check_pkg_config(where, body, prefix):
    if not prefix or not os.path.isdir(prefix):
        fail(f"{where}: no installed prefix to build against (run make test-install first)")
        return
    tmp = tempfile.mkdtemp(prefix="readme-pc-")
    try:
        shutil.copy(os.path.join(ROOT, "examples", "hello.c"), os.path.join(tmp, "prog.c"))
        shutil.copy(os.path.join(ROOT, "examples", "hello.cpp"), os.path.join(tmp, "prog.cpp"))
        os.symlink(os.path.join(ROOT, "models"), os.path.join(tmp, "models"))
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        env.pop("LD_LIBRARY_PATH", None)
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("export "):
                continue  # the README's own PKG_CONFIG_PATH line: set above for this prefix
            if line.startswith("LD_LIBRARY_PATH=") or line.startswith("./prog"):
                p = run(line, cwd=tmp, env=env, shell=True)
                if show(where, line, p) and not p.stdout.strip():
                    fail(f"{where}: `{line}` printed no answer")
                continue
            show(where, line, run(line, cwd=tmp, env=env, shell=True, timeout=FAIL_TIMEOUT))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_cli(where, body, args):
    for line in body.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = shlex.split(line)
        if words[:3] != ["python3", "-m", "lmstream"]:
            fail(f"{where}: not a python3 -m lmstream line: {line}")
            continue
        cmd = [args.python] + words[1:] + ["--max-tokens", "16"]
        p = run(cmd, cwd=os.path.join(ROOT, "bindings", "python"), env=py_env(False))
        if show(where, cmd, p) and not p.stdout.strip():
            fail(f"{where}: `{line}` printed no answer")


def check_config(where, body, args):
    try:
        json.loads(body)
    except ValueError as e:
        fail(f"{where}: not JSON: {e}")
        return
    code = ("import sys, lmstream\n"
            "from lmstream.errors import BackendError\n"
            "try:\n"
            "    lmstream.Runtime(**__import__('json').loads(sys.argv[1])).close()\n"
            "except BackendError as e:\n"
            "    print('no device:', e)\n")
    p = run([args.python, "-c", code, body], env=py_env())
    show(where, "create a runtime from the config", p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("readme")
    ap.add_argument("--prefix", help="an installed lmstream (make test-install)")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    with open(args.readme, encoding="utf-8") as f:
        text = f.read()
    found = blocks(text)
    if not found:
        fail("no code blocks found")
    for line, tag, lang, body in found:
        where = f"{os.path.basename(args.readme)}:{line}"
        if tag is None:
            fail(f"{where}: a ```{lang} block without a test tag (see tests/scripts/check_readme.py)")
        elif tag.startswith("example:"):
            path = tag.split(":", 1)[1].strip()
            try:
                with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                    want = f.read()
            except OSError as e:
                fail(f"{where}: {e}")
                continue
            if body != want:
                fail(f"{where}: the block differs from {path}; copy the file into the README")
                continue
            run_example(where, path, args)
        elif tag == "make":
            check_make(where, body)
        elif tag == "pkg-config":
            check_pkg_config(where, body, args.prefix)
        elif tag == "cli":
            check_cli(where, body, args)
        elif tag == "runtime-config":
            check_config(where, body, args)
        elif tag.startswith("checked-by:"):
            target = tag.split(":", 1)[1].strip()
            show(where, f"make -n {target}", run(["make", "-n", target], timeout=FAIL_TIMEOUT))
        else:
            fail(f"{where}: unknown tag <!-- {tag} -->")
    if failures:
        print(f"check-readme: {len(failures)} failure(s)", file=sys.stderr)
        sys.exit(1)
    print(f"check-readme: all {len(found)} blocks of {args.readme} checked")


if __name__ == "__main__":
    main()
