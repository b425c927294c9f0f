"""CNTK's loss, metric, comparison and cosine tests (losses/tests/losses_test.py,
losses/tests/cosine_distance_test.py, ops/tests/comparison_test.py, ops/tests/stop_gradient_test.py),
paraphrased as a CNTK user's program calls loom; expected values from numpy."""

import numpy as np
import pytest

import loom as C

F64 = np.float64

TARGET_OUTPUT = [
    ([[0., 0., 0., 1]], [[1., 2., 3., 4.]]),
    ([[0., 0., 0.5, 0.5]], [[1., 2., 3., 4.]]),
    ([[0., 0.4, 0.3, 0.3]], [[2., 1., 1., 4.]]),
]


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _pair(output, target):
    o, t = np.asarray(output, F64), np.asarray(target, F64)
    z = C.input_variable(o.shape, dtype=F64)
    y = C.input_variable(t.shape, dtype=F64)
    return o, t, z, y


@pytest.mark.parametrize("target, output", TARGET_OUTPUT)
def test_cross_entropy_with_softmax(target, output):
    o, t, z, y = _pair(output[0], target[0])
    s = _softmax(o)
    loss = C.cross_entropy_with_softmax(z, y)
    data = {z: o[None], y: t[None]}
    np.testing.assert_allclose(loss.eval(data), [[-np.sum(t * np.log(s))]], rtol=1e-12)
    grads = loss.grad(data, wrt=[z, y])
    np.testing.assert_allclose(grads[z][0], s * t.sum() - t, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grads[y][0], -np.log(s), rtol=1e-12)


@pytest.mark.parametrize("target, output, axis", [
    ([[0., 0., 0., 1]], [[1., 2., 3., 4.]], -1),
    ([[0., 0., 0.5, 0.5]], [[1., 2., 3., 4.]], 1),
    ([[0., 0.4, 0.3, 0.3]], [[2., 1., 1., 4.]], 1),
    ([[0., 0., 0., 1], [0., 0., 1., 0.]], [[1., 2., 3., 4.], [1., 2., 3., 5.]], 1),
    ([[0., 0., 0., 1], [0., 1., 0., 0.]], [[1., 2., 3., 4.], [1., 7., 3., 5.]], 1),
])
def test_cross_entropy_with_softmax_along_an_axis_of_a_matrix(target, output, axis):
    # Each row of the sample is a distribution of its own: one loss per row, shape (rows, 1).
    o, t, z, y = _pair(output, target)
    s = _softmax(o)
    loss = C.cross_entropy_with_softmax(z, y, axis=axis)
    data = {z: o[None], y: t[None]}
    assert loss.shape == (o.shape[0], 1)
    np.testing.assert_allclose(loss.eval(data)[0], -np.sum(t * np.log(s), axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(loss.grad(data, wrt=[z])[0], s * t.sum(axis=1, keepdims=True) - t, rtol=1e-12,
                               atol=1e-15)


def test_cross_entropy_along_another_axis_than_the_last_is_a_clear_error():
    z, y = C.input_variable((2, 4)), C.input_variable((2, 4))
    with pytest.raises(C.UserError, match="last axis"):
        C.cross_entropy_with_softmax(z, y, axis=0)


@pytest.mark.parametrize("target, output", TARGET_OUTPUT)
def test_squared_error(target, output):
    o, t, z, y = _pair(output[0], target[0])
    loss = C.squared_error(z, y)
    data = {z: o[None], y: t[None]}
    np.testing.assert_allclose(loss.eval(data), [[np.sum((t - o) ** 2)]])
    grads = loss.grad(data, wrt=[z, y])
    np.testing.assert_allclose(grads[z][0], 2 * (o - t))
    np.testing.assert_allclose(grads[y][0], -2 * (o - t))


@pytest.mark.parametrize("target, output", [([[1., 0., 0., 0]], [[1., 2., 3., 4.]]),
                                            ([[0., 0., 0., 1]], [[1., 2., 3., 4.]])])
def test_classification_error(target, output):
    o, t, z, y = _pair(output[0], target[0])
    err = C.classification_error(z, y)
    np.testing.assert_array_equal(err.eval({z: o[None], y: t[None]}), [[float(np.argmax(o) != np.argmax(t))]])


def test_binary_cross_entropy():
    p = np.array([[0.1, 0.7, 0.9], [0.5, 0.2, 0.99]])
    t = np.array([[0., 1., 1.], [1., 0., 1.]])
    out, lab = C.input_variable(3, dtype=F64), C.input_variable(3, dtype=F64)
    loss = C.binary_cross_entropy(out, lab)
    expected = -np.sum(t * np.log(p) + (1 - t) * np.log(1 - p), axis=1, keepdims=True)
    np.testing.assert_allclose(loss.eval({out: p, lab: t}), expected, rtol=1e-12)
    np.testing.assert_allclose(loss.grad({out: p, lab: t}, wrt=[out]), -(t / p - (1 - t) / (1 - p)), rtol=1e-10)


COMPARISONS = [(C.equal, np.equal), (C.less, np.less), (C.less_equal, np.less_equal), (C.greater, np.greater),
               (C.greater_equal, np.greater_equal), (C.not_equal, np.not_equal)]


@pytest.mark.parametrize("op, reference", COMPARISONS, ids=[c[1].__name__ for c in COMPARISONS])
def test_comparisons_give_ones_and_zeros_and_no_gradient(op, reference):
    left = np.array([41., 42., 43., 42., 42., 42.])
    right = np.array([42., 42., 42., 41., 42., 43.])
    a, b = C.input_variable(6, dtype=F64), C.input_variable(6, dtype=F64)
    y = op(a, b)
    data = {a: left[None], b: right[None]}
    np.testing.assert_array_equal(y.eval(data)[0], reference(left, right).astype(F64))
    grads = y.grad(data, wrt=[a, b])
    np.testing.assert_array_equal(grads[a][0], np.zeros(6))
    np.testing.assert_array_equal(grads[b][0], np.zeros(6))


def test_cosine_distance_of_each_step_against_a_broadcast_vector():
    a = np.arange(25.0).reshape(5, 5)
    b = np.arange(5.0).reshape(1, 5)
    src = C.sequence.input_variable(shape=5, dtype=F64, sequence_axis=C.Axis("Seq"))
    tgt = C.input_variable(shape=5, dtype=F64)
    cos = C.cosine_distance(src, C.sequence.broadcast_as(tgt, src))
    assert len(cos.dynamic_axes) == 2
    value = cos.eval({src: [a], tgt: b})
    expected = a @ b[0] / (np.linalg.norm(a, axis=1) * np.linalg.norm(b[0]))
    # loom's per-step result has shape (1,) where CNTK's has shape ().
    np.testing.assert_allclose(np.ravel(value[0]), expected, rtol=1e-12)
    np.testing.assert_allclose(expected, [1., 0.914659, 0.878459, 0.86155, 0.851852], atol=1e-6)


def _cosine_and_gradients(a, b):
    na, nb = np.linalg.norm(a, axis=-1, keepdims=True), np.linalg.norm(b, axis=-1, keepdims=True)
    sim = np.sum(a * b, -1, keepdims=True) / (na * nb)
    return sim, b / (na * nb) - sim * a / na ** 2, a / (na * nb) - sim * b / nb ** 2


@pytest.mark.parametrize("seed, sequences, steps, dim", [(None, 1, 2, 2), (0, 10, 50, 100)])
def test_cosine_distance_gradients_through_forward_and_backward(seed, sequences, steps, dim):
    axis = C.Axis("B")
    x = C.sequence.input_variable(shape=dim, dtype=F64, sequence_axis=axis, needs_gradient=True)
    y = C.sequence.input_variable(shape=dim, dtype=F64, sequence_axis=axis, needs_gradient=True)
    z = C.cosine_distance(x, y)
    if seed is None:
        a = np.array([0.25, 0.5, 0.1, 1]).reshape(1, 2, 2)
        b = np.array([-0.5, 1.5, -0.3, -1]).reshape(1, 2, 2)
    else:
        rng = np.random.default_rng(seed)
        a, b = rng.random((sequences, steps, dim)), rng.random((sequences, steps, dim))
    # forward runs in the parameters' type (float32 here, there are none), as CNTK's Function.
    state, forward = z.forward({x: a, y: b}, [z.output], {z.output})
    value = forward[z.output]
    sim, ga, gb = _cosine_and_gradients(a, b)
    np.testing.assert_allclose(np.array(value), sim, rtol=1e-5, atol=1e-6)
    grads = z.backward(state, {z.output: [np.ones_like(v) for v in value]}, {x, y})
    np.testing.assert_allclose(np.array(grads[x]), ga, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.array(grads[y]), gb, rtol=1e-4, atol=1e-6)
    state.free()
    if seed is None:  # CNTK's published values for the small case
        np.testing.assert_allclose(np.ravel(sim), [0.707107, -0.981665], atol=1e-6)
        np.testing.assert_allclose(np.ravel(ga), [-1.131371, 0.565686, -0.188727, 0.018873], atol=1e-6)
    # x against itself: the two gradients add.
    self_cos = C.cosine_distance(x, x)
    _, ga2, gb2 = _cosine_and_gradients(a, a)
    np.testing.assert_allclose(np.array(self_cos.grad({x: a}, wrt=[x])), ga2 + gb2, atol=1e-8)


def test_stop_gradient():
    x = C.input_variable(3, dtype=F64)
    data = np.array([[1., 2., 3.]])
    y = C.stop_gradient(x * 2) + x * x
    np.testing.assert_allclose(y.eval({x: data}), 2 * data + data ** 2)
    np.testing.assert_allclose(y.grad({x: data}, wrt=[x]), 2 * data)
