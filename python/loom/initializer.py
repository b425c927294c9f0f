"""CNTK's ``cntk.initializer``: how parameter(shape, init=...) draws a parameter's values, the same
functions as the package's top-level names. loom has glorot_uniform, glorot_normal, uniform, normal
and a constant (a number, or constant_initializer); CNTK's he_*, xavier and truncated_normal are
not in loom.

Each takes CNTK's keywords: seed (the initializer draws from a generator of its own, seeded so,
instead of loom's global one) and output_rank / filter_rank, which loom accepts only as None (its
fans are always the last axis against the others: fan-out the last dimension, fan-in the product
of the rest)."""

from typing import Any, Optional

from . import _loom
from ._loom import Initializer, constant_initializer


def _keywords(init: Initializer, what: str, output_rank: Any, filter_rank: Any, seed: Optional[int]) -> Initializer:
    if output_rank is not None or filter_rank is not None:
        raise _loom.UserError(f"{what}: loom takes the fans from the last axis (fan-out) and the others (fan-in); "
                              f"output_rank and filter_rank are not supported")
    return init if seed is None else _loom._seeded(init, int(seed))


def glorot_uniform(scale: float = 1.0, output_rank: Any = None, filter_rank: Any = None,
                   seed: Optional[int] = None) -> Initializer:
    """U(-limit, limit), limit = scale * sqrt(6 / (fan_in + fan_out)); fan_in is the product of all
    but the last dimension, fan_out the last one (a weight [in, out] used as times(x, W))."""
    return _keywords(_loom.glorot_uniform(float(scale)), "glorot_uniform", output_rank, filter_rank, seed)


def glorot_normal(scale: float = 1.0, output_rank: Any = None, filter_rank: Any = None,
                  seed: Optional[int] = None) -> Initializer:
    """N(0, scale^2 * 2 / (fan_in + fan_out)), the fans as for glorot_uniform."""
    return _keywords(_loom.glorot_normal(float(scale)), "glorot_normal", output_rank, filter_rank, seed)


def uniform(scale: float, seed: Optional[int] = None) -> Initializer:
    """U(-scale, scale)."""
    return _keywords(_loom.uniform(float(scale)), "uniform", None, None, seed)


def normal(scale: float, output_rank: Any = None, filter_rank: Any = None, seed: Optional[int] = None,
           mean: float = 0.0) -> Initializer:
    """N(mean, scale^2): scale is the standard deviation (output_rank and filter_rank: None only)."""
    return _keywords(_loom.normal(float(scale), float(mean)), "normal", output_rank, filter_rank, seed)


__all__ = ["constant_initializer", "glorot_normal", "glorot_uniform", "normal", "uniform"]
