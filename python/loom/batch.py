"""Ops across a batch's items (graph/ops.hpp's batch::), e.g. a listwise loss over one question's
candidates: ``-C.batch.reduce_sum(label * C.log(C.batch.softmax(10 * cosine)))``. Not in CNTK, whose
reductions over the batch axis are reduce_sum(x, axis=Axis.default_batch_axis()); each result here is
a static value (reduce_*) or a batch value like x (softmax)."""

from __future__ import annotations

from typing import Any

from . import _loom
from ._graph import _variable
from ._loom import Variable


def reduce_sum(x: Any, name: str = "") -> Variable:
    """The sum over the items: a static value of x's sample shape."""
    return _loom.batch.reduce_sum(_variable(x), name)


def reduce_mean(x: Any, name: str = "") -> Variable:
    """The mean over the items: a static value of x's sample shape."""
    return _loom.batch.reduce_mean(_variable(x), name)


def reduce_max(x: Any, name: str = "") -> Variable:
    """The maximum over the items: a static value of x's sample shape."""
    return _loom.batch.reduce_max(_variable(x), name)


def softmax(x: Any, name: str = "") -> Variable:
    """Softmax across the items, element by element: a batch value like x."""
    return _loom.batch.softmax(_variable(x), name)


def broadcast_as(x: Any, like: Any, name: str = "") -> Variable:
    """A static value repeated on every item of like's batch."""
    return _loom.batch.broadcast_as(_variable(x), _variable(like), name)


__all__ = ["broadcast_as", "reduce_max", "reduce_mean", "reduce_sum", "softmax"]
