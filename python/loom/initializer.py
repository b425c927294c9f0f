"""CNTK's ``cntk.initializer``: how parameter(shape, init=...) draws a parameter's values, the same
functions as the package's top-level names. loom has glorot_uniform, glorot_normal, uniform, normal
and a constant (a number, or constant_initializer); CNTK's he_*, xavier and truncated_normal are
not in loom."""

from ._loom import constant_initializer, glorot_normal, glorot_uniform, normal, uniform

__all__ = ["constant_initializer", "glorot_normal", "glorot_uniform", "normal", "uniform"]
