"""The package's version: the CMake project's (CMakeLists.txt); a test checks that they agree."""

__version__ = "0.6.0"
