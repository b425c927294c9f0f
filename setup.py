"""Builds the extension loom._loom with the project's CMake build, for pip (pyproject.toml).

The library and the extension only (no tests, samples or benches); LOOM_BUILD_JOBS sets the
parallel jobs (2 by default) and LOOM_CMAKE_ARGS adds arguments to CMake's configure step.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent.resolve()


class CMakeBuild(build_ext):
    """Configures and builds the target _loom, then copies the module where setuptools wants it."""

    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DLOOM_PYTHON=ON", "-DLOOM_MPI=OFF",
                     "-DLOOM_BUILD_TESTS=OFF", "-DLOOM_BUILD_SAMPLES=OFF", "-DLOOM_BUILD_BENCH=OFF",
                     "-DLOOM_BUILD_EXPERIMENTS=OFF"]
        configure += shlex.split(os.environ.get("LOOM_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "_loom",
                               "-j", os.environ.get("LOOM_BUILD_JOBS", "2")])
        built = sorted((build / "python" / "loom").glob("_loom*.so"))
        if not built:
            raise RuntimeError(f"the CMake build made no _loom module under {build / 'python' / 'loom'}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(ext_modules=[Extension("loom._loom", sources=[])], cmdclass={"build_ext": CMakeBuild})
