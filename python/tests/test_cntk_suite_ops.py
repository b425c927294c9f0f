"""CNTK's own op tests (bindings/python/cntk/ops/tests: linear_test, non_linear_test, reduction_test,
non_diff_test, reshaping_test, evaluation_test), their cases paraphrased as a CNTK user's program
calls loom: the same data, the expected values and gradients computed here with numpy as CNTK's
tests compute them. CNTK's helpers feed one sample as a batch of one and compare the gradient of
the output's sum (a root gradient of ones), which is what loom's grad computes."""

import numpy as np
import pytest

import loom as C

F64 = np.float64


def _run(op, operand, **keywords):
    """op(x, **keywords) on one sample `operand` (a batch of one): its value and d sum / d x."""
    value = np.asarray(operand, dtype=F64)
    x = C.input_variable(value.shape, dtype=F64, needs_gradient=True, name="a")
    y = op(x, **keywords)
    return y.eval({x: value[None]})[0], y.grad({x: value[None]}, wrt=[x])[0]


def _check(op, operand, forward, backward, **keywords):
    out, grad = _run(op, operand, **keywords)
    np.testing.assert_allclose(out, forward, rtol=1e-6, atol=1e-6)
    assert out.shape == np.shape(forward)
    if backward is not None:
        np.testing.assert_allclose(grad, backward, rtol=1e-6, atol=1e-6)


# ---- linear_test: the element-wise binary ops, on inputs and constants, by name and operator ----

PAIRS = [
    ([30.], [10.]),
    ([[10.]], [[30.]]),
    ([[1.5, 2.1]], [[10., 20.]]),
    ([[100., 200.], [300., 400.], [10., 20.]], [[10., 20.], [30., 40.], [1., 2.]]),
    ([[30., 40.], [1., 2.], [0.1, 0.2]], [[10, 20], [3, 4], [-0.5, -0.4]]),
]

# name, op by name, op by operator, d/dleft, d/dright
BINARY = [
    ("plus", C.plus, lambda a, b: a + b, lambda a, b: np.ones_like(a), lambda a, b: np.ones_like(b)),
    ("minus", C.minus, lambda a, b: a - b, lambda a, b: np.ones_like(a), lambda a, b: -np.ones_like(b)),
    ("element_times", C.element_times, lambda a, b: a * b, lambda a, b: b, lambda a, b: a),
    ("element_divide", C.element_divide, lambda a, b: a / b, lambda a, b: 1 / b, lambda a, b: -a / b ** 2),
]


@pytest.mark.parametrize("left, right", PAIRS)
@pytest.mark.parametrize("name, by_name, by_operator, d_left, d_right", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_on_inputs_and_constants(left, right, name, by_name, by_operator, d_left, d_right):
    a_value, b_value = np.asarray(left, F64), np.asarray(right, F64)
    expected = by_operator(a_value, b_value)
    for op in (by_name, by_operator):
        a = C.input_variable(a_value.shape, dtype=F64, name="a")
        b = C.input_variable(b_value.shape, dtype=F64, name="b")
        both = op(a, b)
        data = {a: a_value[None], b: b_value[None]}
        np.testing.assert_allclose(both.eval(data)[0], expected, rtol=1e-12)
        grads = both.grad(data, wrt=[a, b])
        np.testing.assert_allclose(grads[a][0], d_left(a_value, b_value), rtol=1e-12)
        np.testing.assert_allclose(grads[b][0], d_right(a_value, b_value), rtol=1e-12)
        # An input with a constant on either side.
        with_constant = op(a, C.constant(b_value))
        np.testing.assert_allclose(with_constant.eval({a: a_value[None]})[0], expected, rtol=1e-12)
        np.testing.assert_allclose(with_constant.grad({a: a_value[None]}, wrt=[a])[0], d_left(a_value, b_value),
                                   rtol=1e-12)
        constant_first = op(C.constant(a_value), b)
        np.testing.assert_allclose(constant_first.eval({b: b_value[None]})[0], expected, rtol=1e-12)
        np.testing.assert_allclose(constant_first.grad({b: b_value[None]}, wrt=[b])[0], d_right(a_value, b_value),
                                   rtol=1e-12)


@pytest.mark.parametrize("left, right", PAIRS)
def test_plus_a_scalar_broadcasts_and_its_gradient_sums(left, right):
    a_value, scalar = np.asarray(left, F64), 0.37
    a = C.input_variable(a_value.shape, dtype=F64)
    s = C.parameter(init=np.array([scalar]), dtype=F64)  # a learnable scalar, broadcast over the sample
    y = C.plus(a, s)
    np.testing.assert_allclose(y.eval({a: a_value[None]})[0], a_value + scalar)
    grads = y.grad({a: a_value[None]}, wrt=[a, s])
    np.testing.assert_allclose(grads[a][0], np.ones_like(a_value))
    np.testing.assert_allclose(grads[s], [a_value.size])
    np.testing.assert_allclose((a + scalar).eval({a: a_value[None]})[0], a_value + scalar)


def test_plus_of_sequences_and_its_gradient_accumulates():
    x = C.sequence.input_variable((2,), dtype=F64, needs_gradient=True)
    z = x + x
    data = [np.array([[1., 2.], [3., 4.]]), np.array([[5., 6.]])]
    out = z.eval({x: data})
    grad = z.grad({x: data}, wrt=[x])
    for d, o, g in zip(data, out, grad):
        np.testing.assert_allclose(o, 2 * d)
        np.testing.assert_allclose(g, np.full_like(d, 2.0))
    # Two sequence inputs of one batch: lengths 1 and 2.
    left = [np.array([[30.]]), np.array([[40.], [50.]])]
    right = [np.array([[3.]]), np.array([[4.], [5.]])]
    axis = C.Axis.new_unique_dynamic_axis("t")
    a = C.sequence.input_variable(1, dtype=F64, sequence_axis=axis)
    b = C.sequence.input_variable(1, dtype=F64, sequence_axis=axis)
    s = C.plus(a, b)
    for o, l, r in zip(s.eval({a: left, b: right}), left, right):
        np.testing.assert_allclose(o, l + r)
    grads = s.grad({a: left, b: right}, wrt=[a, b])
    for v in (a, b):
        for g, l in zip(grads[v], left):
            np.testing.assert_allclose(g, np.ones_like(l))


@pytest.mark.parametrize("operand", [[30.], [[30.]], [[1.5, 2.1]], [[100., 200.], [300., 400.], [10., 20.]]])
def test_negate_by_name_and_operator(operand):
    a = np.asarray(operand, F64)
    _check(C.negate, a, -a, -np.ones_like(a))
    _check(lambda x: -x, a, -a, -np.ones_like(a))


# times: CNTK's pairs (np.tensordot over right's rank - 1 axes), the last of them the two (2, 2) halves
# of arange(8) that CNTK's table ends with.
TIMES = [
    ([[30.]], [[10.]]),
    ([[1.5, 2.1]], [[10.], [20.]]),
    ([[100., 200.]], [[-10.], [20.]]),
    ([[100., 200.], [300., 400.]], [[10.], [20.]]),
    ([[100., 200.], [-300., 400.]], [[10., 20.], [20., 30.]]),
    (np.arange(24.).reshape(4, 3, 2), [[1., 3.], [2., 4.]]),
    (np.arange(4.).reshape(2, 2), np.arange(4., 8.).reshape(2, 2)),
]


@pytest.mark.parametrize("left, right", TIMES)
def test_times_values_and_gradients(left, right):
    a_value, b_value = np.asarray(left, F64), np.asarray(right, F64)
    expected = np.tensordot(a_value, b_value, axes=b_value.ndim - 1)
    d_left = np.broadcast_to(b_value.sum(axis=-1), a_value.shape)
    d_right = np.broadcast_to(a_value.sum(axis=tuple(range(a_value.ndim - 1)))[:, None], b_value.shape)
    a = C.input_variable(a_value.shape, dtype=F64)
    b = C.input_variable(b_value.shape, dtype=F64)
    y = C.times(a, b)
    data = {a: a_value[None], b: b_value[None]}
    np.testing.assert_allclose(y.eval(data)[0], expected, rtol=1e-12)
    grads = y.grad(data, wrt=[a, b])
    np.testing.assert_allclose(grads[a][0], d_left, rtol=1e-12)
    np.testing.assert_allclose(grads[b][0], d_right, rtol=1e-12)
    np.testing.assert_allclose((a @ C.constant(b_value)).eval({a: a_value[None]})[0], expected, rtol=1e-12)


@pytest.mark.parametrize("left, right", TIMES[:6])
def test_times_transpose_values_and_gradients(left, right):
    a_value = np.asarray(left, F64)
    b_value = np.asarray(right, F64).T.copy()  # CNTK's case transposes right to make the product possible
    expected = np.dot(a_value, b_value.T)
    d_left = np.broadcast_to(b_value.sum(axis=tuple(range(b_value.ndim - 1))), a_value.shape)
    d_right = np.broadcast_to(a_value.sum(axis=tuple(range(a_value.ndim - 1))), b_value.shape)
    a = C.input_variable(a_value.shape, dtype=F64)
    b = C.parameter(init=b_value, dtype=F64)
    y = C.times_transpose(a, b)
    np.testing.assert_allclose(y.eval({a: a_value[None]})[0], expected, rtol=1e-12)
    grads = y.grad({a: a_value[None]}, wrt=[a, b])
    np.testing.assert_allclose(grads[a][0], d_left, rtol=1e-12)
    np.testing.assert_allclose(grads[b], d_right, rtol=1e-12)


def test_times_with_output_rank_contracts_more_axes_of_left():
    # CNTK's output_rank: right [k1, k2, m] with output_rank=1 contracts left's last two axes.
    a_value, w_value = np.arange(12.).reshape(2, 3, 2), np.arange(18.).reshape(3, 2, 3) / 10
    a = C.input_variable((2, 3, 2), dtype=F64)
    w = C.parameter(init=w_value, dtype=F64)
    y = C.times(a, w, output_rank=1)
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y.eval({a: a_value[None]})[0], np.tensordot(a_value, w_value, axes=2), rtol=1e-12)
    np.testing.assert_allclose(y.grad({a: a_value[None]}, wrt=[w]),
                               np.broadcast_to(a_value.sum(0)[:, :, None], w_value.shape), rtol=1e-12)


# ---- non_linear_test ----

CLIPS = [
    ([1.0], [2.0], [1.5]),
    ([1.0], [2.0], [0.5]),
    ([1.0], [2.0], [2.5]),
    ([1.0], [2.0], [[1.5, 2.1, 0.9]]),
    ([1.0], [2.0], [[0.0, 3.0], [1.0, 2.0], [1.5, 2.5]]),
    ([5.0], [0.5], [[1.5, 2.1, 0.9, -1.0, -2.0]]),  # min above max: min applies first
    ([[1.5, 2.0], [2.5, 3.0]], [[-2.0, 2.5], [2.5, 3.5]], [[-1.0, 2.0], [3.0, 4.0]]),
]


@pytest.mark.parametrize("low, high, x", CLIPS)
def test_clip(low, high, x):
    a = np.asarray(x, F64)
    forward = np.minimum(np.maximum(a, np.asarray(low)), np.asarray(high))
    passes = ~((a > np.asarray(high)) | (a < np.asarray(low)))
    _check(C.clip, a, forward, passes.astype(F64), min_value=C.constant(low), max_value=C.constant(high))


TENSORS = [
    [[0, -0.1]],
    [[-100, -10], [-1, -0.1], [-0.01, -0.001], [0.001, 0.01], [0.1, 1], [10, 100]],
]


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


_SELU_SCALE, _SELU_SCALE_ALPHA = 1.0507009873554804934193349852946, 1.7580993408473768599402175208123


# name, op, numpy value, numpy derivative (where the op is defined, as CNTK's cases)
UNARY = [
    ("sigmoid", C.sigmoid, _sigmoid, lambda a: _sigmoid(a) * (1 - _sigmoid(a))),
    ("exp", C.exp, np.exp, np.exp),
    ("abs", C.abs, np.abs, np.sign),
    ("tanh", C.tanh, np.tanh, lambda a: 1 - np.tanh(a) ** 2),
    ("square", C.square, np.square, lambda a: 2 * a),
    ("reciprocal", C.reciprocal, lambda a: 1 / a, lambda a: -1 / a ** 2),
    ("relu", C.relu, lambda a: np.maximum(a, 0), lambda a: (a > 0).astype(F64)),
    ("elu", C.elu, lambda a: np.where(a < 0, np.exp(a) - 1, a), lambda a: np.where(a < 0, np.exp(a), 1.0)),
    ("leaky_relu", C.leaky_relu, lambda a: np.where(a < 0, 0.01 * a, a), lambda a: np.where(a < 0, 0.01, 1.0)),
    ("param_relu", lambda x: C.param_relu(C.constant(np.full(x.shape, 0.5)), x),
     lambda a: np.where(a < 0, 0.5 * a, a), lambda a: np.where(a < 0, 0.5, 1.0)),
    ("selu", C.selu, lambda a: np.where(a < 0, _SELU_SCALE_ALPHA * (np.exp(a) - 1), _SELU_SCALE * a),
     lambda a: np.where(a < 0, _SELU_SCALE_ALPHA * np.exp(a), _SELU_SCALE)),
    ("softplus", C.softplus, lambda a: np.logaddexp(a, 0), _sigmoid),
]


@pytest.mark.parametrize("operand", TENSORS, ids=["small", "wide"])
@pytest.mark.parametrize("name, op, value, derivative", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops(operand, name, op, value, derivative):
    a = np.asarray(operand, F64)
    if name == "reciprocal" and (a == 0).any():
        # CNTK's case gives 1/0 the value 0; loom gives inf, as numpy (and -inf as its gradient).
        out, grad = _run(op, a)
        defined = a != 0
        np.testing.assert_allclose(out[defined], value(a[defined]))
        np.testing.assert_allclose(grad[defined], derivative(a[defined]))
        assert np.isinf(out[~defined]).all() and np.isinf(grad[~defined]).all()
        return
    _check(op, a, value(a), derivative(a))


def test_sqrt_and_log_where_defined():
    a = np.array([[0.001, 0.01], [0.1, 1], [10, 100]])
    _check(C.sqrt, a, np.sqrt(a), 1 / (2 * np.sqrt(a)))
    _check(C.log, a, np.log(a), 1 / a)


def test_reciprocal_and_log_outside_their_domain_follow_ieee_not_cntk():
    # CNTK's cases clamp: log(0) and log(x < 0) are -85.1 (log 1e-37), 1/0 is 0. loom gives IEEE's
    # values as numpy does (docs/guide.md, "Differences from CNTK").
    with np.errstate(all="ignore"):
        a = np.array([0.0, -0.1])
        out, _ = _run(C.log, a)
        assert out[0] == -np.inf and np.isnan(out[1])
        out, _ = _run(C.reciprocal, np.array([0.0]))
        assert out[0] == np.inf


SOFTMAX_SAMPLES = [[1, 1, 2, 3], [0, 0, 0, 0], [3, 3, 4, 4], [1000, 1000, 1000, 1000], [10000, 10000, 10000, 10000]]


@pytest.mark.parametrize("sample", SOFTMAX_SAMPLES)
def test_softmax(sample):
    t = np.asarray(sample, F64)
    e = np.exp(t - t.max())
    s = e / e.sum()
    jacobian = np.diag(s) - np.outer(s, s)
    _check(C.softmax, t, s, jacobian.sum(axis=0))


@pytest.mark.parametrize("sample", SOFTMAX_SAMPLES)
def test_log_softmax(sample):
    t = np.asarray(sample, F64)
    shifted = t - t.max()
    _check(C.log_softmax, t, shifted - np.log(np.exp(shifted).sum()), None)


@pytest.mark.parametrize("sample", [[[1], [1], [1], [1]], [[0], [0], [0], [0]], [[1000], [1000], [1000], [1000]],
                                    [[10000], [10000], [10000], [10000]]])
def test_softmax_along_axis_0_of_a_constant(sample):
    t = np.asarray(sample, np.float32)
    e = np.exp(t - t.max())
    np.testing.assert_array_equal(C.softmax(sample, axis=0).eval(), e / e.sum())


@pytest.mark.parametrize("sample", SOFTMAX_SAMPLES)
def test_hardmax_marks_the_first_maximum(sample):
    t = np.asarray(sample, F64)
    expected = np.zeros_like(t)
    expected[np.argmax(t)] = 1
    _check(C.hardmax, t, expected, np.zeros_like(t))


@pytest.mark.parametrize("shape", [(3, 9), (10, 20, 30)])
@pytest.mark.parametrize("rate", [0.0, 0.2, 0.5, 0.8])
def test_dropout_is_the_identity_in_eval(shape, rate):
    # CNTK's case counts the zeros of a training pass; loom's eval runs in inference mode, where
    # dropout is the identity (its training masks: test_training.py).
    ones = np.ones(shape)
    x = C.input_variable(shape, dtype=F64)
    np.testing.assert_array_equal(C.dropout(x, dropout_rate=rate).eval({x: ones[None]})[0], ones)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 100])
def test_dropout_refuses_a_rate_outside_0_1(rate):
    x = C.input_variable((1, 2))
    with pytest.raises(ValueError):
        C.dropout(x, dropout_rate=rate)


# ---- reduction_test ----

REDUCE = [
    ([[1]], 0),
    ([[1, 2], [4, 5]], 0),
    ([[1, 2], [4, 5]], 1),
    ([[1, 2], [4, 5]], -1),
    ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], -2),
    ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], 2),
]


def _extreme_marks(data, extreme, axis):
    # 1 where an element equals its slice's extreme (CNTK's expected gradient of reduce_max / min).
    return (data == extreme(data, axis=axis, keepdims=True)).astype(F64)


@pytest.mark.parametrize("data, axis", REDUCE)
def test_reductions_over_an_axis(data, axis):
    d = np.asarray(data, F64)
    _check(C.reduce_sum, d, d.sum(axis=axis, keepdims=True), np.ones_like(d), axis=axis)
    _check(C.reduce_mean, d, d.mean(axis=axis, keepdims=True), np.ones_like(d) / d.shape[axis], axis=axis)
    _check(C.reduce_max, d, d.max(axis=axis, keepdims=True), _extreme_marks(d, np.max, axis), axis=axis)
    _check(C.reduce_min, d, d.min(axis=axis, keepdims=True), _extreme_marks(d, np.min, axis), axis=axis)
    lse = np.log(np.exp(d).sum(axis=axis, keepdims=True))
    _check(C.reduce_log_sum_exp, d, lse, np.exp(d - lse), axis=axis)
    _check(C.reduce_prod, d, d.prod(axis=axis, keepdims=True), d.prod(axis=axis, keepdims=True) / d, axis=axis)


@pytest.mark.parametrize("data, axis", REDUCE)
def test_argmax_and_argmin_keep_the_reduced_axis(data, axis):
    d = np.asarray(data, F64)
    shape = d.max(axis=axis, keepdims=True).shape
    _check(C.argmax, d, np.argmax(d, axis=axis).reshape(shape), None, axis=axis)
    _check(C.argmin, d, np.argmin(d, axis=axis).reshape(shape), None, axis=axis)


def test_reductions_without_keepdims_and_over_every_static_axis():
    d = np.arange(1., 7.).reshape(2, 3)
    x = C.input_variable((2, 3), dtype=F64)
    assert C.reduce_sum(x, axis=0, keepdims=False).shape == (3,)
    np.testing.assert_allclose(C.reduce_sum(x, axis=0, keepdims=False).eval({x: d[None]})[0], d.sum(0))
    np.testing.assert_allclose(C.reduce_max(x, axis=C.Axis.all_static_axes()).eval({x: d[None]})[0], [[6.]])
    np.testing.assert_allclose(C.reduce_mean(x, axis=(0, 1)).eval({x: d[None]})[0], [[3.5]])


@pytest.mark.parametrize("data", [d for d, _ in REDUCE[::2]])
def test_reductions_over_all_axes_of_a_batch_of_sequences(data):
    # Two sequences, of 2 steps and of 1: every element of every step in one number.
    d = np.asarray(data, F64)
    value = [np.stack([d, d - 0.5]), np.stack([d + 0.25])]
    everything = np.concatenate([v.ravel() for v in value])
    a = C.sequence.input_variable(d.shape, dtype=F64, needs_gradient=True)
    cases = [
        (C.reduce_sum, everything.sum(), lambda f: [np.ones_like(v) for v in value]),
        (C.reduce_max, everything.max(), lambda f: [(v == f).astype(F64) for v in value]),
        (C.reduce_min, everything.min(), lambda f: [(v == f).astype(F64) for v in value]),
        (C.reduce_mean, everything.mean(), lambda f: [np.ones_like(v) / everything.size for v in value]),
        (C.reduce_log_sum_exp, np.log(np.exp(everything).sum()), lambda f: [np.exp(v - f) for v in value]),
    ]
    for op, forward, backward in cases:
        y = op(a, axis=C.Axis.all_axes())
        np.testing.assert_allclose(np.ravel(y.eval({a: value})), [forward], rtol=1e-12)
        for g, e in zip(y.grad({a: value}, wrt=[a]), backward(forward)):
            np.testing.assert_allclose(g, e, rtol=1e-12)


def test_reduction_over_the_batch_axis():
    d = np.arange(6.).reshape(3, 2)
    x = C.input_variable(2, dtype=F64)
    np.testing.assert_allclose(C.reduce_sum(x, axis=C.Axis.default_batch_axis()).eval({x: d}), d.sum(0))
    np.testing.assert_allclose(C.reduce_mean(x, axis=C.Axis.default_batch_axis()).eval({x: d}), d.mean(0))
    with pytest.raises(C.UserError, match="static axes only"):
        C.reduce_prod(x, axis=C.Axis.all_axes())


def test_reduce_mean_of_a_constant_over_all_axes():
    for data, _ in REDUCE:
        value = np.asarray(data, np.float32)
        np.testing.assert_allclose(np.ravel(C.reduce_mean(C.Constant(value), axis=C.Axis.all_axes()).eval()),
                                   [value.mean()])


# ---- non_diff_test ----

STEPS = [[12.3, -12.3], [10.2, -10.2], [0.5, -0.5], [0.01, -0.01], [0.499, -0.499], [5.0, -5.0], [0.0],
         [[2.1, 9.9], [4.7, 5.3]]]


@pytest.mark.parametrize("operand", STEPS)
def test_floor_ceil_and_the_like_have_no_gradient(operand):
    a = np.asarray(operand, F64)
    _check(C.floor, a, np.floor(a), np.zeros_like(a))
    _check(C.ceil, a, np.ceil(a), np.zeros_like(a))
    _check(C.zeros_like, a, np.zeros_like(a), np.zeros_like(a))
    _check(C.ones_like, a, np.ones_like(a), np.zeros_like(a))


def test_zeros_like_of_a_scalar_sample():
    _check(C.zeros_like, np.array(3.0), np.array(0.0), np.array(0.0))


ROUNDS = [
    ([0.2, 1.3, 4.0, 5.5, 0.0], [0.0, 1.0, 4.0, 6.0, 0.0]),
    ([[0.6, 3.3], [1.9, 5.6]], [[1.0, 3.0], [2.0, 6.0]]),
    ([-5.5, -4.2, -3., -0.7, 0], [-5.0, -4.0, -3., -1.0, 0]),
    ([[-0.6, -4.3], [1.9, -3.2]], [[-1.0, -4.0], [2.0, -3.0]]),
    ([0.5, 1.5, 2.5, 3.5], [1.0, 2.0, 3.0, 4.0]),  # halves up, where numpy rounds to even
]


@pytest.mark.parametrize("operand, expected", ROUNDS)
def test_round_takes_halves_up(operand, expected):
    a = np.asarray(operand, F64)
    _check(C.round, a, np.asarray(expected), np.zeros_like(a))


def test_input_variable_properties():
    i = C.input_variable(shape=(2, 3), name="i")
    assert i.shape == (2, 3) and i.name == "i" and len(i.dynamic_axes) == 1
    s = C.sequence.input_variable(shape=(3, 2), name="sequence_i")
    assert s.shape == (3, 2) and s.name == "sequence_i" and len(s.dynamic_axes) == 2


# ---- reshaping_test ----

RESHAPES = [
    ((2, 3), (3, 2), (3, 2)),
    ((2, 3), (6, 1), (6, 1)),
    ((6, 1), (2, 3), (2, 3)),
    ((2, 3, 5), (5, 6), (5, 6)),
    ((2, 3, 5), (-1, 6), (5, 6)),
    ((2, 3, 5), (5, -1), (5, 6)),
]


@pytest.mark.parametrize("in_shape, new_shape, expected_shape", RESHAPES)
def test_reshape_moves_values_and_their_gradients(in_shape, new_shape, expected_shape):
    # The reshaped value times its own reshaped data, so that each element's gradient differs.
    data = np.arange(np.prod(in_shape), dtype=F64).reshape(in_shape)
    moved = data.reshape(expected_shape)
    _check(lambda x: C.element_times(C.reshape(x, new_shape), C.constant(moved)), data, moved ** 2, data)


def test_reshape_gradients_accumulate_and_parameters_reshape():
    data = np.arange(6, dtype=F64).reshape(2, 3)
    _check(lambda x: C.reshape(x, (3, 2)) + C.reshape(x, (3, 2)), data, 2 * data.reshape(3, 2), np.full((2, 3), 2.))
    value = np.random.default_rng(0).random((4, 2))
    p = C.parameter(init=value, dtype=F64)
    r = C.reshape(p, (8, 1))
    np.testing.assert_allclose(r.eval(), value.reshape(8, 1))
    np.testing.assert_allclose(r.grad({}, wrt=[p]), np.ones((4, 2)))


@pytest.mark.parametrize("in_shape, new_shape, begin, end, expected_shape", [
    ((2, 3), (3, 2), 0, "new_leading", (3, 2)),
    ((2, 3), (1,), 0, 0, (1, 2, 3)),
    ((2, 3), (1, 1), "new_leading", "new_leading", (2, 3, 1, 1)),
    ((2, 3, 5), (-1,), 0, C.Axis(2), (6, 5)),
    ((2, 3, 5), (-1,), C.Axis(-3), -1, (6, 5)),
    ((6, 5), (2, -1), 0, 1, (2, 3, 5)),
])
def test_reshape_of_part_of_the_axes(in_shape, new_shape, begin, end, expected_shape):
    begin = C.Axis.new_leading_axis() if begin == "new_leading" else begin
    end = C.Axis.new_leading_axis() if end == "new_leading" else end
    data = np.arange(np.prod(in_shape), dtype=F64).reshape(in_shape)
    moved = data.reshape(expected_shape)
    _check(lambda x: C.element_times(C.reshape(x, new_shape, begin, end), C.constant(moved)), data, moved ** 2, data)


@pytest.mark.parametrize("data, begin, end, axis, expected", [
    ([[1, 2], [-3, 4]], 1, 2, 0, [[-3, 4]]),
    ([[1, 2], [-3, 4]], 1, 2, 1, [[2], [4]]),
])
def test_slice_on_a_static_axis(data, begin, end, axis, expected):
    d = np.asarray(data, F64)
    taken = np.zeros_like(d)
    index = [np.s_[:]] * d.ndim
    index[axis] = np.s_[begin:end]
    taken[tuple(index)] = 1
    _check(C.slice, d, np.asarray(expected, F64), taken, axis=axis, begin_index=begin, end_index=end)


@pytest.mark.parametrize("data, begin, end", [
    ([[[1, 2, 3]], [[-4, 5, 6]], [[7, 8, 9]]], 0, 2),
    ([[[1, 2, 3], [11, 12, 13]], [[-4, 5, 6], [-14, 15, 16]], [[7, 8, 9], [17, 18, 19]]], 0, 2),
    ([[[1, 2, 3], [11, 12, 13]], [[-4, 5, 6], [-14, 15, 16]], [[7, 8, 9], [17, 18, 19]]], 1, 2),
])
def test_sequence_slice(data, begin, end):
    d = np.asarray(data, F64)  # one sequence of 3 steps
    a = C.sequence.input_variable(d.shape[1:], dtype=F64, sequence_axis=C.Axis.new_unique_dynamic_axis("t"))
    y = C.sequence.slice(a, begin_index=begin, end_index=end)
    np.testing.assert_allclose(y.eval({a: [d]})[0], d[begin:end])
    taken = np.zeros_like(d)
    taken[begin:end] = 1
    np.testing.assert_allclose(y.grad({a: [d]}, wrt=[a])[0], taken)


SPLICES = [
    ([1], [2], 0, [1, 2]),
    ([1], [2], -1, [1, 2]),
    ([1], [2], -2, [[1], [2]]),  # an axis before the first: a new leading axis, as CNTK's
    ([[1, 2], [4, 5]], [[10, 20], [30, 40], [50, 60]], 0, [[1, 2], [4, 5], [10, 20], [30, 40], [50, 60]]),
    ([[1, 2], [4, 5]], [[10, 20, 30], [40, 50, 60]], 1, [[1, 2, 10, 20, 30], [4, 5, 40, 50, 60]]),
    # Ranks differ: the [2, 2] is taken as [1, 2, 2].
    ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], [[10, 20], [30, 40]], 0,
     [[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[10, 20], [30, 40]]]),
]


@pytest.mark.parametrize("first, second, axis, expected", SPLICES)
def test_splice(first, second, axis, expected):
    d1, d2 = np.asarray(first, F64), np.asarray(second, F64)
    a = C.input_variable(d1.shape, dtype=F64)
    b = C.input_variable(d2.shape, dtype=F64)
    for along in [axis] + ([C.Axis.new_leading_axis()] if axis == -2 else []):
        y = C.splice(a, b, axis=along, name="splice_ab")
        data = {a: d1[None], b: d2[None]}
        np.testing.assert_allclose(y.eval(data)[0], expected)
        grads = y.grad(data, wrt=[a, b])
        np.testing.assert_allclose(grads[a][0], np.ones_like(d1))
        np.testing.assert_allclose(grads[b][0], np.ones_like(d2))


def test_transpose_of_constants_every_permutation_and_negative_axes():
    from itertools import permutations
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    for p in permutations(range(4)):
        np.testing.assert_array_equal(C.transpose(a, p).eval(), np.transpose(a, p))
    b = a.reshape(6, 4, 5)
    for p in permutations(range(3)):
        np.testing.assert_array_equal(C.transpose(b, p).eval(), np.transpose(b, p))
        q = [i - 3 for i in p]
        np.testing.assert_array_equal(C.transpose(b, q).eval(), np.transpose(b, q))


def test_transpose_backward():
    shape, p = (2, 3, 4), (2, 0, 1)
    x0 = np.arange(24, dtype=F64).reshape(shape)
    x = C.input_variable(shape, dtype=F64)
    g = C.reduce_sum(C.cos(C.transpose(x, p))).grad({x: x0[None]}, wrt=[x])[0]
    xt = C.input_variable(tuple(shape[i] for i in p), dtype=F64)
    gt = C.reduce_sum(C.cos(xt)).grad({xt: np.transpose(x0, p)[None]}, wrt=[xt])[0]
    np.testing.assert_allclose(np.transpose(g, p), gt)


def test_swapaxes_needs_two_axes():
    for shape in [(1,), (2,)]:
        with pytest.raises(ValueError):
            C.swapaxes(C.input_variable(shape))


# ---- evaluation_test ----

def test_eval_of_a_combine_on_some_outputs():
    x, y = C.input_variable(1), C.input_variable(1)
    plus_one, minus_one = x + 1, y - 1
    both = C.combine([plus_one, minus_one])
    np.testing.assert_array_equal(both.eval({x: np.array([[3.]], np.float32)}, [plus_one]), [[4.]])
    np.testing.assert_array_equal(both.eval({y: np.array([[2.]], np.float32)}, [minus_one]), [[1.]])


def test_grad_from_a_chosen_root_of_a_combine():
    x = C.input_variable(1, needs_gradient=True)
    y, y2 = C.sqrt(x), C.log(x)
    both = C.combine([y.output, y2.output])
    a = np.array([1, 4, 16], dtype=np.float32).reshape(3, 1)
    np.testing.assert_array_equal(both.grad({x: a}, grad_root=y.output), [[0.5], [0.25], [0.125]])


def test_constant_eval_in_a_combine():
    c = C.Constant(value=1)
    c_plus_1 = c + 1
    result = C.combine([c_plus_1, c]).eval({})
    np.testing.assert_array_equal(result[c_plus_1.output], [2.0])
    np.testing.assert_array_equal(result[c], 1.0)


def test_grad_with_outputs_gives_the_gradient_and_the_value():
    x = C.sequence.input_variable(shape=(), needs_gradient=True)
    op = C.sequence.reduce_sum(x)
    data = [np.array([-1, 3, 5], np.float32), np.array([2, -5], np.float32), np.array([-2], np.float32)]
    grad, result = op.grad({x: data}, outputs=[op])
    np.testing.assert_array_equal(result, [7, -3, -2])
    for g, d in zip(grad, data):
        np.testing.assert_array_equal(g, np.ones_like(d))


# ---- combine_test, stop_gradient_test, transpose_test ----

@pytest.mark.parametrize("ops", [(C.plus, C.minus), (C.cross_entropy_with_softmax, C.classification_error)],
                         ids=["plus_minus", "losses"])
def test_combine_evaluates_every_output(ops):
    left, right = np.array([1., 2., 3., 4., 5]), np.array([0., 0., 0., 1., 0.])
    a, b = C.input_variable(5, dtype=F64, name="a"), C.input_variable(5, dtype=F64, name="b")
    outputs = [op(a, b) for op in ops]
    results = C.combine(outputs).eval({a: left[None], b: right[None]})
    if ops[0] is C.plus:
        expected = [left + right, left - right]
    else:
        s = np.exp(left - left.max())
        expected = [[-np.log(s[3] / s.sum())], [float(np.argmax(left) != np.argmax(right))]]
    for out, e in zip(outputs, expected):
        np.testing.assert_allclose(results[out][0], e, rtol=1e-6)


def test_combine_of_an_input_is_its_data():
    x = C.input_variable(shape=(2))
    np.testing.assert_allclose(C.combine([x]).eval({x: [[1, 2]]}), [[1, 2]])


def test_stop_gradient_through_forward_and_backward():
    axis = C.Axis("B")
    x = C.sequence.input_variable(shape=(2,), sequence_axis=axis, needs_gradient=True)
    y = C.sequence.input_variable(shape=(2,), sequence_axis=axis, needs_gradient=True)
    z = C.element_times(x, y)
    w = z + C.stop_gradient(z)
    a = np.float32([0.25, 0.5, 0.1, 1]).reshape(1, 2, 2)
    b = np.float32([-1.25, 1.5, 0.1, -1]).reshape(1, 2, 2)
    state, forward = w.forward({x: a, y: b}, [w.output], {w.output})
    value = forward[w.output]
    np.testing.assert_allclose(np.array(value), a * b * 2, rtol=1e-6)
    grad = w.backward(state, {w.output: [np.ones_like(v) for v in value]}, {x, y})
    np.testing.assert_allclose(np.array(grad[x]), b)
    np.testing.assert_allclose(np.array(grad[y]), a)
    state.free()


def test_transpose_of_random_permutations_up_to_eight_axes():
    # CNTK's case goes to 11 axes; loom's tensors have at most 8, dynamic axes included.
    with pytest.raises(C.UserError, match="maximum of 8"):
        C.transpose(np.zeros([2] * 9), list(range(9))).eval()
    rng = np.random.default_rng(5)
    for rank in range(2, 9):
        permutation = [int(p) for p in rng.permutation(rank)]
        shape = [int(d) for d in rng.integers(2, 4, size=rank)]
        data = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        np.testing.assert_array_equal(C.transpose(data, permutation).eval(), np.transpose(data, permutation))


def test_gather_rows_of_a_parameter():
    # reshaping_test's gather case: indices of shape (2, 1) and (2, 2) into a table [6, 2].
    table = np.arange(12.).reshape(6, 2)
    r = C.parameter(shape=table.shape, init=table)
    a = C.input_variable((2, 1))
    a_data = np.array([[[0], [1]], [[3], [4]]], np.float32)
    np.testing.assert_array_equal(C.gather(r, a).eval({a: a_data}), table[a_data.astype(int)])
    used = np.zeros(6)
    np.add.at(used, a_data.astype(int).ravel(), 1)
    np.testing.assert_array_equal(C.gather(r, a).grad({a: a_data}, [r]), np.repeat(used[:, None], 2, 1))
    b = C.input_variable((2, 2))
    b_data = np.array([[[0, 2], [1, 3]], [[2, 4], [3, 5]]], np.float32)
    np.testing.assert_array_equal(C.gather(r, b).eval({b: b_data}), table[b_data.astype(int)])
