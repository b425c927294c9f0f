"""CNTK's ``cntk.ops``: every op, as at the package's top level (``C.ops.times is C.times``), and
``ops.sequence`` (``cntk.ops.sequence``), so that programs importing from CNTK's submodules run."""

from . import sequence
from ._graph import (classification_error, combine, constant, cross_entropy_with_softmax, dropout,
                     future_value, input_variable, log_softmax, one_hot, parameter, past_value, placeholder,
                     placeholder_variable, reduce_log_sum_exp, reduce_max, reduce_mean, reduce_min, reduce_sum,
                     reshape, slice, softmax, splice, times, transpose)
from ._loom import (abs, alias, binary_cross_entropy, clip, cos, cosine_distance, element_divide, element_max,
                    element_min, element_select, element_times, embedding, equal, exp, gelu, greater,
                    greater_equal, layer_norm, less, less_equal, log, log_add_exp, minus, negate, not_equal, plus,
                    reciprocal, relu, sigmoid, sin, softplus, sqrt, square, squared_error, stop_gradient, tanh,
                    times_transpose)

__all__ = [
    "abs", "alias", "binary_cross_entropy", "classification_error", "clip", "combine", "constant", "cos",
    "cosine_distance", "cross_entropy_with_softmax", "dropout", "element_divide", "element_max", "element_min",
    "element_select", "element_times", "embedding", "equal", "exp", "future_value", "gelu", "greater",
    "greater_equal", "input_variable", "layer_norm", "less", "less_equal", "log", "log_add_exp", "log_softmax",
    "minus", "negate", "not_equal", "one_hot", "parameter", "past_value", "placeholder", "placeholder_variable",
    "plus", "reciprocal", "reduce_log_sum_exp", "reduce_max", "reduce_mean", "reduce_min", "reduce_sum", "relu",
    "reshape", "sequence", "sigmoid", "sin", "slice", "softmax", "softplus", "splice", "sqrt", "square",
    "squared_error", "stop_gradient", "tanh", "times", "times_transpose", "transpose",
]

# CNTK's names composed in python/loom/_graph.py and python/loom/_composite.py, and the steps.
from ._composite import (cosh, elu, expand_dims, leaky_relu, param_relu, reduce_l1, reduce_l2,  # noqa: E402
                         reduce_sum_square, selu, sinh, softsign, squeeze, swapaxes, tan)
from ._graph import Constant, argmax, argmin, gather, hardmax, ones_like, reduce_prod, zeros_like  # noqa: E402
from ._loom import ceil, floor, round  # noqa: E402

__all__ += ["Constant", "argmax", "argmin", "ceil", "cosh", "elu", "expand_dims", "floor", "gather", "hardmax", "leaky_relu",
            "ones_like", "param_relu", "reduce_l1", "reduce_l2", "reduce_prod", "reduce_sum_square", "round", "selu",
            "sinh", "softsign", "squeeze", "swapaxes", "tan", "zeros_like"]
