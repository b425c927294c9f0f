"""Every bound op: its value against numpy computed here, its gradient by central differences in
float64 (for the inputs and the parameters it reads)."""

import math

import numpy as np
import pytest

import loom as C
from support import assert_close, numeric_gradient, parameter_numeric_gradient, rng, total

erf = np.vectorize(math.erf)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _softmax(a, axis=-1):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name, op, numpy reference, how to draw the input (a batch [3, 2, 4] in float64)
UNARY = [
    ("exp", C.exp, np.exp, "any"),
    ("log", C.log, np.log, "positive"),
    ("sqrt", C.sqrt, np.sqrt, "positive"),
    ("square", C.square, np.square, "any"),
    ("abs", C.abs, np.abs, "nonzero"),
    ("sin", C.sin, np.sin, "any"),
    ("cos", C.cos, np.cos, "any"),
    ("tanh", C.tanh, np.tanh, "any"),
    ("sigmoid", C.sigmoid, _sigmoid, "any"),
    ("relu", C.relu, lambda a: np.maximum(a, 0), "nonzero"),
    ("gelu", C.gelu, lambda a: a * 0.5 * (1 + erf(a / np.sqrt(2))), "any"),
    ("softplus", C.softplus, lambda a: np.log1p(np.exp(a)), "any"),
    ("reciprocal", C.reciprocal, lambda a: 1 / a, "positive"),
    ("negate", C.negate, np.negative, "any"),
    ("unary minus", lambda x: -x, np.negative, "any"),
    ("abs()", lambda x: abs(x), np.abs, "nonzero"),
    ("alias", C.alias, lambda a: a, "any"),
    ("softmax", C.softmax, lambda a: _softmax(a.reshape(a.shape[0], -1)).reshape(a.shape), "any"),
    ("softmax axis 0", lambda x: C.softmax(x, axis=0), lambda a: _softmax(a, axis=1), "any"),
    ("log_softmax axis -1", lambda x: C.log_softmax(x, axis=-1), lambda a: np.log(_softmax(a, axis=-1)), "any"),
    ("reduce_sum", C.reduce_sum, lambda a: a.sum(axis=(1, 2), keepdims=True), "any"),
    ("reduce_sum axis 1", lambda x: C.reduce_sum(x, axis=1), lambda a: a.sum(axis=2, keepdims=True), "any"),
    ("reduce_sum keepdims False", lambda x: C.reduce_sum(x, axis=0, keepdims=False), lambda a: a.sum(axis=1), "any"),
    ("reduce_mean", lambda x: C.reduce_mean(x, axis=-1), lambda a: a.mean(axis=2, keepdims=True), "any"),
    ("reduce_max", lambda x: C.reduce_max(x, axis=1), lambda a: a.max(axis=2, keepdims=True), "any"),
    ("reduce_min", lambda x: C.reduce_min(x, axis=0), lambda a: a.min(axis=1, keepdims=True), "any"),
    ("reduce_log_sum_exp", lambda x: C.reduce_log_sum_exp(x, axis=1),
     lambda a: np.log(np.exp(a).sum(axis=2, keepdims=True)), "any"),
    ("slice", lambda x: C.slice(x, 1, 1, 3), lambda a: a[:, :, 1:3], "any"),
    ("reshape", lambda x: C.reshape(x, (4, 2)), lambda a: a.reshape(3, 4, 2), "any"),
    ("transpose", C.transpose, lambda a: a.transpose(0, 2, 1), "any"),
    ("splice", lambda x: C.splice(x, C.exp(x), axis=0), lambda a: np.concatenate([a, np.exp(a)], axis=1), "any"),
    ("times", lambda x: C.times(x, np.arange(12.0).reshape(4, 3) / 10),
     lambda a: a @ (np.arange(12.0).reshape(4, 3) / 10), "any"),
    ("@", lambda x: x @ np.ones((4, 2)), lambda a: a @ np.ones((4, 2)), "any"),
    ("times_transpose", lambda x: C.times_transpose(x, np.arange(12.0).reshape(3, 4) / 10),
     lambda a: a @ (np.arange(12.0).reshape(3, 4) / 10).T, "any"),
    ("clip", lambda x: C.clip(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), "away from 0.5"),
]


def _draw(kind, shape=(3, 2, 4), seed=1):
    a = rng(seed).normal(size=shape)
    if kind == "positive":
        a = np.abs(a) + 0.2
    elif kind in ("nonzero", "away from 0.5"):
        a = np.where(np.abs(a) < 0.1, a + 0.3, a)
        if kind == "away from 0.5":
            a = np.where(np.abs(np.abs(a) - 0.5) < 0.05, a + 0.2, a)
    return a


@pytest.mark.parametrize("name,op,reference,kind", UNARY, ids=[u[0] for u in UNARY])
def test_unary_value_and_gradient(name, op, reference, kind):
    x = C.input_variable((2, 4), name="x")
    f = op(x)
    a = _draw(kind)
    assert_close(f.eval({x: a}), reference(a), rtol=1e-9, atol=1e-12)
    assert f.eval({x: a.astype(np.float32)}).dtype == np.float32
    assert_close(f.eval({x: a.astype(np.float32)}), reference(a), rtol=1e-4, atol=1e-5)
    # Weighted so that errors cannot cancel in the sum.
    weights = rng(2).uniform(0.5, 1.5, size=f.shape)
    g = f * C.constant(weights)
    analytic = g.grad({x: a}, wrt=[x])
    numeric = numeric_gradient(lambda: total(g.eval({x: a})), a)
    assert_close(analytic, numeric, rtol=1e-5, atol=1e-7)


BINARY = [
    ("plus", C.plus, np.add, "any"),
    ("+", lambda a, b: a + b, np.add, "any"),
    ("minus", C.minus, np.subtract, "any"),
    ("-", lambda a, b: a - b, np.subtract, "any"),
    ("element_times", C.element_times, np.multiply, "any"),
    ("*", lambda a, b: a * b, np.multiply, "any"),
    ("element_divide", C.element_divide, np.divide, "positive"),
    ("/", lambda a, b: a / b, np.divide, "positive"),
    ("log_add_exp", C.log_add_exp, np.logaddexp, "any"),
    ("element_max", C.element_max, np.maximum, "any"),
    ("element_min", C.element_min, np.minimum, "any"),
    ("squared_error", C.squared_error, lambda a, b: ((a - b) ** 2).sum(axis=-1, keepdims=True), "any"),
    ("cosine_distance", C.cosine_distance,
     lambda a, b: (a * b).sum(-1, keepdims=True) / np.linalg.norm(a, axis=-1, keepdims=True)
     / np.linalg.norm(b, axis=-1, keepdims=True), "any"),
    ("cross_entropy_with_softmax", C.cross_entropy_with_softmax,
     lambda z, y: -(y * np.log(_softmax(z))).sum(-1, keepdims=True), "any"),
]


@pytest.mark.parametrize("name,op,reference,kind", BINARY, ids=[b[0] for b in BINARY])
def test_binary_value_and_gradient(name, op, reference, kind):
    x = C.input_variable(4, name="x")
    y = C.input_variable(4, name="y")
    f = op(x, y)
    a = _draw("any", (3, 4), seed=3)
    b = _draw(kind, (3, 4), seed=4)
    if name == "cross_entropy_with_softmax":
        b = _softmax(b)  # labels that sum to 1
    assert_close(f.eval({x: a, y: b}), reference(a, b), rtol=1e-9, atol=1e-12)
    weights = rng(5).uniform(0.5, 1.5, size=f.shape)
    g = f * C.constant(weights)
    grads = g.grad({x: a, y: b}, wrt=[x, y])
    assert_close(grads[x], numeric_gradient(lambda: total(g.eval({x: a, y: b})), a), rtol=1e-5, atol=1e-7)
    assert_close(grads[y], numeric_gradient(lambda: total(g.eval({x: a, y: b})), b), rtol=1e-5, atol=1e-7)


COMPARISONS = [
    ("greater", C.greater, np.greater), ("less", C.less, np.less), ("equal", C.equal, np.equal),
    ("greater_equal", C.greater_equal, np.greater_equal), ("less_equal", C.less_equal, np.less_equal),
    ("not_equal", C.not_equal, np.not_equal),
]


@pytest.mark.parametrize("name,op,reference", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparisons_give_one_or_zero(name, op, reference):
    x = C.input_variable(5)
    a = np.array([[-1.0, 0.0, 0.5, 2.0, 0.25]])
    f = op(x, C.constant(np.array([0.0, 0.0, 1.0, 2.0, -3.0])))
    assert_close(f.eval(a), reference(a, [0.0, 0.0, 1.0, 2.0, -3.0]).astype(np.float32))


def test_broadcasting_with_numbers_and_arrays_on_either_side():
    x = C.input_variable(3)
    a = np.array([[1.0, 2.0, 4.0]])
    assert_close((2 - x).eval(a), 2 - a)
    assert_close((x * 2).eval(a), a * 2)
    assert_close((1 / x).eval(a), 1 / a)
    assert_close((x + np.array([1.0, 0.0, -1.0])).eval(a), a + [1.0, 0.0, -1.0])
    assert_close((x - [1.0, 1.0, 1.0]).eval(a), a - 1)


def test_element_select_picks_and_routes_the_gradient():
    c = C.input_variable(3, name="c")
    x = C.input_variable(3, name="x")
    f = C.element_select(c, x * 2, -1e30)
    cond = np.array([[1.0, 0.0, 1.0]])
    a = np.array([[0.5, 1.5, -2.0]])
    assert_close(f.eval({c: cond, x: a}), np.where(cond != 0, a * 2, -1e30))
    assert_close(f.grad({c: cond, x: a}, wrt=[x]), np.where(cond != 0, 2.0, 0.0))


def test_stop_gradient_passes_values_and_no_gradient():
    x = C.input_variable(2)
    f = C.stop_gradient(x * 3) + x
    a = np.array([[1.0, 2.0]])
    assert_close(f.eval(a), 4 * a)
    assert_close(f.grad(a), np.ones_like(a))


def test_binary_cross_entropy():
    p = C.input_variable(3, name="p")
    t = C.input_variable(3, name="t")
    f = C.binary_cross_entropy(p, t)
    pa = np.array([[0.2, 0.7, 0.9], [0.5, 0.4, 0.1]])
    ta = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    expected = -(ta * np.log(pa) + (1 - ta) * np.log(1 - pa)).sum(-1, keepdims=True)
    assert_close(f.eval({p: pa, t: ta}), expected)
    assert_close(f.grad({p: pa, t: ta}, wrt=[p]), numeric_gradient(lambda: total(f.eval({p: pa, t: ta})), pa),
                 rtol=1e-5)


def test_classification_error_and_one_hot():
    z = C.input_variable(3)
    y = C.input_variable(3)
    za = np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4]])
    ya = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert_close(C.classification_error(z, y).eval({z: za, y: ya}), [[0.0], [1.0]])
    ids = C.input_variable(1)
    assert_close(C.one_hot(ids, 4).eval(np.array([[2], [0]])), np.eye(4)[[2, 0]])


def test_parameters_products_and_their_gradients_in_float64():
    C.set_seed(3)
    x = C.input_variable(3, name="x")
    w = C.parameter((3, 2), init=C.glorot_normal(), dtype=np.float64, name="w")
    b = C.parameter(2, init=0.5, dtype=np.float64, name="b")
    assert w.dtype == np.float64 and w.value.shape == (3, 2)
    assert_close(b.value, [0.5, 0.5])
    f = C.tanh(C.times(x, w) + b)
    a = rng(6).normal(size=(4, 3))
    assert_close(f.eval(a), np.tanh(a @ w.value + b.value), rtol=1e-12)
    g = f.grad(a, wrt=[w, b])
    assert_close(g[w], parameter_numeric_gradient(f, {x: a}, w), rtol=1e-5, atol=1e-8)
    assert_close(g[b], parameter_numeric_gradient(f, {x: a}, b), rtol=1e-5, atol=1e-8)


def test_embedding_reads_rows_and_adds_into_them():
    ids = C.input_variable(1, name="ids")
    table = C.parameter(init=np.arange(12.0).reshape(4, 3), dtype=np.float64, name="table")
    f = C.embedding(ids, table)
    got = f.eval(np.array([[3], [1], [3]]))
    assert_close(got, np.arange(12.0).reshape(4, 3)[[3, 1, 3]])
    g = f.grad({ids: np.array([[3], [1], [3]])}, wrt=[table])
    assert_close(g, np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0], [2, 2, 2]], dtype=np.float64))


def test_layer_norm():
    x = C.input_variable(4)
    scale = C.parameter(init=np.array([1.0, 2.0, 0.5, 1.0]), dtype=np.float64)
    bias = C.parameter(init=np.array([0.0, 0.1, 0.2, 0.3]), dtype=np.float64)
    f = C.layer_norm(x, scale, bias)
    a = rng(7).normal(size=(2, 4))
    mean, var = a.mean(-1, keepdims=True), a.var(-1, keepdims=True)
    assert_close(f.eval(a), (a - mean) / np.sqrt(var + 1e-5) * scale.value + bias.value, rtol=1e-9)
    weights = C.constant(rng(8).uniform(0.5, 1.5, size=4))
    g = f * weights
    assert_close(g.grad(a, wrt=[x]), numeric_gradient(lambda: total(g.eval(a)), a), rtol=1e-5, atol=1e-7)
