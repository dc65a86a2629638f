"""Build glue the declarative pyproject cannot express: the wheel carries
liblmstream.so and the lmstream-serve program (copied from the
repository's build/ directory, or from LMSTREAM_LIBRARY and
LMSTREAM_SERVE_BINARY), so it is platform-specific; the binding itself has
no compiled Python extension, so one wheel serves every Python 3 version.
`lmstream serve` runs the packaged lmstream-serve."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "liblmstream.so"
SERVE_NAME = "lmstream-serve"


def find_built(env, name, target):
    path = os.environ.get(env) or os.path.normpath(os.path.join(HERE, "..", "..", "build", name))
    if not os.path.exists(path):
        raise SystemExit(f"{path} does not exist: run `make {target}` at the repository root "
                         f"(or set {env}) before building the wheel")
    return path


class BuildPyWithLibrary(build_py):
    """Copies liblmstream.so, and lmstream-serve into lmstream/bin, into the
    built package (never into the source tree, where a stale copy would
    shadow a fresh build)."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "lmstream")
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy2(find_built("LMSTREAM_LIBRARY", LIB_NAME, "lib"), os.path.join(pkg, LIB_NAME))
        serve = os.path.join(pkg, "bin", SERVE_NAME)
        shutil.copy2(find_built("LMSTREAM_SERVE_BINARY", SERVE_NAME, "serve"), serve)
        os.chmod(serve, 0o755)


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
