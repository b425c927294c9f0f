"""CNTK's activations and shape ops that loom composes from its own ops (their gradients are the
composed ops' gradients): leaky_relu, param_relu, elu, selu, softsign, tan, sinh, cosh, squeeze,
expand_dims, swapaxes, reduce_l1, reduce_l2, reduce_sum_square."""

from typing import Any, Optional, Sequence

from . import _loom
from ._graph import VariableLike, _reduce, _variable, reshape, transpose
from ._loom import Variable

_SELU_SCALE, _SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


def _named(v: Variable, name: str) -> Variable:
    return _loom.alias(v, name) if name else v


def leaky_relu(x: VariableLike, alpha: float = 0.01, name: str = "") -> Variable:
    """x where x >= 0, else alpha x (CNTK's default alpha 0.01; at 0 the gradient is 1, as CNTK's)."""
    x = _variable(x)
    return _named(_loom.element_select(_loom.less(x, 0.0), x * float(alpha), x), name)


def param_relu(alpha: VariableLike, x: VariableLike, name: str = "") -> Variable:
    """x where x >= 0, else alpha x, alpha a parameter (of x's shape, or one that broadcasts to it)."""
    x, alpha = _variable(x), _variable(alpha)
    return _named(_loom.element_select(_loom.less(x, 0.0), _loom.element_times(alpha, x), x), name)


def _elu(x: Variable, alpha: float) -> Variable:
    # x where x >= 0 (at 0 the gradient is 1, as CNTK's), else alpha (exp(min(x, 0)) - 1): exp of at
    # most 0, so a large positive x, whose branch is not chosen, cannot overflow to inf and turn the
    # unchosen branch's zero gradient into nan.
    negative = (_loom.exp(_loom.element_min(x, 0.0)) - 1.0) * float(alpha)
    return _loom.element_select(_loom.less(x, 0.0), negative, x)


def elu(x: VariableLike, alpha: float = 1.0, name: str = "") -> Variable:
    """x where x >= 0, else alpha (exp(x) - 1)."""
    return _named(_elu(_variable(x), alpha), name)


def selu(x: VariableLike, scale: float = _SELU_SCALE, alpha: float = _SELU_ALPHA, name: str = "") -> Variable:
    """scale * elu(x, alpha), with the self-normalizing constants of Klambauer et al. by default."""
    return _named(_elu(_variable(x), alpha) * float(scale), name)


def softsign(x: VariableLike, steepness: float = 1.0, name: str = "") -> Variable:
    """x / (1 + |x|); with steepness s, softsign(s x) / s."""
    x = _variable(x)
    s = float(steepness)
    return _named(_loom.element_divide(x, _loom.abs(x * s) + 1.0), name)


def tan(x: VariableLike, name: str = "") -> Variable:
    """sin(x) / cos(x), element-wise."""
    x = _variable(x)
    return _named(_loom.element_divide(_loom.sin(x), _loom.cos(x)), name)


def sinh(x: VariableLike, name: str = "") -> Variable:
    """(exp(x) - exp(-x)) / 2, element-wise."""
    x = _variable(x)
    return _named((_loom.exp(x) - _loom.exp(_loom.negate(x))) * 0.5, name)


def cosh(x: VariableLike, name: str = "") -> Variable:
    """(exp(x) + exp(-x)) / 2, element-wise."""
    x = _variable(x)
    return _named((_loom.exp(x) + _loom.exp(_loom.negate(x))) * 0.5, name)


def squeeze(x: VariableLike, axes: Optional[Sequence[int]] = None, name: str = "") -> Variable:
    """The sample without its axes of size 1 (or those of `axes`, each of which must be 1). A
    sample of only such axes keeps shape (1,): loom differs from CNTK, which gives shape ()."""
    x = _variable(x)
    rank = len(x.shape)
    drop = {i for i, d in enumerate(x.shape) if d == 1} if axes is None else {int(a) % max(rank, 1) for a in axes}
    for a in sorted(drop):
        if x.shape[a] != 1:
            raise _loom.UserError(f"squeeze: axis {a} of shape {tuple(x.shape)} is not of size 1")
    kept = [d for i, d in enumerate(x.shape) if i not in drop]
    return reshape(x, tuple(kept) if kept else (1,), name=name)


def expand_dims(x: VariableLike, axis: int, name: str = "") -> Variable:
    """The sample with a new axis of size 1 before static axis `axis` (negative: from the end, -1
    appends)."""
    x = _variable(x)
    dims = list(x.shape)
    a = int(axis)
    position = a if a >= 0 else len(dims) + 1 + a
    if not 0 <= position <= len(dims):
        raise _loom.UserError(f"expand_dims: axis {axis} is outside a sample of shape {tuple(dims)}")
    dims.insert(position, 1)
    return reshape(x, tuple(dims), name=name)


def swapaxes(x: VariableLike, axis1: int = 0, axis2: int = 1, name: str = "") -> Variable:
    """The sample with static axes axis1 and axis2 exchanged."""
    x = _variable(x)
    rank = len(x.shape)
    if rank < 2:
        raise _loom.UserError(f"swapaxes: a sample of shape {tuple(x.shape)} has no two axes to swap")
    perm = list(range(rank))
    a, b = int(axis1) % rank, int(axis2) % rank
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm, name=name)


def reduce_sum_square(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The sum of squares over static `axis` (as reduce_sum for axis and keepdims)."""
    return _reduce(_loom._reduce_sum, _loom.square(_variable(x)), axis, keepdims, name, "reduce_sum_square")


def reduce_l1(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The sum of absolute values over static `axis` (as reduce_sum for axis and keepdims)."""
    return _reduce(_loom._reduce_sum, _loom.abs(_variable(x)), axis, keepdims, name, "reduce_l1")


def reduce_l2(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The Euclidean norm over static `axis` (as reduce_sum for axis and keepdims)."""
    return _named(_loom.sqrt(reduce_sum_square(x, axis, keepdims)), name)


__all__ = ["cosh", "elu", "expand_dims", "leaky_relu", "param_relu", "reduce_l1", "reduce_l2", "reduce_sum_square",
           "selu", "sinh", "softsign", "squeeze", "swapaxes", "tan"]
