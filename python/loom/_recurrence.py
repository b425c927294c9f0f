"""Recurrence, Fold and RecurrenceFrom over a step function written in Python, as CNTK builds them.

The step is called once, symbolically, on placeholders of the states delayed by one step
(past_value, or future_value going backwards); replace_placeholders then binds each placeholder to
the state the step returns, which closes the loop in the graph. Python is not called per time step:
the engine runs the loop.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _loom
from ._graph import _variable, future_value, past_value, placeholder

Variable = _loom.Variable


def _extension_arguments(f: Callable) -> Optional[List[str]]:
    """The arguments without a default of one of the extension's functions (C.plus, C.element_max: a
    step as CNTK's Recurrence(C.plus)), read from the signature pybind11 writes on its docstring's
    first line; None when there is none."""
    first = (getattr(f, "__doc__", None) or "").split("\n", 1)[0]
    opened = first.find("(")
    closed = first.rfind(") ->")
    if opened < 0 or closed < opened:
        return None
    arguments, depth, current = [], 0, ""
    for ch in first[opened + 1:closed] + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
        else:
            current += ch
    return [a for a in arguments if a and "=" not in a and not a.startswith("*")]


def _state_count(step: Callable, what: str) -> int:
    """How many states the step carries: its positional arguments less the one input (CNTK's
    convention: (h, x) -> h', (h, c, x) -> (h', c'))."""
    if not callable(step):
        raise _loom.UserError(f"{what}: the step is a cell (LSTM, GRU, RNNStep) or a Python function "
                              f"(h, x) -> h'; got {step!r}")
    try:
        signature = inspect.signature(step)
        positional = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        positional = _extension_arguments(step)
        if positional is None:
            raise _loom.UserError(f"{what}: cannot read the arguments of the step {step!r}; give a Python function "
                                  "(h, x) -> h' or (h, c, x) -> (h', c')") from None
    if len(positional) < 2:
        raise _loom.UserError(f"{what}: the step takes the states, then the input ((h, x) -> h' or (h, c, x) -> "
                              f"(h', c')); {getattr(step, '__name__', step)!r} takes {len(positional)} argument(s)")
    return len(positional) - 1


def _initial_states(initial_state: Any, count: int, what: str) -> List[Variable]:
    """One initial state per state: a tuple of `count` entries gives each its own; anything else (a
    number, an array, a Variable) starts every state."""
    if count > 1 and isinstance(initial_state, tuple):
        if len(initial_state) != count:
            raise _loom.UserError(f"{what}: initial_state has {len(initial_state)} entries; the step carries "
                                  f"{count} states")
        return [_variable(s) for s in initial_state]
    return [_variable(initial_state)] * count


def _states_out(result: Any, count: int, what: str) -> List[Variable]:
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) != count:
        raise _loom.UserError(f"{what}: the step takes {count} state(s) and returns {len(outs)}; it returns the "
                              "new states in the order it takes them")
    for k, out in enumerate(outs):
        if not isinstance(out, Variable):
            raise _loom.UserError(f"{what}: the step returns Variables (loom ops); state {k} is {out!r}")
    return outs


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _loop(step: Callable, x: Variable, go_backwards: bool, initial_states: List[Variable], what: str
          ) -> List[Variable]:
    """The step's states over x, one per step, the loop closed in the graph. A state whose initial
    value has a shape gets a placeholder of that shape; the others' shapes are inferred."""
    count = len(initial_states)
    delay = future_value if go_backwards else past_value
    holders = [placeholder(tuple(init.shape)) if init.shape else placeholder() for init in initial_states]
    previous = [delay(h, init) for h, init in zip(holders, initial_states)]
    try:
        result = step(*previous, x)
    except _loom.UserError as e:
        if "no shape yet" in str(e) and not all(i.shape for i in initial_states):
            raise _loom.UserError(
                f"{what}: the step needs the shape of its states before the loop is closed (a layer in it makes "
                "its parameters from its input, as Dense(n)(h) does): give initial_state an array of each state's "
                f"shape, e.g. initial_state=np.zeros(n) (loom differs from CNTK here); the step said: {e}") from None
        known = ", ".join(_shape_str(i.shape) if i.shape else "inferred" for i in initial_states)
        raise _loom.UserError(f"{what}: the step fails on states of shape {known} and an input of shape "
                              f"{_shape_str(x.shape)}: {e}") from None
    outs = _states_out(result, count, what)
    try:
        outs[0].replace_placeholders(dict(zip(holders, outs)))
    except _loom.UserError as e:
        raise _loom.UserError(f"{what}: the step returns states of other shapes than it takes (initial_state "
                              f"shapes {', '.join(_shape_str(i.shape) for i in initial_states)}): {e}") from None
    for k, out in enumerate(outs):
        try:
            out.shape
        except _loom.UserError as e:
            raise _loom.UserError(
                f"{what}: the loop cannot be built from the step's state {k}: each new state has the shape of the "
                f"state it replaces and is a sequence over the input x (of shape {_shape_str(x.shape)}): {e}") from None
        if not out.is_sequence:
            raise _loom.UserError(f"{what}: the step's state {k} does not depend on the input x (of shape "
                                  f"{_shape_str(x.shape)}): a recurrence's states are sequences over it")
    return outs


class _PythonLayer:
    """What the layers over a Python function share: a name, and the parameters the function used in
    the last call (empty before the first call)."""

    _what: str
    _last: List[Variable]

    @property
    def name(self) -> str:
        """The layer's name."""
        return self._what

    @property
    def parameters(self) -> list:
        """The parameters the function used in the last call (empty before the first call)."""
        seen, found = set(), []
        for out in self._last:
            for p in out.parameters:
                if p not in seen:
                    seen.add(p)
                    found.append(p)
        return found


class PythonRecurrence(_PythonLayer):
    """A recurrence over a step function written in Python (what Recurrence, Fold and RecurrenceFrom
    return for a Python step): call it on a sequence. Each call builds the loop anew around the
    step; the step's parameters are shared when the step closes over them (as CNTK's)."""

    def __init__(self, step: Callable, go_backwards: bool, initial_state: Any, return_full_state: bool,
                 fold: bool, from_states: bool, name: str) -> None:
        self._what = name
        self._count = _state_count(step, name)
        self._step = step
        self._go_backwards = bool(go_backwards)
        self._initial_state = initial_state
        self._full = bool(return_full_state)
        self._fold = fold
        self._from = from_states
        self._last: List[Variable] = []

    def __call__(self, *args: Any) -> Union[Variable, Tuple[Variable, ...]]:
        if self._from:
            if len(args) != self._count + 1:
                raise _loom.UserError(f"{self._what}: takes the {self._count} initial state(s), then the sequence; "
                                      f"got {len(args)} argument(s)")
            inits = [_variable(a) for a in args[:-1]]
        else:
            if len(args) != 1:
                raise _loom.UserError(f"{self._what}: takes one sequence; got {len(args)} argument(s)")
            inits = _initial_states(self._initial_state, self._count, self._what)
        x = _variable(args[-1])
        if not x.is_sequence:
            raise _loom.UserError(f"{self._what}: runs over a sequence; got a Variable of shape "
                                  f"{_shape_str(x.shape)} without a sequence axis")
        outs = _loop(self._step, x, self._go_backwards, inits, self._what)
        if self._fold:
            pick = _loom.sequence.first if self._go_backwards else _loom.sequence.last
            outs = [pick(o) for o in outs]
        self._last = outs
        if self._full and len(outs) > 1:
            return tuple(outs)
        return outs[0]

    def __repr__(self) -> str:
        return f"<loom.layers {self._what} over {getattr(self._step, '__name__', 'a step')}>"


class PythonUnfold(_PythonLayer):
    """What UnfoldFrom returns: call it as unfold(initial_state, dynamic_axes_like)."""

    def __init__(self, generator: Callable, name: str) -> None:
        if not callable(generator):
            raise _loom.UserError(f"{name}: the generator is a Python function of the previous output; got "
                                  f"{generator!r}")
        self._generator = generator
        self._what = name
        self._last: List[Variable] = []

    def __call__(self, initial_state: Any, dynamic_axes_like: Any) -> Variable:
        like = _variable(dynamic_axes_like)
        if not like.is_sequence:
            raise _loom.UserError(f"{self._what}: dynamic_axes_like is a sequence (the output takes its lengths); got "
                                  f"a Variable of shape {_shape_str(like.shape)} without a sequence axis")
        init = _variable(initial_state)
        holder = placeholder(tuple(init.shape)) if init.shape else placeholder()
        # The previous output on like's sequence axis: is_first(like) * 0 is exactly 0 whatever like holds.
        previous = past_value(holder, init) + _loom.sequence.is_first(like) * 0
        try:
            out = self._generator(previous)
        except _loom.UserError as e:
            raise _loom.UserError(f"{self._what}: the generator fails on a previous output of shape "
                                  f"{_shape_str(init.shape) if init.shape else 'inferred'}: {e}") from None
        out = _states_out(out, 1, self._what)[0]
        try:
            out.replace_placeholders({holder: out})
            out.shape
        except _loom.UserError as e:
            raise _loom.UserError(f"{self._what}: the generator returns an output of another shape than it takes "
                                  f"(initial_state of shape {_shape_str(init.shape)}): {e}") from None
        self._last = [out]
        return out

    def __repr__(self) -> str:
        return f"<loom.layers {self._what} over {getattr(self._generator, '__name__', 'a generator')}>"
