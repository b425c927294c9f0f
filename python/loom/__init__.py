"""loom from Python: symbolic graphs over batches of sequences, recurrence loops and reverse-mode
gradients, under CNTK's Python names, so that a CNTK program runs with ``import loom as C``.

Build a graph from inputs, parameters and ops, then run it on numpy data::

    import numpy as np
    import loom as C

    x = C.sequence.input_variable(2, name="x")
    w = C.parameter((2, 1), init=C.glorot_normal(), name="w")
    f = C.sequence.reduce_sum(C.tanh(C.times(x, w)))
    f.eval({x: [np.ones((3, 2), np.float32), np.ones((1, 2), np.float32)]})  # array [2, 1]
    f.grad({x: ...}, wrt=[w])                                                # array [2, 1]

Where loom differs from CNTK, the docstring of the name says so. The differences that touch every
program: one class, ``Variable`` (also named ``Function``), is both an op's result and its single
output; each sequence input has its own sequence axis; inputs have no dtype of their own (a graph
runs in float64 when its data or parameters are float64); errors are ``loom.UserError`` (a
ValueError) and ``loom.DataError`` (an OSError).
"""

from __future__ import annotations

from . import _loom, layers, sequence
from ._graph import (classification_error, combine, constant, cross_entropy_with_softmax, dropout,
                     future_value, input_variable, load_model, log_softmax, one_hot, parameter, past_value,
                     placeholder, placeholder_variable, reduce_log_sum_exp, reduce_max, reduce_mean,
                     reduce_min, reduce_sum, reshape, slice, softmax, splice, times, transpose)
from ._loom import (DataError, Initializer, Parameter, SequenceAxis, UserError, Value, Variable, abs, alias,
                    binary_cross_entropy, clip, constant_initializer, cos, cosine_distance, element_divide,
                    element_max, element_min, element_select, element_times, embedding, equal, exp, gelu,
                    glorot_normal, glorot_uniform, greater, greater_equal, layer_norm, less, less_equal, log,
                    log_add_exp, minus, negate, normal, not_equal, plus, reciprocal, relu, set_seed, sigmoid, sin,
                    softplus, sqrt, square, squared_error, stop_gradient, tanh, times_transpose, uniform, zeros)

# Parameters in and out as safetensors (python/src/models.cpp).
from ._loom import load_safetensors, read_safetensors, save_safetensors  # noqa: E402

from ._version import __version__  # noqa: E402  (the same as _loom.__version__)

#: CNTK's name for a graph's result: in loom the same class as Variable (an op's result is a
#: Variable that is its own single output).
Function = Variable


def to_precision(parameters, dtype) -> None:
    """Converts each parameter's storage to dtype (numpy.float32 or numpy.float64) in place, as
    PyTorch's module.double(): float to double is exact, double to float rounds. loom's."""
    from ._graph import _f64
    _loom._to_precision(list(parameters), _f64(dtype, "to_precision"))


class Axis:
    """CNTK's axis helpers, as far as loom has them: the named axes input_variable's dynamic_axes and
    the reductions' axis take, and new sequence axes (Axis('name'))."""

    @staticmethod
    def default_batch_axis():
        """The batch axis: input_variable(dynamic_axes=[Axis.default_batch_axis()]) is a batch input."""
        from ._graph import BATCH_AXIS
        return BATCH_AXIS

    @staticmethod
    def default_dynamic_axis():
        """The default sequence axis, after the batch axis in dynamic_axes: a sequence input."""
        from ._graph import DYNAMIC_AXIS
        return DYNAMIC_AXIS

    @staticmethod
    def all_static_axes():
        """Every static axis, as a reduction's axis (the same as axis=None)."""
        from ._graph import ALL_STATIC_AXES
        return ALL_STATIC_AXES

    @staticmethod
    def new_unique_dynamic_axis(name: str = "") -> SequenceAxis:
        """A new sequence axis to share between sequence inputs (loom.SequenceAxis)."""
        return SequenceAxis()

    @staticmethod
    def all_axes():
        """Every axis, the batch's and the sequence's too, as a reduction's axis (reduce_sum, reduce_mean,
        reduce_max, reduce_min, reduce_log_sum_exp): one number, of shape (1,) (CNTK's is of shape ())."""
        from ._graph import ALL_AXES
        return ALL_AXES

    @staticmethod
    def new_leading_axis():
        """An axis before the first, as splice's axis: the inputs stacked along a new axis."""
        from ._graph import NEW_LEADING_AXIS
        return NEW_LEADING_AXIS

    def __new__(cls, name):
        """Axis('name') is a new sequence axis (loom.SequenceAxis), as CNTK's named dynamic axis: give it
        to sequence.input_variable(sequence_axis=...) or input_variable(dynamic_axes=[Axis.default_batch_axis(),
        axis]). Axis(2), a static axis, is the int 2 (loom's static axes are ints)."""
        if isinstance(name, bool) or not isinstance(name, (str, int)):
            raise UserError(f"Axis: takes a name (a sequence axis) or an int (a static axis); got {name!r}")
        return int(name) if isinstance(name, int) else SequenceAxis()


__all__ = [
    "Axis", "DataError", "Function", "Initializer", "Parameter", "SequenceAxis", "UserError", "Value", "Variable",
    "abs", "alias", "binary_cross_entropy", "classification_error", "clip", "combine", "constant",
    "constant_initializer", "cos", "cosine_distance", "cross_entropy_with_softmax", "dropout", "element_divide",
    "element_max", "element_min", "element_select", "element_times", "embedding", "equal", "exp",
    "future_value", "gelu", "glorot_normal", "glorot_uniform", "greater", "greater_equal", "input_variable",
    "layer_norm", "less", "less_equal", "load_model", "log", "log_add_exp", "log_softmax", "minus", "negate",
    "normal", "not_equal", "one_hot", "parameter", "past_value", "placeholder", "placeholder_variable", "plus",
    "reciprocal", "reduce_log_sum_exp", "reduce_max", "reduce_mean", "reduce_min", "reduce_sum", "relu",
    "reshape", "layers", "sequence", "set_seed", "to_precision", "sigmoid", "sin", "slice", "softmax", "softplus", "splice", "sqrt",
    "square", "squared_error", "stop_gradient", "tanh", "times", "times_transpose", "transpose", "uniform",
    "zeros",
]

# Training under CNTK's names (loom.learners, loom.train, loom.logging): learners, schedules, Trainer, fit.
from . import learners, logging, train  # noqa: E402
from .learners import (Learner, LearningRate, UnitType, adadelta, adagrad, adam, adamw, constant_rate,  # noqa: E402
                       exponential_decay, fsadagrad, learning_parameter_schedule,
                       learning_parameter_schedule_per_sample, learning_rate_schedule,
                       momentum_as_time_constant_schedule, momentum_schedule, momentum_sgd, nesterov, rmsprop, sgd,
                       step_decay, warmup_cosine_decay, warmup_linear_decay)
from .train import Trainer, fit  # noqa: E402

__all__ += [
    "Learner", "LearningRate", "Trainer", "UnitType", "adadelta", "adagrad", "adam", "adamw", "constant_rate",
    "exponential_decay", "fit", "fsadagrad", "learners", "learning_parameter_schedule",
    "learning_parameter_schedule_per_sample", "learning_rate_schedule",
    "logging", "momentum_as_time_constant_schedule", "momentum_schedule", "momentum_sgd", "nesterov", "rmsprop",
    "sgd", "step_decay", "train", "warmup_cosine_decay", "warmup_linear_decay",
]

# Function.forward / Function.backward: the state forward returns (CNTK's BackPropState).
from ._loom import BackPropState  # noqa: E402

__all__ += ["BackPropState"]
__all__ += ["load_safetensors", "read_safetensors", "save_safetensors"]

# The engine's process-wide settings (python/src/engine.cpp): threads and the precision of products.
from ._loom import (bf16_kernels_chosen, gemm_kernels, get_bf16_products, get_matmul_precision,  # noqa: E402
                    inter_op_threads, set_bf16_products, set_blas_threads, set_inter_op_threads,
                    set_matmul_precision)


class matmul_precision:
    """Sets the precision of float products ("highest" or "medium", as set_matmul_precision) for a
    ``with`` block and puts back the one before when it ends, also by an exception: evaluation at
    "highest" inside a program that trains at "medium". The setting is the process's, not the
    thread's (loom's MatmulPrecisionScope)."""

    def __init__(self, precision: str) -> None:
        self._precision = precision
        self._before: list = []

    def __enter__(self) -> "matmul_precision":
        self._before.append(get_matmul_precision())
        set_matmul_precision(self._precision)
        return self

    def __exit__(self, *exc: object) -> None:
        set_matmul_precision(self._before.pop())


__all__ += ["bf16_kernels_chosen", "gemm_kernels", "get_bf16_products", "get_matmul_precision", "inter_op_threads",
            "matmul_precision", "set_bf16_products", "set_blas_threads", "set_inter_op_threads",
            "set_matmul_precision"]

# CNTK's submodules that programs import names from: cntk.losses, cntk.metrics, cntk.initializer, cntk.ops.
from . import initializer, losses, metrics, ops  # noqa: E402

__all__ += ["initializer", "losses", "metrics", "ops"]

# CNTK's activations and shape ops composed from loom's own (python/loom/_composite.py).
from ._composite import (cosh, elu, expand_dims, leaky_relu, param_relu, reduce_l1, reduce_l2,  # noqa: E402
                         reduce_sum_square, selu, sinh, softsign, squeeze, swapaxes, tan)

# The initializers with CNTK's keywords (seed, output_rank, filter_rank): python/loom/initializer.py.
from .initializer import glorot_normal, glorot_uniform, normal, uniform  # noqa: E402,F811

# CNTK's names that loom composes in python/loom/_graph.py, and its older spellings.
from ._graph import (Constant, argmax, argmin, gather, hardmax, ones_like, reduce_prod, zeros_like)  # noqa: E402
from ._loom import ceil, floor, round  # noqa: E402

# CNTK's cntk.default_options (the same as C.layers.default_options).
from .layers import default_options  # noqa: E402

#: CNTK's older name of input_variable (cntk.input).
input = input_variable

__all__ += ["Constant", "argmax", "argmin", "ceil", "default_options", "floor", "gather", "hardmax", "input", "ones_like", "reduce_prod", "round",
            "zeros_like"]

__all__ += ["cosh", "elu", "expand_dims", "leaky_relu", "param_relu", "reduce_l1", "reduce_l2", "reduce_sum_square",
            "selu", "sinh", "softsign", "squeeze", "swapaxes", "tan"]

# Question answering and text (loom.qa, loom.text), the Batcher (loom.io), ops across a batch
# (loom.batch), ParameterAverage and Session: what samples/python/qa_similarity.py trains with.
from . import batch, io, qa, text  # noqa: E402
from ._loom import Session  # noqa: E402
from .train import ParameterAverage  # noqa: E402

__all__ += ["ParameterAverage", "Session", "batch", "io", "qa", "text"]
