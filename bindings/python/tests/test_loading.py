"""Finding the library and checking its ABI version."""
import os
import shutil
import subprocess
import sys

import pytest
from conftest import PKG_ROOT, REPO

import lmstream


def import_with(env_lib, tmp_path):
    env = dict(os.environ, LMSTREAM_LIBRARY=str(env_lib), PYTHONPATH=PKG_ROOT)
    return subprocess.run([sys.executable, "-c", "import lmstream; print(lmstream.library_path)"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)


def test_in_repo_fallback():
    assert os.path.samefile(lmstream.library_path, os.path.join(REPO, "build", "liblmstream.so")) \
        or os.environ.get("LMSTREAM_LIBRARY")


def test_lmstream_library_variable(tmp_path):
    copy = tmp_path / "liblmstream.so"
    shutil.copy(lmstream.library_path, copy)
    p = import_with(copy, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(copy)


def test_missing_library_is_a_clear_error(tmp_path):
    p = import_with(tmp_path / "nope.so", tmp_path)
    assert p.returncode != 0
    assert "LibraryNotFound" in p.stderr and "nope.so (absent)" in p.stderr
    assert "LMSTREAM_LIBRARY" in p.stderr


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_abi_mismatch_refuses_to_load(tmp_path):
    src = tmp_path / "fake.c"
    src.write_text("#include <stdint.h>\nint32_t lms_abi_version(void) { return 99; }\n")
    so = tmp_path / "liblmstream.so"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    p = import_with(so, tmp_path)
    assert p.returncode != 0
    assert "ABI version 99" in p.stderr and f"written for version {lmstream.ABI_VERSION}" in p.stderr


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_not_the_library(tmp_path):
    src = tmp_path / "other.c"
    src.write_text("int other(void) { return 1; }\n")
    so = tmp_path / "liblmstream.so"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    p = import_with(so, tmp_path)
    assert p.returncode != 0 and "is not liblmstream" in p.stderr
