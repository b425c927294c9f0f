"""Layers, as CNTK's ``C.layers``: each factory returns a callable that owns its parameters.

A layer's parameters are made at its first call (their shapes follow the input, as CNTK infers
them) and shared by later calls; ``layer.parameters`` lists them. Recurrent cells (LSTM, GRU,
RNNStep) are steps that Recurrence, Fold and BiRecurrence run over a sequence.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, List, Optional, Sequence, Union

import numpy as np

from . import _loom
from ._graph import ShapeLike, _parameter_named, _shape, _variable
from ._loom import Initializer, Variable
from ._recurrence import PythonRecurrence, PythonUnfold

Cell = _loom.layers.Cell
Layer = _loom.layers.Layer

__all__ = ["BiRecurrence", "Cell", "Delay", "Dense", "Dropout", "Embedding", "FixedEmbedding", "Fold", "For", "GRU", "LSTM", "Label",
           "Layer", "LayerNormalization", "PythonRecurrence", "PythonSequential", "PythonUnfold", "RNNStep",
           "Recurrence", "RecurrenceFrom", "Sequential", "Stabilizer", "UnfoldFrom", "default_options", "identity"]


#: What a keyword left out is: the value default_options gives it, else the layer's own default.
_UNSET = type("Unset", (), {"__repr__": lambda self: "<the default>"})()

# The keywords default_options sets, innermost block last.
_OPTIONS: List[dict] = []


class default_options:
    """CNTK's ``with default_options(activation=C.relu, init=..., bias=False, initial_state=0.1):``:
    inside the block, layers made without those keywords take them (Dense's activation, init and
    bias; Embedding's, LSTM's, GRU's and RNNStep's init; RNNStep's activation; Recurrence's and Fold's
    initial_state; enable_self_stabilization). Blocks nest; a keyword given to a layer wins. loom
    differs from CNTK: an activation set here does not reach LSTM and GRU (tanh only in loom), and
    there is no default_options_for."""

    def __init__(self, **options: Any) -> None:
        self._options = options

    def __enter__(self) -> "default_options":
        _OPTIONS.append(self._options)
        return self

    def __exit__(self, *exc: Any) -> None:
        _OPTIONS.remove(self._options)


def _option(name: str, given: Any, fallback: Any) -> Any:
    if given is not _UNSET:
        return given
    for options in reversed(_OPTIONS):
        if name in options:
            return options[name]
    return fallback


def _init(init: Any, what: str) -> Initializer:
    init = _option("init", init, None)
    if init is None:
        return _loom.glorot_uniform()
    if isinstance(init, numbers.Number):
        return _loom.constant_initializer(float(init))
    if isinstance(init, (list, tuple, np.ndarray)):
        return _loom._array_initializer(np.asarray(init, dtype=np.float64))  # the values themselves, as CNTK
    if not isinstance(init, Initializer):
        raise _loom.UserError(f"{what}: init is an Initializer, a number or an array; got {init!r}")
    return init


def _parameter_of_layer(layer: Any, name: str):
    # CNTK's layer.W, model.first.W: a parameter (or a named layer's scope) by name; see Variable's.
    if name.startswith("__"):
        raise AttributeError(name)
    return _parameter_named(layer.parameters, name, name)


def _update_signature(layer: Any, *shapes: Any) -> None:
    """CNTK's layer.update_signature(shape, ...): makes the layer's parameters for inputs of these
    sample shapes (batch inputs; loom otherwise makes them at the first call)."""
    from ._graph import input_variable
    layer(*[input_variable(shape) for shape in shapes])


Layer.__getattr__ = _parameter_of_layer
Cell.__getattr__ = _parameter_of_layer
Layer.update_signature = _update_signature


def _unsupported(what: str, **given: Any) -> None:
    for name, value in given.items():
        if value:
            raise _loom.UserError(f"{what}: loom's layer has no {name}")


def Dense(shape: ShapeLike, activation: Any = _UNSET, init: Any = _UNSET, input_rank: Any = None,
          map_rank: Any = None, bias: Any = _UNSET, init_bias: float = 0, name: str = "Dense") -> Layer:
    """y = activation(x W + b), W [x's last axis, *shape]: only x's last axis is mapped.

    activation: a function of a Variable (C.tanh, C.relu, ...) or None (the identity, CNTK's
    default). The bias starts at 0; input_rank, map_rank and another init_bias are not supported.
    Keywords left out come from default_options, else these defaults.
    """
    _unsupported("Dense", input_rank=input_rank is not None, map_rank=map_rank is not None, init_bias=init_bias != 0)
    activation, bias = _option("activation", activation, None), _option("bias", bias, True)
    return _loom.layers._Dense(list(_shape(shape, "Dense")), activation, bool(bias), _init(init, "Dense"), name)


def Embedding(shape: Any = None, init: Any = _UNSET, weights: Any = None, vocabulary: int = 0,
              name: str = "Embedding") -> Layer:
    """A table E [vocabulary, shape]: ids of sample shape (1,) read rows of it; any other input
    [..., V] is multiplied by it (x E, as CNTK's Embedding over one-hot input; then V is the
    vocabulary).

    loom differs from CNTK: for ids, say the vocabulary size (vocabulary=...), which a one-hot input
    would give. init may be the table's values (an array [V, shape]). weights, a fixed table [V, D]
    (then shape is left out), gives a function of x that multiplies x by it (or reads rows for ids,
    with vocabulary=V), with no parameter to learn.
    """
    if weights is not None:
        if shape is not None or init not in (None, _UNSET):
            raise _loom.UserError("Embedding: give weights (a fixed table) or shape and init, not both")
        return FixedEmbedding(np.asarray(weights, dtype=np.float64), int(vocabulary), name)
    if shape is None:
        raise _loom.UserError("Embedding: give the embedding's shape (or weights, a fixed table)")
    dims = _shape(shape, "Embedding")
    if len(dims) != 1:
        raise _loom.UserError(f"Embedding: the embedding is a vector; got shape {dims}")
    return _loom.layers._Embedding(dims[0], int(vocabulary), _init(init, "Embedding"), name)


class FixedEmbedding:
    """What Embedding(weights=table) returns: x E with the constant table E (or its rows for ids of
    sample shape (1,) when made with vocabulary=V); E is the table, as a constant."""

    def __init__(self, table: np.ndarray, vocabulary: int, name: str) -> None:
        if table.ndim != 2:
            raise _loom.UserError(f"Embedding: weights is a table [V, D]; got shape {table.shape}")
        self.E = _loom._constant(table, name + ".E" if name else "E")
        self._ids, self._name = vocabulary > 0, name

    def __call__(self, x: Any) -> Variable:
        x = _variable(x)
        if self._ids:
            return _loom.embedding(x, self.E, self._name)
        return _loom._times(x, self.E, self._name)

    @property
    def parameters(self) -> list:
        """None: the table is a constant."""
        return []


class PythonSequential:
    """What Sequential returns when some of its items are Python functions (C.relu, a lambda, Label,
    a Python-step Recurrence): calls each item on the previous one's result, in order."""

    def __init__(self, items: List[Any], name: str) -> None:
        self._items, self._name = items, name

    def __call__(self, x: Any) -> Variable:
        for item in self._items:
            x = item(x)
        return x

    @property
    def name(self) -> str:
        """The layer's name."""
        return self._name

    @property
    def parameters(self) -> list:
        """The parameters of its layers (those made so far), in order, each once."""
        seen, found = set(), []
        for item in self._items:
            for p in getattr(item, "parameters", []):
                if p not in seen:
                    seen.add(p)
                    found.append(p)
        return found

    def update_signature(self, *shapes: Any) -> None:
        """Makes the parameters of its layers for inputs of these sample shapes (as a Layer's)."""
        _update_signature(self, *shapes)

    def __getattr__(self, name: str):
        """A parameter, or a named layer's scope, by name (as a Layer's)."""
        if name.startswith("_"):
            raise AttributeError(name)
        return _parameter_named(self.parameters, name, name)

    def __repr__(self) -> str:
        return f"<loom.layers.PythonSequential '{self._name}' of {len(self._items)} items>"


def Sequential(layers: Sequence[Any], name: str = "Sequential") -> Any:
    """The layers applied in order: a list of Layers and functions of a Variable (C.relu, a lambda,
    Label('name'), ...); nested lists are flattened. Of Layers alone it is a Layer; with a function
    among them, a PythonSequential."""
    flat = []

    def add(items):
        for item in items:
            if isinstance(item, (list, tuple)):
                add(item)
            elif isinstance(item, Layer) or callable(item):
                flat.append(item)
            else:
                raise _loom.UserError(f"Sequential: takes loom layers and functions of a Variable; got {item!r}")

    add(layers)
    if all(isinstance(item, Layer) for item in flat):
        return _loom.layers._Sequential(flat, name)
    return PythonSequential(flat, name)


def For(what_range: Any, constructor: Callable, name: str = "For") -> Any:
    """Sequential([constructor(i) for i in what_range]) (or constructor() when it takes no
    argument), as CNTK's For: a stack of layers made in a loop."""
    import inspect
    try:
        takes_index = len(inspect.signature(constructor).parameters) > 0
    except (TypeError, ValueError):
        takes_index = True
    return Sequential([constructor(i) if takes_index else constructor() for i in what_range], name)


def identity(x: Any) -> Variable:
    """x itself (CNTK's layers.identity, e.g. as an activation)."""
    return _variable(x)


def Label(name: str) -> Callable:
    """A function that names its input: Label('h')(x) is alias(x, 'h'), to find the Variable by name."""
    return lambda x: _loom.alias(_variable(x), name)


def Delay(T: int = 1, initial_state: Any = None, name: str = "") -> Callable:
    """A function of a sequence: past_value(x, initial_state, T) for T > 0, future_value(x,
    initial_state, -T) for T < 0, x itself for T == 0."""
    from ._graph import future_value, past_value
    steps = int(T)
    if steps == 0:
        return identity
    if steps > 0:
        return lambda x: past_value(x, initial_state, steps, name=name)
    return lambda x: future_value(x, initial_state, -steps, name=name)


def Dropout(dropout_rate: float = 0.0, keep_prob: Any = None, seed: int = 0, name: str = "Dropout") -> Layer:
    """dropout(x, rate): active in training only, the identity in eval."""
    if keep_prob is not None:
        dropout_rate = 1.0 - keep_prob
    return _loom.layers._Dropout(float(dropout_rate), int(seed), name)


def LayerNormalization(initial_scale: float = 1, initial_bias: float = 0, epsilon: float = 1e-5,
                       name: str = "LayerNormalization") -> Layer:
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the last axis; scale starts at 1, bias at 0.
    loom differs from CNTK, whose layer divides by std + epsilon: the two agree to about epsilon."""
    _unsupported("LayerNormalization", initial_scale=initial_scale != 1, initial_bias=initial_bias != 0)
    return _loom.layers._LayerNormalization(float(epsilon), name)


class Stabilizer:
    """CNTK's self-stabilizer: x times a learned scalar beta = softplus(steepness * s) / steepness, s
    starting where beta is 1, so that the layer starts as the identity. Its parameter is made at the
    first call and shared by later calls."""

    def __init__(self, steepness: float = 4, enable_self_stabilization: bool = True, name: str = "Stabilizer"):
        self._steepness, self._enabled, self._name = float(steepness), bool(enable_self_stabilization), name
        self._s: Optional[Variable] = None

    def __call__(self, x: Any) -> Variable:
        x = _variable(x)
        if not self._enabled:
            return x
        if self._s is None:
            start = np.log(np.expm1(self._steepness)) / self._steepness  # softplus(steepness s) = steepness
            self._s = _loom._parameter([1], _loom.constant_initializer(float(start)), self._name + ".s", False)
        beta = _loom.softplus(self._s * self._steepness) * (1.0 / self._steepness)
        return _loom.element_times(beta, x, self._name)

    @property
    def parameters(self) -> list:
        """Its scalar s, once made."""
        return [] if self._s is None else [self._s]

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return _parameter_named(self.parameters, name, name)


def LSTM(shape: int, activation: Any = None, use_peepholes: bool = False, init: Any = _UNSET, init_bias: float = 0,
         enable_self_stabilization: Any = _UNSET, name: str = "LSTM") -> Cell:
    """An LSTM step of `shape` units (states h and c): gates from one affine map of [x, h] in the order
    input, forget, output, candidate; peepholes as CNTK's. Run it with Recurrence / Fold.

    tanh is its activation (another is not supported), its bias starts at 0, and there is no
    self-stabilization.
    """
    _unsupported("LSTM", activation=activation is not None and activation is not _loom.tanh,
                 init_bias=init_bias != 0,
                 enable_self_stabilization=_option("enable_self_stabilization", enable_self_stabilization, False))
    return _loom.layers._LSTM(int(shape), bool(use_peepholes), _init(init, "LSTM"), name)


def GRU(shape: int, activation: Any = None, init: Any = _UNSET, init_bias: float = 0,
        enable_self_stabilization: Any = _UNSET, name: str = "GRU") -> Cell:
    """A GRU step of `shape` units, as CNTK's. Run it with Recurrence / Fold."""
    _unsupported("GRU", activation=activation is not None and activation is not _loom.tanh,
                 init_bias=init_bias != 0,
                 enable_self_stabilization=_option("enable_self_stabilization", enable_self_stabilization, False))
    return _loom.layers._GRU(int(shape), _init(init, "GRU"), name)


def RNNStep(shape: int, activation: Any = _UNSET, init: Any = _UNSET, init_bias: float = 0,
            enable_self_stabilization: Any = _UNSET, name: str = "RNNStep") -> Cell:
    """h' = activation(x W + b + h U); CNTK's default activation is sigmoid."""
    _unsupported("RNNStep", init_bias=init_bias != 0,
                 enable_self_stabilization=_option("enable_self_stabilization", enable_self_stabilization, False))
    activation = _option("activation", activation, _loom.sigmoid)
    return _loom.layers._RNNStep(int(shape), activation, _init(init, "RNNStep"), name)


def _check_cell(cell: Any, what: str) -> Cell:
    if not isinstance(cell, Cell):
        raise _loom.UserError(f"{what}: takes a cell (LSTM, GRU, RNNStep); got {cell!r}")
    return cell


def Recurrence(step_function: Union[Cell, Callable], go_backwards: bool = False, initial_state: Any = _UNSET,
               return_full_state: bool = False, name: str = "Recurrence") -> Union[Layer, PythonRecurrence]:
    """The step run over each sequence (backwards from its end with go_backwards): the sequence of
    its output state.

    step_function: a cell (LSTM, GRU, RNNStep), or a Python function of loom ops taking the states
    then the input, (h, x) -> h' or (h, c, x) -> (h', c') (CNTK's convention). A Python step is
    called once, on placeholders of the previous states; the loop is closed in the graph
    (past_value / future_value and replace_placeholders), so Python is not called per step.
    initial_state (a number, an array, a Variable; for a Python step with several states, a tuple of
    one per state) starts every state. return_full_state (Python steps): every state's sequence, a
    tuple, instead of the first's. loom differs from CNTK: a cell's return_full_state is not
    supported (its output is h alone). initial_state left out: default_options', else 0.
    """
    initial_state = _option("initial_state", initial_state, 0)
    if isinstance(step_function, Cell):
        _unsupported("Recurrence", return_full_state=return_full_state)
        return _loom.layers._Recurrence(step_function, bool(go_backwards), _variable(initial_state), name)
    return PythonRecurrence(step_function, go_backwards, initial_state, return_full_state, False, False, name)


def RecurrenceFrom(step_function: Callable, go_backwards: bool = False, return_full_state: bool = False,
                   name: str = "RecurrenceFrom") -> PythonRecurrence:
    """Recurrence whose initial states are arguments: layer(h0, x) or layer(h0, c0, x), each a number,
    an array, a parameter or a per-sequence value (an encoder's final state). step_function is a
    Python step as Recurrence's (loom differs from CNTK: not a cell)."""
    return PythonRecurrence(step_function, go_backwards, None, return_full_state, False, True, name)


def Fold(folder_function: Union[Cell, Callable], go_backwards: bool = False, initial_state: Any = _UNSET,
         return_full_state: bool = False, name: str = "Fold") -> Union[Layer, PythonRecurrence]:
    """The step's final output state over each sequence (a batch value): a cell, or a Python step as
    Recurrence's (then return_full_state gives every final state, a tuple)."""
    initial_state = _option("initial_state", initial_state, 0)
    if isinstance(folder_function, Cell):
        _unsupported("Fold", return_full_state=return_full_state)
        return _loom.layers._Fold(folder_function, bool(go_backwards), _variable(initial_state), name)
    return PythonRecurrence(folder_function, go_backwards, initial_state, return_full_state, True, False, name)


def UnfoldFrom(generator_function: Callable, until_predicate: Any = None, length_increase: int = 1,
               name: str = "UnfoldFrom") -> PythonUnfold:
    """A sequence generated by feeding each output back: unfold(initial_state, dynamic_axes_like)
    gives y_t = generator_function(y_{t-1}) with y_{-1} = initial_state, as long as each sequence of
    dynamic_axes_like (the loop is closed in the graph, as Recurrence's). loom differs from CNTK:
    no until_predicate, and length_increase is 1."""
    _unsupported("UnfoldFrom", until_predicate=until_predicate is not None, length_increase=length_increase != 1)
    return PythonUnfold(generator_function, name)


def BiRecurrence(forward: Cell, backward: Cell, name: str = "BiRecurrence") -> Layer:
    """A forward and a backward recurrence over the same input, spliced along the last axis (the
    convenience function of CNTK's tutorial, which the seed program uses)."""
    return _loom.layers._BiRecurrence(_check_cell(forward, "BiRecurrence"), _check_cell(backward, "BiRecurrence"),
                                      name)


# The Transformer models, the attention family and generation: python/loom/models.py.
from .models import (AdditiveAttention, GeneralAttention, MultiHeadAttention, Seq2SeqTransformer,  # noqa: E402
                     TransformerLM, TransformerOptions, dot_product_attention, scaled_dot_product_attention,
                     self_attention)
from .models import __all__ as _models_all  # noqa: E402

__all__ += _models_all

# CNTK's AttentionModel (Bahdanau), callable inside a step function: python/loom/_attention_model.py.
from ._attention_model import AttentionModel  # noqa: E402

__all__ += ["AttentionModel"]
