"""Ops over a sequence axis, as CNTK's ``C.sequence``.

Each sequence input has a sequence axis of its own unless it is given a shared one
(``SequenceAxis``): loom differs from CNTK, whose sequence inputs share one default axis. Ops
that combine two sequences need them on one axis; otherwise loom.UserError names both.
Reductions over time skip the padding of shorter sequences.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _loom
from ._graph import DYNAMIC_AXIS, ShapeLike, VariableLike, _f64, _shape, _variable, future_value, past_value
from ._loom import SequenceAxis, Variable
# The ops that take Variables (numbers and arrays become constants on the way in) are the
# extension's own, docstrings and all.
_ops = _loom.sequence
(broadcast_as, first, is_first, is_last, last, length, reduce_max, reduce_mean, reduce_sum, slice, softmax,
 where) = (_ops.broadcast_as, _ops.first, _ops.is_first, _ops.is_last, _ops.last, _ops.length, _ops.reduce_max,
           _ops.reduce_mean, _ops.reduce_sum, _ops.slice, _ops.softmax, _ops.where)

__all__ = ["delay", "input", "input_variable", "past_value", "future_value", "is_first", "is_last", "first", "last", "slice",
           "broadcast_as", "reduce_sum", "reduce_max", "reduce_mean", "softmax", "length", "gather",
           "scatter", "where", "unpack"]


def input_variable(shape: ShapeLike, dtype: Any = np.float32, needs_gradient: bool = False,
                   is_sparse: bool = False, sequence_axis: Optional[SequenceAxis] = None,
                   name: str = "") -> Variable:
    """A sequence input: each eval is given a list of arrays [T_i, *shape] (a ragged batch).

    It gets a sequence axis of its own, or the SequenceAxis given (shared with other inputs
    whose sequences have the same lengths). loom differs from CNTK: see the module's docstring
    for the default axis, and loom.input_variable for dtype, needs_gradient and is_sparse (one-hot
    sequences are stored dense).
    """
    _f64(dtype, "sequence.input_variable")
    if sequence_axis is DYNAMIC_AXIS:
        sequence_axis = None
    if sequence_axis is not None and not isinstance(sequence_axis, SequenceAxis):
        raise _loom.UserError(f"sequence.input_variable: sequence_axis is a loom.SequenceAxis; got {sequence_axis!r}")
    return _loom._input_variable(list(_shape(shape, "sequence.input_variable")), name, 2, sequence_axis)


























def delay(x: VariableLike, initial_state: Any = None, time_step: int = 1, name: str = "") -> Variable:
    """past_value(x, initial_state, time_step) for time_step > 0, future_value(x, initial_state,
    -time_step) for time_step < 0, x itself (alias(x, name) when named) for 0."""
    if time_step > 0:
        return past_value(x, initial_state, time_step, name)
    if time_step < 0:
        return future_value(x, initial_state, -time_step, name)
    x = _variable(x)
    return _loom.alias(x, name) if name else x


#: CNTK's older name of sequence.input_variable (cntk.sequence.input).
input = input_variable


def gather(seq: VariableLike, condition: VariableLike, new_sequence_axis_typeinfo: Any = None,
           name: str = "") -> Variable:
    """The steps of seq where condition (shape (1,) on seq's axis) is non-zero, on a new sequence
    axis. new_sequence_axis_typeinfo is not supported. An empty result is a loom.UserError."""
    if new_sequence_axis_typeinfo is not None:
        raise _loom.UserError("sequence.gather: loom takes no new_sequence_axis_typeinfo")
    return _loom.sequence.gather(_variable(seq), _variable(condition), name)


def scatter(seq: VariableLike, condition: VariableLike, new_sequence_axis_typeinfo: Any = None,
            name: str = "") -> Variable:
    """The inverse of gather: seq's steps placed in order where condition is non-zero, zeros
    elsewhere; on condition's axis. seq may be a batch value (one step per sequence, as CNTK's
    scatter(sequence.last(x), sequence.is_first(x))): it goes where condition is non-zero, which must
    be one step of each sequence (loom does not count them)."""
    if new_sequence_axis_typeinfo is not None:
        raise _loom.UserError("sequence.scatter: loom takes no new_sequence_axis_typeinfo")
    seq, condition = _variable(seq), _variable(condition)
    if seq.has_batch_axis and not seq.is_sequence:
        flags = _loom.not_equal(condition, 0.0)
        return _loom.element_times(_loom.sequence.broadcast_as(seq, condition, ""), flags, name)
    return _loom.sequence.scatter(seq, condition, name)




def unpack(x: VariableLike, padding_value: float, no_mask_output: bool = False, name: str = ""):
    """Each sequence as a padded batch value [T_max, *sample] and its mask [T_max].

    loom differs from CNTK: it returns the tuple (data, mask) of two Variables rather than one
    Function of two outputs; with no_mask_output=True, data alone.
    """
    data, mask = _loom.sequence._unpack(_variable(x), float(padding_value), name)
    return data if no_mask_output else (data, mask)
