"""Build glue the declarative pyproject cannot express: the wheel carries
liblmstream.so (copied from the repository's build/ directory, or from
LMSTREAM_LIBRARY), so it is platform-specific; the binding itself has no
compiled Python extension, so one wheel serves every Python 3 version."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "liblmstream.so"


def find_library():
    env = os.environ.get("LMSTREAM_LIBRARY")
    path = env or os.path.normpath(os.path.join(HERE, "..", "..", "build", LIB_NAME))
    if not os.path.exists(path):
        raise SystemExit(f"{path} does not exist: run `make lib` at the repository root "
                         "(or set LMSTREAM_LIBRARY) before building the wheel")
    return path


class BuildPyWithLibrary(build_py):
    """Copies liblmstream.so into the built package (never into the source
    tree, where a stale copy would shadow a fresh build)."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "lmstream", LIB_NAME)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(find_library(), dst)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithLibrary}

try:  # setuptools >= 70.1 has its own bdist_wheel; older ones use wheel's
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # pragma: no cover
    try:
        from wheel.bdist_wheel import bdist_wheel as _bdist_wheel
    except ImportError:
        _bdist_wheel = None

if _bdist_wheel is not None:
    class bdist_wheel(_bdist_wheel):
        """Platform-tagged (it carries a .so), Python-version independent."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_wheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
