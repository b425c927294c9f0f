"""The makers of a graph's leaves and the ops whose CNTK signature needs more than a name."""

from __future__ import annotations

import builtins
import numbers
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from . import _loom
from ._loom import Initializer, Parameter, SequenceAxis, Variable

ShapeLike = Union[int, Sequence[int]]
VariableLike = Union[Variable, float, int, np.ndarray, list]


def _shape(shape: ShapeLike, what: str) -> tuple:
    """`shape` (an int or a sequence of ints) as a tuple of positive ints, else loom.UserError."""
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise _loom.UserError(f"{what}: a shape is an int or a tuple of ints; got {shape!r}") from None
    if any(d < 1 for d in dims):
        raise _loom.UserError(f"{what}: every dimension must be at least 1; got shape {dims}")
    return dims


def _numbers(value: Any, what: str) -> np.ndarray:
    """`value` (a number, a list, an array) as a float64 array, else loom.UserError naming `what`."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _loom.UserError(f"{what}: takes numbers (an array, a list or a number); got {value!r:.100}") from None


def _variable(x: VariableLike) -> Variable:
    """`x` as a Variable: numbers, lists and arrays become constants (CNTK's sanitize_input)."""
    if isinstance(x, Variable):
        return x
    return _loom._constant(_numbers(x, "an op's operand"), "")


def _f64(dtype: Any, what: str) -> bool:
    """Whether `dtype` is float64 (True) or float32 (False); anything else is a loom.UserError."""
    if dtype is None:
        return False
    d = np.dtype(dtype)
    if d == np.float64:
        return True
    if d == np.float32:
        return False
    raise _loom.UserError(f"{what}: dtype is numpy.float32 or numpy.float64; got {d}")


class NamedAxis:
    """One of CNTK's named axes (Axis.default_batch_axis(), Axis.default_dynamic_axis(),
    Axis.all_static_axes()): what input_variable's dynamic_axes and the reductions' axis take."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Axis.{self.name}()"


BATCH_AXIS, DYNAMIC_AXIS, ALL_STATIC_AXES, ALL_AXES, NEW_LEADING_AXIS = (
    NamedAxis(n) for n in ("default_batch_axis", "default_dynamic_axis", "all_static_axes", "all_axes",
                           "new_leading_axis"))


def _dynamic_axes(v: Variable) -> tuple:
    # CNTK's Variable.dynamic_axes: (), (batch,) or (batch, the sequence axis).
    if v.is_sequence:
        return (BATCH_AXIS, DYNAMIC_AXIS)
    return (BATCH_AXIS,) if v.has_batch_axis else ()


# CNTK's names of a recurrent cell's parameters that loom names otherwise (H is loom's U).
_CNTK_PARAMETER_NAMES = {"H": ("U", "U_rz"), "H1": ("U_g",)}


class ParameterScope:
    """What f.name gives for a layer named `name` (CNTK's f.foo for Dense(..., name='foo')): its
    parameters as attributes, f.foo.W, f.foo.b."""

    def __init__(self, parameters: list, prefix: str) -> None:
        self._parameters, self._prefix = parameters, prefix

    def __getattr__(self, name: str):
        return _parameter_named(self._parameters, self._prefix + name, name)

    def __repr__(self) -> str:
        return f"<loom ParameterScope {self._prefix[:-1]!r}>"


def _parameter_named(parameters: list, full: str, short: str):
    for candidate in (full,) + tuple(full[: len(full) - len(short)] + n for n in _CNTK_PARAMETER_NAMES.get(short, ())):
        exact = [p for p in parameters if p.name == candidate]
        if exact:
            return exact[0]
        # A layer's parameters are named "layer.W": .W finds the one W when there is one.
        ending = [p for p in parameters if p.name.endswith("." + candidate)]
        if len(ending) == 1:
            return ending[0]
        if len(ending) > 1:
            raise AttributeError(f"{short}: {len(ending)} parameters are named so ("
                                 f"{', '.join(p.name for p in ending)}); reach one through its layer's name")
    if any(p.name.startswith(full + ".") or ("." + full + ".") in p.name for p in parameters):
        prefix = next(p.name for p in parameters if p.name.startswith(full + ".") or ("." + full + ".") in p.name)
        return ParameterScope(parameters, prefix[: prefix.index(full + ".") + len(full) + 1])
    raise AttributeError(f"no attribute, parameter or layer named {short!r}")


def _lookup(v: Variable, name: str):
    # CNTK's Function.__getattr__: f.W is the graph's parameter named W, f.foo the layer named foo.
    if name.startswith("__"):
        raise AttributeError(name)
    return _parameter_named(v.parameters, name, name)


Variable.__getattr__ = _lookup


def _index(v: Variable, key: Any) -> Variable:
    # CNTK's f[3], f[2:4], f[1, 0:2]: slices of the static axes, each kept (an int keeps its axis, of size 1).
    keys = key if isinstance(key, tuple) else (key,)
    if len(keys) > len(v.shape):
        raise _loom.UserError(f"[{key!r}]: more indices than the sample's {len(v.shape)} axes (shape {tuple(v.shape)})")
    out = v
    for axis, k in enumerate(keys):
        if isinstance(k, numbers.Integral):
            begin, end = int(k), int(k) + 1 if int(k) != -1 else 0
        elif isinstance(k, builtins.slice):
            if k.step not in (None, 1):
                raise _loom.UserError(f"[{key!r}]: loom slices with step 1; got step {k.step}")
            begin, end = k.start or 0, 0 if k.stop is None else k.stop
            if begin == 0 and end == 0:
                continue
        else:
            raise _loom.UserError(f"[{key!r}]: an index is an int or a slice with step 1 (CNTK's lists of indices are "
                                  f"not supported); got {k!r}")
        out = _loom._slice(out, axis, begin, end, "")
    return out


def _value(v: Variable) -> np.ndarray:
    # CNTK's Constant.value: a constant's (or a static graph's) value as numpy.
    if v.has_batch_axis or v.is_placeholder:
        raise _loom.UserError("value: only constants and other values without inputs have a value; eval this one")
    return v.eval()


def _dtype(v: Variable) -> type:
    return np.float64 if any(p.dtype == np.float64 for p in v.parameters) else np.float32


def _replace_placeholder(v: Variable, substitution: Variable) -> Variable:
    """Binds the graph's one open placeholder to substitution (CNTK's replace_placeholder)."""
    open_ones = v.placeholders
    if len(open_ones) != 1:
        raise _loom.UserError(f"replace_placeholder: the graph has {len(open_ones)} open placeholders; "
                              f"name each with replace_placeholders({{p: ...}})")
    return v.replace_placeholders({open_ones[0]: _variable(substitution)})


def _call(v: Variable, *args: Any) -> Any:
    """CNTK's Function call: f(x) with f's own arguments is f itself; f(data, ...) is
    f.eval({argument: data, ...}) (arguments in order). loom differs from CNTK: calling f on other
    Variables (CNTK clones the graph onto them) is a UserError; build the graph again on them, or
    use placeholders and replace_placeholders."""
    arguments = v.arguments
    if args and all(isinstance(a, Variable) for a in args):
        if list(args) == list(arguments):
            return v
        raise _loom.UserError("calling a Function on other Variables (CNTK's clone onto new inputs) is not in loom; "
                              "build the graph on them, or make it on placeholders and replace_placeholders")
    if len(args) != len(arguments):
        raise _loom.UserError(f"calling a Function on data: it has {len(arguments)} argument(s); got {len(args)}")
    return v.eval(dict(zip(arguments, args)) if arguments else None)


Variable.__call__ = _call
Variable.replace_placeholder = _replace_placeholder
Variable.__getitem__ = _index
Variable.__array__ = lambda v, dtype=None, copy=None: np.asarray(v.value, dtype=dtype)


def _one_hot(batch: Any, num_classes: int, dtype: Any = np.float32, device: Any = None) -> list:
    """CNTK's Value.one_hot: for each sequence of class indices, an array [T, num_classes] of one-hot
    rows (for a sequence input of shape (num_classes,); a list of plain indices is a batch of
    one-step samples, an array [N, num_classes]). loom differs from CNTK: the rows are dense numpy
    arrays, as loom stores every input.
    """
    _f64(dtype, "Value.one_hot")
    classes = int(num_classes)
    if classes < 1:
        raise _loom.UserError(f"Value.one_hot: num_classes is at least 1; got {num_classes!r}")

    def rows(indices: Any, where: str) -> np.ndarray:
        ids = np.asarray(indices)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= classes)):
            raise _loom.UserError(f"Value.one_hot: {where} holds class indices from 0 to {classes - 1}; got "
                                  f"{np.asarray(indices).tolist()!r}")
        out = np.zeros((ids.size, classes), dtype=dtype)
        out[np.arange(ids.size), ids] = 1
        return out

    items = list(batch)
    if all(isinstance(i, numbers.Integral) for i in items):
        return rows(items, "the batch")
    return [rows(seq, f"sequence {n}") for n, seq in enumerate(items)]


_loom.Value.one_hot = staticmethod(_one_hot)
Variable.value = property(_value, doc="A constant's value (or a graph's without inputs), as numpy: eval() of it.")
Variable.dtype = property(_dtype, doc="float64 when a parameter of the graph is, else float32: what eval gives for "
                          "float32 data (loom differs from CNTK: inputs have no dtype of their own).")

Variable.dynamic_axes = property(_dynamic_axes, doc="CNTK's dynamic axes: () for a static value, (batch,) for a "
                                 "batch value, (batch, sequence) for a sequence value (Axis objects).")


def input_variable(shape: ShapeLike, dtype: Any = np.float32, needs_gradient: bool = False,
                   is_sparse: bool = False, dynamic_axes: Optional[Sequence] = None,
                   name: str = "") -> Variable:
    """An input with a batch axis: each eval is given an array [N, *shape].

    dynamic_axes=[] makes an input with no dynamic axis (one tensor of `shape` per eval, read
    as a parameter is); [Axis.default_batch_axis()] is the default; [Axis.default_batch_axis(),
    Axis.default_dynamic_axis()] makes a sequence input, as sequence.input_variable, and
    [Axis.default_batch_axis(), Axis('name')] one on that sequence axis (a SequenceAxis). loom differs
    from CNTK: an input has no dtype of its own (eval computes
    in float64 when any data or parameter is float64, else float32; `dtype` is only checked to be
    one of the two); every input can be differentiated (needs_gradient is accepted and ignored);
    is_sparse=True makes the same dense input: one-hot data (numpy arrays, scipy.sparse matrices,
    Value.one_hot's arrays) is stored dense, so a layer over it multiplies zeros (for a large
    vocabulary, integer ids of shape (1,) given to `embedding(ids, table)` do the same work by rows).
    """
    _f64(dtype, "input_variable")
    axes = 1
    if dynamic_axes is not None and len(dynamic_axes) == 2 and isinstance(list(dynamic_axes)[1], SequenceAxis) \
            and list(dynamic_axes)[0] is BATCH_AXIS:
        return _loom._input_variable(list(_shape(shape, "input_variable")), name, 2, list(dynamic_axes)[1])
    if dynamic_axes is not None:
        given = list(dynamic_axes)
        axes = {(): 0, (BATCH_AXIS,): 1, (BATCH_AXIS, DYNAMIC_AXIS): 2}.get(tuple(given))
        if axes is None:
            raise _loom.UserError(f"input_variable: dynamic_axes is [], [Axis.default_batch_axis()] or "
                                  f"[Axis.default_batch_axis(), Axis.default_dynamic_axis()]; got {given!r} (a "
                                  f"sequence input on an axis of its own: sequence.input_variable(sequence_axis=...))")
    return _loom._input_variable(list(_shape(shape, "input_variable")), name, axes)


def parameter(shape: Optional[ShapeLike] = None, init: Any = None, dtype: Any = None,
              device: Any = None, name: str = "") -> Parameter:
    """A learnable tensor of `shape`, its values drawn by `init`.

    init: an Initializer (glorot_uniform(), glorot_normal(), uniform(s), normal(s), ...), a
    number (every element that number), or an array (the value itself; then shape may be left out).
    None draws glorot_uniform() (loom differs from CNTK, whose default is 0). dtype: float32 (the
    default) or float64. device is accepted and ignored (loom runs on the CPU).
    """
    f64 = _f64(dtype, "parameter")
    if isinstance(init, (np.ndarray, list, tuple)):
        value = _numbers(init, "parameter")
        if shape is not None and _shape(shape, "parameter") != value.shape:
            raise _loom.UserError(f"parameter: shape {tuple(shape)} differs from the shape of init, {value.shape}")
        return _loom._parameter_from(value, name, f64)
    if shape is None:
        raise _loom.UserError("parameter: give a shape (or an array as init)")
    dims = list(_shape(shape, "parameter"))
    if init is None:
        init = _loom.glorot_uniform()
    elif isinstance(init, numbers.Number):
        init = _loom.constant_initializer(float(init))
    elif not isinstance(init, Initializer):
        raise _loom.UserError(f"parameter: init is an Initializer, a number or an array; got {init!r}")
    return _loom._parameter(dims, init, name, f64)


def constant(value: Any = None, shape: Optional[ShapeLike] = None, dtype: Any = None,
             device: Any = None, name: str = "") -> Variable:
    """A constant: a number, or an array's values (copied). With `shape`, a number fills that shape.

    Held in double; computed in the graph's element type. dtype is checked, device ignored.
    """
    _f64(dtype, "constant")
    if value is None:
        value = 0.0
    value = _numbers(value, "constant")
    if shape is not None:
        dims = _shape(shape, "constant")
        if value.ndim != 0 and value.shape != dims:
            raise _loom.UserError(f"constant: shape {dims} differs from the value's shape, {value.shape}")
        value = np.full(dims, value, dtype=np.float64) if value.ndim == 0 else value
    return _loom._constant(value, name)


def placeholder(shape: Optional[ShapeLike] = None, dynamic_axes: Any = None, name: str = "") -> Variable:
    """A placeholder, on any dynamic axis until replace_placeholders binds it: how a loop is closed.

    Without a shape, the shape is inferred from the loop it closes (and `name` is not kept: loom
    names only placeholders of a known shape). dynamic_axes is accepted and ignored.
    """
    dims = None if shape is None else list(_shape(shape, "placeholder"))
    return _loom._placeholder(dims, name)


def Constant(value: Any = None, shape: Optional[ShapeLike] = None, dtype: Any = None, device: Any = None,
             name: str = "") -> Variable:
    """CNTK's class name for a constant: the same as constant(value, shape, dtype, device, name)
    (loom differs from CNTK: a function giving a Variable, not a class)."""
    return constant(value, shape, dtype, device, name)


def placeholder_variable(shape: Optional[ShapeLike] = None, dynamic_axes: Any = None, name: str = "") -> Variable:
    """The same as placeholder (CNTK's older name)."""
    return placeholder(shape, dynamic_axes, name)


def _axis(axis: Any, what: str) -> int:
    if isinstance(axis, numbers.Integral):
        return int(axis)
    raise _loom.UserError(f"{what}: axis is an int (a static axis, negative from the last) or None; got {axis!r}")


def _over_dynamic_axes(what: str, x: Variable, axis: Any, name: str) -> Variable:
    """reduce_{sum, mean, max, min, log_sum_exp} of x over the batch axis (axis=Axis.default_batch_axis():
    a static value of x's sample shape) or over every axis (Axis.all_axes(): shape (1,), where CNTK
    gives shape ()), composed of loom's batch and sequence reductions."""
    batch_ops = {"reduce_sum": _loom.batch.reduce_sum, "reduce_mean": _loom.batch.reduce_mean,
                 "reduce_max": _loom.batch.reduce_max}
    if what == "reduce_min":
        return _loom.negate(_over_dynamic_axes("reduce_max", _loom.negate(x), axis, ""), name)
    if what == "reduce_log_sum_exp":
        top = _loom.stop_gradient(_over_dynamic_axes("reduce_max", x, axis, ""))
        total = _over_dynamic_axes("reduce_sum", _loom.exp(x - top), axis, "")
        return _loom.plus(_loom.log(total), top, name)
    if what not in batch_ops:
        raise _loom.UserError(f"{what}: loom reduces over static axes only (reduce_sum, reduce_mean, reduce_max, "
                              f"reduce_min and reduce_log_sum_exp also over the batch or every axis)")
    if not x.has_batch_axis:
        return _reduce(getattr(_loom, "_" + what), x, None if axis is ALL_AXES else 0, False, name, what)
    if axis is BATCH_AXIS:
        if x.is_sequence:
            raise _loom.UserError(f"{what}: over the batch axis of a sequence value: reduce over its steps first "
                                  f"(sequence.{what}), or over every axis with Axis.all_axes()")
        return batch_ops[what](x, name)
    if what == "reduce_mean":
        count = float(np.prod(x.shape))
        if x.is_sequence:
            steps = _loom.batch.reduce_sum(_loom.sequence.length(x), "")
            return _loom.element_divide(_over_dynamic_axes("reduce_sum", x, axis, ""), steps * count, name)
        return _loom.batch.reduce_mean(_reduce(_loom._reduce_mean, x, None, False, "", what), name)
    static = _reduce(getattr(_loom, "_" + what), x, None, False, "", what)
    if x.is_sequence:
        static = getattr(_loom.sequence, what)(static, "")
    return batch_ops[what](static, name)


def _reduce(op, x: VariableLike, axis: Any, keepdims: bool, name: str, what: str) -> Variable:
    x = _variable(x)
    if axis is ALL_AXES or axis is BATCH_AXIS:
        return _over_dynamic_axes(what, x, axis, name)
    if axis is ALL_STATIC_AXES:
        axis = None
    if axis is None:
        axes = [_loom._all_static_axes]
    elif isinstance(axis, (list, tuple)):
        axes = [_axis(a, what) % max(len(x.shape), 1) for a in axis]
    else:
        axes = [_axis(axis, what)]
    out = x
    for i, a in enumerate(axes):
        out = op(out, a, name if i + 1 == len(axes) and keepdims else "")
    if not keepdims:
        rank = len(x.shape)
        dropped = set(range(rank)) if axis is None else {a % rank for a in axes}
        kept = [d for i, d in enumerate(x.shape) if i not in dropped]
        out = _loom._reshape(out, kept if kept else [1], name)
    return out


def reduce_sum(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The sum over static `axis` (an int, a list of ints, or None for every static axis).

    The reduced axes stay with size 1 unless keepdims=False (then they go; a result of no axis left
    has shape (1,): loom differs from CNTK, which gives shape ()). Over the sequence axis:
    sequence.reduce_sum. axis=Axis.default_batch_axis() sums a batch value's items (a static value),
    Axis.all_axes() every element of every sample and step (shape (1,)); reduce_mean, reduce_max,
    reduce_min and reduce_log_sum_exp take them too.
    """
    return _reduce(_loom._reduce_sum, x, axis, keepdims, name, "reduce_sum")


def reduce_mean(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The mean over static `axis`; as reduce_sum for axis and keepdims."""
    return _reduce(_loom._reduce_mean, x, axis, keepdims, name, "reduce_mean")


def reduce_max(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The maximum over static `axis`; as reduce_sum for axis and keepdims."""
    return _reduce(_loom._reduce_max, x, axis, keepdims, name, "reduce_max")


def reduce_min(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The minimum over static `axis`; as reduce_sum for axis and keepdims."""
    return _reduce(_loom._reduce_min, x, axis, keepdims, name, "reduce_min")


def reduce_log_sum_exp(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """log(sum(exp(x))) over static `axis`, without overflow; as reduce_sum for axis and keepdims."""
    return _reduce(_loom._reduce_log_sum_exp, x, axis, keepdims, name, "reduce_log_sum_exp")


def reduce_prod(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The product over static `axis`; as reduce_sum for axis and keepdims (static axes only).

    Composed as sign * exp(sum(log|x|)): its gradient is prod / x, as CNTK's, so an element that
    is 0 gives a gradient of nan or inf where CNTK's gives the product of the others.
    """
    x = _variable(x)
    if axis is ALL_AXES or axis is BATCH_AXIS:
        raise _loom.UserError("reduce_prod: loom multiplies over static axes only")
    magnitude = _loom.exp(_reduce(_loom._reduce_sum, _loom.log(_loom.abs(x)), axis, keepdims, "", "reduce_prod"))
    # The sign: -1 to the count of negative elements, as cos(pi * count).
    negatives = _reduce(_loom._reduce_sum, _loom.less(x, 0.0), axis, keepdims, "", "reduce_prod")
    return _loom.element_times(magnitude, _loom.cos(negatives * float(np.pi)), name)


def _arg_extreme(x: VariableLike, axis: Any, keepdims: bool, name: str, what: str, largest: bool) -> Variable:
    x = _variable(x)
    if axis is None:
        if len(x.shape) > 1:
            raise _loom.UserError(f"{what}: give the axis (loom takes the {what} along one static axis)")
        axis = 0
    rank = len(x.shape)
    a = _axis(axis, what) % max(rank, 1)
    extreme = (_loom._reduce_max if largest else _loom._reduce_min)(x, a, "")
    positions = np.arange(x.shape[a], dtype=np.float64).reshape([x.shape[a]] + [1] * (rank - 1 - a))
    # The first position of the extreme: the least index among the elements equal to it.
    at_extreme = _loom.element_select(_loom.equal(x, extreme), _loom._constant(positions, ""), float(x.shape[a]))
    return _loom.stop_gradient(_reduce(_loom._reduce_min, at_extreme, a, keepdims, "", what), name)


def argmax(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The index of the first maximum along static `axis` (kept with size 1 unless keepdims=False),
    as a number; no gradient. axis=None is the only axis of a vector."""
    return _arg_extreme(x, axis, keepdims, name, "argmax", True)


def argmin(x: VariableLike, axis: Any = None, keepdims: bool = True, name: str = "") -> Variable:
    """The index of the first minimum along static `axis`; as argmax."""
    return _arg_extreme(x, axis, keepdims, name, "argmin", False)


def hardmax(x: VariableLike, name: str = "") -> Variable:
    """1 at the first maximum of the last axis, 0 elsewhere; no gradient (CNTK's hardmax)."""
    x = _variable(x)
    rank = len(x.shape)
    first = argmax(x, axis=rank - 1)
    positions = np.arange(x.shape[-1], dtype=np.float64)
    return _loom.stop_gradient(_loom.equal(_loom._constant(positions, ""), first), name)


def gather(reference: VariableLike, indices: VariableLike, axis: Any = None, name: str = "") -> Variable:
    """reference's rows (its first axis) at indices (whole numbers, any sample shape S): shape
    S + reference.shape[1:], as CNTK's gather; the gradient adds into the rows read. Composed as a
    one-hot product (S x rows x the row's size operations); for ids of shape (1,), embedding is the
    op that reads rows directly. axis is the first (None or 0)."""
    if axis not in (None, 0):
        raise _loom.UserError("gather: loom gathers along reference's first axis (axis=None or 0)")
    reference, indices = _variable(reference), _variable(indices)
    rows = int(reference.shape[0])
    column = _loom._reshape(indices, list(indices.shape) + [1], "")
    hot = _loom.stop_gradient(_loom.equal(column, _loom._constant(np.arange(rows, dtype=np.float64), "")))
    return _loom._times(hot, reference, name)


def zeros_like(x: VariableLike, name: str = "") -> Variable:
    """Zeros of x's shape and dynamic axes; no gradient."""
    return _loom.stop_gradient(_loom.element_times(_variable(x), 0.0), name)


def ones_like(x: VariableLike, name: str = "") -> Variable:
    """Ones of x's shape and dynamic axes; no gradient."""
    return _loom.stop_gradient(_loom.element_times(_variable(x), 0.0) + 1.0, name)


def _over_axis(op, x: VariableLike, axis: Any, name: str, what: str) -> Variable:
    x = _variable(x)
    if axis is not None:
        return op(x, _axis(axis, what), name)
    if len(x.shape) <= 1:
        return op(x, -1, name)
    # CNTK: without an axis, over every static axis at once.
    flat = _loom._reshape(x, [int(np.prod(x.shape))], "")
    return _loom._reshape(op(flat, -1, ""), list(x.shape), name)


def softmax(x: VariableLike, axis: Any = None, name: str = "") -> Variable:
    """exp(x) / sum(exp(x)) along static `axis`; None: over every static axis at once (as CNTK)."""
    return _over_axis(_loom._softmax, x, axis, name, "softmax")


def log_softmax(x: VariableLike, axis: Any = None, name: str = "") -> Variable:
    """log(softmax(x)) along `axis`, without overflow; None: over every static axis at once."""
    return _over_axis(_loom._log_softmax, x, axis, name, "log_softmax")


def times(left: VariableLike, right: VariableLike, output_rank: Optional[int] = None,
          infer_input_rank_to_map: Any = None, name: str = "") -> Variable:
    """The matrix product: left [..., k] with right [k, m...] gives [..., m...] on left's dynamic axes.

    By default loom contracts one axis, left's last with right's first, and keeps all of right's
    others (loom differs from CNTK, whose default output_rank=1 contracts right's first rank - 1
    axes). With output_rank, right's last output_rank axes are kept and its other k axes contracted
    with left's last k, as CNTK. infer_input_rank_to_map is not supported.
    """
    left, right = _variable(left), _variable(right)
    if infer_input_rank_to_map is not None:
        raise _loom.UserError("times: loom does not infer input ranks (infer_input_rank_to_map)")
    if output_rank is None or output_rank == len(right.shape) - 1:
        return _loom._times(left, right, name)
    contracted = len(right.shape) - int(output_rank)
    if not 1 <= contracted <= len(left.shape) or output_rank < 0:
        raise _loom.UserError(f"times: output_rank={output_rank} leaves {contracted} of right's axes (shape "
                              f"{tuple(right.shape)}) to contract with left's, shape {tuple(left.shape)}")
    if tuple(left.shape[len(left.shape) - contracted:]) != tuple(right.shape[:contracted]):
        raise _loom.UserError(f"times: left's last {contracted} axes {tuple(left.shape)} differ from right's first "
                              f"{contracted} {tuple(right.shape)}")
    k = int(np.prod(right.shape[:contracted]))
    flat_left = _loom._reshape(left, list(left.shape[:len(left.shape) - contracted]) + [k], "")
    flat_right = _loom._reshape(right, [k] + list(right.shape[contracted:]), "")
    return _loom._times(flat_left, flat_right, name)


def cross_entropy_with_softmax(output_vector: VariableLike, target_vector: VariableLike, axis: int = -1,
                               name: str = "") -> Variable:
    """-sum_j t_j log softmax(z)_j over the last axis (CNTK's: lse(z) - t.z, for targets that sum to
    1); the last axis becomes 1: shape (1,) for a vector, (rows, 1) for a matrix (one loss per row,
    as CNTK's axis=1). axis is the last (-1, or its index)."""
    z, t = _variable(output_vector), _variable(target_vector)
    rank = len(z.shape)
    if axis != -1 and _axis(axis, "cross_entropy_with_softmax") != rank - 1:
        raise _loom.UserError("cross_entropy_with_softmax: loom takes the softmax over the last axis (axis=-1)")
    if rank <= 1:
        return _loom._cross_entropy_with_softmax(z, t, name)
    # loom's op takes the whole sample as one distribution; each row is one here.
    lse = _loom._reduce_log_sum_exp(z, rank - 1, "")
    return _loom.minus(lse, _loom._reduce_sum(_loom.element_times(t, z), rank - 1, ""), name)


def classification_error(output_vector: VariableLike, target_vector: VariableLike, axis: int = -1,
                         topN: int = 1, name: str = "") -> Variable:
    """1 where argmax of output differs from argmax of target (the first maximum wins), else 0."""
    if axis != -1 or topN != 1:
        raise _loom.UserError("classification_error: loom compares the top 1 over the last axis")
    return _loom._classification_error(_variable(output_vector), _variable(target_vector), name)


def splice(*inputs: VariableLike, axis: Any = -1, name: str = "") -> Variable:
    """The inputs concatenated along static `axis` (the last by default).

    As CNTK's: inputs of lower rank are taken with leading axes of size 1, and an axis just before
    the first (-(rank + 1), or Axis.new_leading_axis()) stacks the inputs along a new one.
    """
    xs = [_variable(x) for x in inputs]
    rank = max(len(x.shape) for x in xs)
    xs = [x if len(x.shape) == rank else _loom._reshape(x, [1] * (rank - len(x.shape)) + list(x.shape), "")
          for x in xs]
    if axis is NEW_LEADING_AXIS or (isinstance(axis, numbers.Integral) and axis == -(rank + 1)):
        xs = [_loom._reshape(x, [1] + list(x.shape), "") for x in xs]
        axis = 0
    return _loom._splice(xs, _axis(axis, "splice"), name)


def slice(x: VariableLike, axis: int, begin_index: int, end_index: int, strides: Any = None,
          name: str = "") -> Variable:
    """Elements [begin_index, end_index) of static `axis`; negative indices count from the end,
    end_index 0 means to the end. strides are not supported."""
    if strides not in (None, 1):
        raise _loom.UserError("slice: loom slices with stride 1")
    return _loom._slice(_variable(x), _axis(axis, "slice"), begin_index, end_index, name)


def reshape(x: VariableLike, shape: ShapeLike, begin_axis: Any = None, end_axis: Any = None,
            name: str = "") -> Variable:
    """The same elements in a sample of `shape` (the counts must be equal; one dimension may be -1,
    inferred from the others, as in CNTK and numpy). With begin_axis / end_axis, as CNTK's, only
    the axes [begin_axis, end_axis) are replaced by `shape` (an empty range inserts it; negative
    axes count from the end; Axis.new_leading_axis() is the position after the last axis)."""
    x = _variable(x)
    dims = [int(d) for d in ((shape,) if isinstance(shape, numbers.Integral) else shape)]
    if begin_axis is not None or end_axis is not None:
        rank = len(x.shape)

        def position(axis: Any, default: int) -> int:
            if axis is None:
                return default
            if axis is NEW_LEADING_AXIS:
                return rank
            a = _axis(axis, "reshape")
            return a + rank if a < 0 else a

        begin, end = position(begin_axis, 0), position(end_axis, rank)
        if not 0 <= begin <= end <= rank:
            raise _loom.UserError(f"reshape: axes [{begin_axis}, {end_axis}) are not a range of a sample of shape "
                                  f"{tuple(x.shape)}")
        replaced = list(x.shape[begin:end])
        if dims.count(-1) == 1:
            known, count = int(np.prod([d for d in dims if d != -1])), int(np.prod(replaced))
            if known <= 0 or count % known:
                raise _loom.UserError(f"reshape: axes {tuple(replaced)} of shape {tuple(x.shape)} cannot take shape "
                                      f"{tuple(dims)}")
            dims[dims.index(-1)] = count // known
        dims = list(x.shape[:begin]) + dims + list(x.shape[end:])
    if dims.count(-1) == 1:
        known, count = int(np.prod([d for d in dims if d != -1])), int(np.prod(x.shape))
        if known <= 0 or count % known:
            raise _loom.UserError(f"reshape: a sample of shape {tuple(x.shape)} ({count} elements) cannot take "
                                  f"shape {tuple(dims)}")
        dims[dims.index(-1)] = count // known
    return _loom._reshape(x, list(_shape(tuple(dims), "reshape")), name)


def transpose(x: VariableLike, perm: Optional[Sequence[int]] = None, name: str = "") -> Variable:
    """The sample's axes permuted: output axis i is input axis perm[i] (negative: from the end); None
    reverses them."""
    x = _variable(x)
    rank = len(x.shape)
    if perm is None:
        perm = list(reversed(range(rank)))
    return _loom._transpose(x, [int(p) % rank if -rank <= int(p) < 0 else int(p) for p in perm], name)


def one_hot(x: VariableLike, num_classes: int, sparse_output: bool = False, axis: int = -1,
            name: str = "") -> Variable:
    """ids of sample shape (1,) as vectors (num_classes,) with a single 1 (dense; axis -1 only)."""
    if sparse_output or axis != -1:
        raise _loom.UserError("one_hot: loom makes dense vectors on the last axis")
    return _loom._one_hot(_variable(x), int(num_classes), name)


def dropout(x: VariableLike, dropout_rate: float = 0.0, keep_prob: Any = None, seed: int = 0,
            name: str = "") -> Variable:
    """In training x * a fresh Bernoulli mask / (1 - rate); the identity when evaluating.

    loom's eval runs in inference mode, so eval and grad see the identity. seed 0 draws one.
    """
    if keep_prob is not None:
        dropout_rate = 1.0 - keep_prob
    return _loom._dropout(_variable(x), float(dropout_rate), int(seed), name)


def _delay(op, x: VariableLike, initial_state: Any, time_step: int, name: str) -> Variable:
    if time_step < 1:
        raise _loom.UserError(f"past_value / future_value: time_step is at least 1; got {time_step}")
    init = _variable(0.0 if initial_state is None else initial_state)
    return op(_variable(x), init, int(time_step), name)


def past_value(x: VariableLike, initial_state: Any = None, time_step: int = 1, name: str = "") -> Variable:
    """x at step t - time_step of the same sequence, or initial_state (0 by default) before its start.

    x may be a placeholder: bound later by replace_placeholders, it closes a loop. initial_state
    may be a number, an array of the sample's shape, a parameter or a per-sequence value.
    """
    return _delay(_loom._past_value, x, initial_state, time_step, name)


def future_value(x: VariableLike, initial_state: Any = None, time_step: int = 1, name: str = "") -> Variable:
    """x at step t + time_step of the same sequence, or initial_state (0 by default) past its end."""
    return _delay(_loom._future_value, x, initial_state, time_step, name)


class Combined(list):
    """What combine returns: the list of its outputs, which also runs them together as CNTK's
    combined Function does (one graph, one pass): eval returns {output: value}, forward and backward
    are Function's over every output. loom differs from CNTK: it is a list (pass it as outputs=... too)."""

    @property
    def outputs(self) -> tuple:
        """The combined Variables, in order."""
        return tuple(self)

    @property
    def output(self) -> Variable:
        """The one output; a loom.UserError when there are several."""
        if len(self) != 1:
            raise _loom.UserError(f"combine: output is for one output; this combines {len(self)}: use outputs")
        return self[0]

    def _leaves(self, what: str) -> list:
        seen, found = set(), []
        for v in self:
            for leaf in getattr(v, what):
                if leaf not in seen:
                    seen.add(leaf)
                    found.append(leaf)
        return found

    @property
    def arguments(self) -> list:
        """The inputs any output needs, each once, in the order the outputs list them."""
        return self._leaves("arguments")

    @property
    def parameters(self) -> list:
        """The parameters any output depends on, each once."""
        return self._leaves("parameters")

    def eval(self, arguments: Any = None, outputs: Any = None) -> dict:
        """Every output (or those given) in one pass: {output: value} (of one output, its value), as
        Variable.eval with outputs=."""
        return self[0].eval(arguments, outputs=list(self) if outputs is None else list(outputs))

    def grad(self, at: Any, wrt: Any = None, outputs: Any = None, device: Any = None, as_numpy: bool = True,
             grad_root: Any = None):
        """Variable.grad of grad_root (one of the outputs; the only one by default)."""
        root = self.output if grad_root is None else grad_root
        return root.grad(at, wrt, outputs, device, as_numpy)

    def forward(self, arguments: Any = None, outputs: Any = None, keep_for_backward: Any = None):
        """Variable.forward over every output (or those given)."""
        return self[0].forward(arguments, list(self) if outputs is None else list(outputs), keep_for_backward)

    def backward(self, state: Any, root_gradients: dict, variables: Any, as_numpy: bool = True) -> dict:
        """Variable.backward from a state this combine's forward returned."""
        return self[0].backward(state, root_gradients, variables, as_numpy)


def combine(*operands: Any, name: str = "") -> Combined:
    """The operands as one result that runs them together (Combined: a list of them with eval,
    forward, backward, outputs, arguments and parameters), as CNTK's combine."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise _loom.UserError("combine: give at least one Variable")
    return Combined(_variable(x) for x in operands)


def load_model(filename: str, *args: Any, **kwargs: Any):
    """Not in loom: a loom model file holds parameters by name, not a graph. Build the graph in
    code, then f.restore(filename). Raises NotImplementedError saying so."""
    raise NotImplementedError(
        "loom.load_model: a loom model file holds parameters by name, not a graph; build the graph in code "
        "and call f.restore(" + repr(filename) + ")")
