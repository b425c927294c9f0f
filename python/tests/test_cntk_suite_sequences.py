"""CNTK's sequence and recurrence tests (ops/tests/sequence_test.py, recurrent_test.py,
evaluation_test.py's sequence case), paraphrased as a CNTK user's program calls loom; expected
values computed here with numpy as CNTK's tests compute them."""

import numpy as np
import pytest

import loom as C

F64 = np.float64


def test_sequence_reduce_max_and_softmax_over_equal_length_sequences():
    rng = np.random.default_rng(0)
    for sign in (1, -1):
        a = sign * rng.random((6, 9, 8))  # 6 sequences of 9 steps, one array [N, T, 8]
        src = C.sequence.input_variable(shape=8, dtype=F64, sequence_axis=C.Axis("Seq"))
        np.testing.assert_allclose(C.sequence.reduce_max(src).eval({src: a}), a.max(axis=1))
        e = np.exp(a - a.max(axis=1, keepdims=True))
        np.testing.assert_allclose(C.sequence.softmax(src).eval({src: a}), e / e.sum(axis=1, keepdims=True))


def test_sequence_reduce_sum_over_a_reduced_sample():
    # CNTK's case gives the single sequence as the array [[-1], [3], [5]]; for sample shape (1,) loom
    # reads a 2-D array as [N, T] (python/src/run.cpp, eval), so one sequence is a 1-D array here.
    x = C.sequence.input_variable(shape=1, needs_gradient=True)
    op = C.sequence.reduce_sum(C.reduce_sum(x))
    grad, result = op.grad({x: np.array([-1, 3, 5], np.float32)}, outputs=[op])
    np.testing.assert_array_equal(result, [[7]])
    np.testing.assert_array_equal(grad[0], [[1], [1], [1]])


def test_one_array_of_one_rank_less_is_one_sequence():
    x = C.sequence.input_variable(2, dtype=F64)
    steps = np.arange(6.).reshape(3, 2)
    out = C.sequence.reduce_sum(x).eval({x: steps})
    np.testing.assert_allclose(out, [steps.sum(0)])


def test_gradient_as_values_fed_back_into_a_graph():
    a = C.sequence.input_variable(shape=(1,), dtype=F64, needs_gradient=True, name="a")
    twice = C.sequence.reduce_sum(a) + C.sequence.reduce_sum(a)
    data = [np.array([[2.]]), np.array([[2.], [3.]]), np.array([[2.], [3.], [4.]])]
    grad = twice.grad({a: data}, [a], as_numpy=False)
    result = (a + 1).eval({a: grad})
    for r, d in zip(result, data):
        np.testing.assert_array_equal(r, np.full_like(d, 3.0))


def test_sequence_unpack_gives_padded_values_and_a_mask():
    x = C.sequence.input_variable((2, 3), dtype=F64)
    data, mask = C.sequence.unpack(x, padding_value=-1000.0)
    first = np.array([[[0, 1, 1], [0, 1, 0]], [[1, 0, 0], [1, 0, 1]]], F64)
    second = np.array([[[0, 1, 1], [1, 1, 0]]], F64)
    result = C.combine([data, mask]).eval({x: [first, second]})
    np.testing.assert_array_equal(result[data][0], first)
    np.testing.assert_array_equal(result[data][1], np.concatenate([second, np.full((1, 2, 3), -1000.0)]))
    np.testing.assert_array_equal(result[mask], [[1, 1], [1, 0]])


def test_last_of_a_recurrence_of_plus_is_the_sequence_sum():
    # CNTK's unpack_backprop case: sequence.last(Recurrence(plus)(z)) is sequence.reduce_sum(z).
    x = C.sequence.input_variable(3, dtype=F64)
    z = C.layers.Dense(2)(x)
    by_loop = C.sequence.last(C.layers.Recurrence(C.plus)(z))
    by_sum = C.sequence.reduce_sum(z)
    data = [np.array([[0, 1, 1], [0, 1, 0], [1, 0, 0]], F64), np.array([[0, 0, 1], [0, 1, 1]], F64)]
    np.testing.assert_allclose(by_loop.eval({x: data}), by_sum.eval({x: data}), rtol=1e-12)
    w = z.parameters
    loop_grads, sum_grads = by_loop.grad({x: data}, wrt=w), by_sum.grad({x: data}, wrt=w)
    for p in w:
        np.testing.assert_allclose(loop_grads[p], sum_grads[p], rtol=1e-12)


# recurrent_test: (element count, shape of the one sequence [T, sample...], time step, initial state)
DELAYS = [
    (24, (4, 3, 2), 1, 0.1),
    (32, (4, 4, 2), 1, 0.1),
    (32, (2, 2, 4, 2), 1, 0.5),
    (32, (2, 2, 4, 2), 2, 0.3),
]


@pytest.mark.parametrize("count, shape, step, initial", DELAYS)
def test_past_value(count, shape, step, initial):
    x = np.arange(count, dtype=F64).reshape(shape)
    expected = np.concatenate([np.full((step,) + shape[1:], initial), x[:shape[0] - step]])[:shape[0]]
    gradient = np.concatenate([np.ones((max(shape[0] - step, 0),) + shape[1:]), np.zeros((step,) + shape[1:])])
    gradient = gradient[-shape[0]:]
    a = C.sequence.input_variable(shape[1:], dtype=F64, needs_gradient=True, name="a")
    init = C.parameter(init=np.array(initial), dtype=F64)
    y = C.past_value(a, init, step)
    np.testing.assert_allclose(y.eval({a: [x]})[0], expected)
    np.testing.assert_allclose(y.grad({a: [x]}, wrt=[a])[0], gradient)


@pytest.mark.parametrize("count, shape, step, initial", DELAYS)
def test_future_value(count, shape, step, initial):
    x = np.arange(count, dtype=F64).reshape(shape)
    expected = np.concatenate([x[step:], np.full((step,) + shape[1:], initial)])[-shape[0]:]
    gradient = np.concatenate([np.zeros((step,) + shape[1:]), np.ones((max(shape[0] - step, 0),) + shape[1:])])
    gradient = gradient[:shape[0]]
    a = C.sequence.input_variable(shape[1:], dtype=F64, needs_gradient=True, name="a")
    init = C.parameter(init=np.array(initial), dtype=F64)
    y = C.future_value(a, init, step)
    np.testing.assert_allclose(y.eval({a: [x]})[0], expected)
    np.testing.assert_allclose(y.grad({a: [x]}, wrt=[a])[0], gradient)


def test_delays_of_ragged_sequences_start_each_sequence_afresh():
    a = C.sequence.input_variable(1, dtype=F64)
    data = [np.array([[1.], [2.], [3.]]), np.array([[4.]])]
    past = C.past_value(a, initial_state=-1.0).eval({a: data})
    future = C.future_value(a, initial_state=9.0).eval({a: data})
    np.testing.assert_array_equal(past[0], [[-1.], [1.], [2.]])
    np.testing.assert_array_equal(past[1], [[-1.]])
    np.testing.assert_array_equal(future[0], [[2.], [3.], [9.]])
    np.testing.assert_array_equal(future[1], [[9.]])


# The examples of CNTK's cntk.ops.sequence docstrings.

def test_is_first_is_last_first_last():
    x = C.sequence.input_variable(shape=(3, 2), dtype=F64)
    x0 = np.reshape(np.arange(24.0), (1, 4, 3, 2))
    np.testing.assert_array_equal(C.sequence.is_first(x).eval({x: x0})[0], [[1.], [0.], [0.], [0.]])
    np.testing.assert_array_equal(C.sequence.is_last(x).eval({x: x0})[0], [[0.], [0.], [0.], [1.]])
    np.testing.assert_array_equal(C.sequence.first(x).eval({x: x0}), x0[:, 0])
    np.testing.assert_array_equal(C.sequence.last(x).eval({x: x0}), x0[:, -1])


def test_where_gather_and_scatter():
    x = C.sequence.input_variable(shape=(3, 2), dtype=F64)
    t = C.sequence.input_variable(shape=(1,), dtype=F64, sequence_axis=C.Axis("Ax"))
    x0 = np.reshape(np.arange(24.0), (1, 4, 3, 2))
    flags = np.array([[[1.], [0.], [1.], [0.]]])
    # where: the positions of the non-zero steps
    np.testing.assert_array_equal(C.sequence.where(t).eval({t: flags})[0], [[0.], [2.]])
    picked = C.sequence.gather(x, C.sequence.is_first(x) + C.sequence.is_last(x))
    np.testing.assert_array_equal(picked.eval({x: x0})[0], x0[0, [0, 3]])
    # Two inputs on one sequence axis: loom gives each sequence input an axis of its own unless told.
    shared = C.Axis.new_unique_dynamic_axis("shared")
    y = C.sequence.input_variable(shape=(2,), dtype=F64, sequence_axis=shared)
    cond = C.sequence.input_variable(shape=(1,), dtype=F64, sequence_axis=shared)
    spread = C.sequence.scatter(C.sequence.gather(y, cond), cond)
    y0 = np.arange(8.).reshape(1, 4, 2)
    c0 = np.array([[[0.], [1.], [1.], [0.]]])
    np.testing.assert_array_equal(spread.eval({y: y0, cond: c0})[0], y0[0] * c0[0])


def test_broadcast_as_repeats_a_batch_value_along_each_sequence():
    x = C.sequence.input_variable(shape=(1,), dtype=F64)
    b = C.input_variable(shape=(1,), dtype=F64)
    out = C.sequence.broadcast_as(b, x).eval({x: [np.ones((3, 1)), np.ones((1, 1))], b: np.array([[5.], [7.]])})
    np.testing.assert_array_equal(out[0], [[5.], [5.], [5.]])
    np.testing.assert_array_equal(out[1], [[7.]])


def test_the_sequence_docstring_examples_where_gather_scatter_broadcast_reduce():
    x = C.sequence.input_variable(shape=(3, 2))
    x0 = np.reshape(np.arange(24.0, dtype=np.float32), (1, 4, 3, 2))
    z = C.greater(C.reduce_sum(x), 60)
    sums = x0[0].reshape(4, -1).sum(1)
    np.testing.assert_array_equal(z.eval({x: x0})[0].ravel(), (sums > 60).astype(np.float32))
    np.testing.assert_array_equal(C.sequence.where(z).eval({x: x0})[0].ravel(), np.nonzero(sums > 60)[0])
    np.testing.assert_array_equal(C.sequence.gather(x, z).eval({x: x0})[0], x0[0][sums > 60])
    scattered = C.sequence.scatter(C.sequence.last(x), C.sequence.is_first(x)).eval({x: x0})[0]
    np.testing.assert_array_equal(scattered, np.concatenate([x0[0, -1:], np.zeros((3, 3, 2))]))
    spread = C.sequence.broadcast_as(C.sequence.last(x), C.sequence.is_first(x)).eval({x: x0})[0]
    np.testing.assert_array_equal(spread, np.repeat(x0[0, -1:], 4, axis=0))
    np.testing.assert_array_equal(C.sequence.reduce_sum(x).eval({x: x0}), x0.sum(axis=1))


@pytest.mark.parametrize("step", [2, -1, 0])
def test_sequence_delay_is_past_or_future_value(step):
    x = C.sequence.input_variable(1, dtype=F64)
    data = [np.array([[1.], [2.], [3.]])]
    out = C.sequence.delay(x, initial_state=-1.0, time_step=step).eval({x: data})[0].ravel()
    expected = {2: [-1, -1, 1], -1: [2, 3, -1], 0: [1, 2, 3]}[step]
    np.testing.assert_array_equal(out, expected)


def test_list_items_of_the_sample_shape_are_sequences_of_one_step():
    # value_test's dense configurations: [a, a] and [[a], [a, a]] for a sequence input of shape (5,).
    a = np.array([4., 5, 6., 7., 8.], np.float32)
    x = C.sequence.input_variable(5)
    out = (x * 1).eval({x: [a, a]})
    assert [o.shape for o in out] == [(1, 5), (1, 5)]
    out = (x * 1).eval({x: [[a], [a, a]]})
    assert [o.shape for o in out] == [(1, 5), (2, 5)]
