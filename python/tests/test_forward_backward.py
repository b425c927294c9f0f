"""Function.forward / Function.backward over a kept session, as CNTK's."""

import numpy as np
import pytest

import loom as C
from support import rng


def rnn_graph(seed=0):
    r = rng(seed)
    x = C.sequence.input_variable(2)
    W = C.parameter(init=r.normal(size=(2, 3)), dtype=np.float64)
    U = C.parameter(init=r.normal(size=(3, 3)) * 0.5, dtype=np.float64)
    y = C.layers.Recurrence(lambda h, x: C.tanh(C.times(x, W) + C.times(h, U)))(x)
    xs = [r.normal(size=(n, 2)) for n in (3, 1, 5)]
    return x, W, U, y, xs


def test_backward_gradient_equals_grad():
    x, W, U, y, xs = rnn_graph()
    state, out = y.forward({x: xs}, keep_for_backward={y})
    expected = y.eval({x: xs})
    for a, e in zip(out[y], expected):
        np.testing.assert_allclose(a, e, rtol=1e-12)
    grads = y.backward(state, {y: [np.ones_like(o) for o in out[y]]}, {W, U})
    want = y.grad({x: xs}, wrt=[W, U])
    np.testing.assert_allclose(grads[W], want[W], rtol=1e-10)
    np.testing.assert_allclose(grads[U], want[U], rtol=1e-10)
    again = y.backward(state, {y: [np.ones_like(o) for o in out[y]]}, {W})  # a second backward on the session
    np.testing.assert_allclose(again[W], want[W], rtol=1e-10)
    gx = y.backward(state, {y: [np.ones_like(o) for o in out[y]]}, [x])[x]
    for a, e in zip(gx, y.grad({x: xs}, wrt=[x])):
        np.testing.assert_allclose(a, e, rtol=1e-10)


def test_freed_and_foreign_states_are_user_errors():
    x, W, U, y, xs = rnn_graph(1)
    with y.forward({x: xs}, keep_for_backward={y})[0] as state:
        assert not state.is_freed
    assert state.is_freed
    with pytest.raises(C.UserError, match="freed"):
        y.backward(state, {y: [np.ones((n, 3)) for n in (3, 1, 5)]}, {W})
    z = C.sequence.reduce_sum(y)
    other, _ = z.forward({x: xs}, keep_for_backward={z})
    with pytest.raises(C.UserError, match="another Function"):
        y.backward(other, {y: [np.ones((n, 3)) for n in (3, 1, 5)]}, {W})
    other.free()
    with pytest.raises(C.UserError, match="freed"):
        z.backward(other, {z: np.ones((3, 3))}, {W})


def test_backward_refusals():
    x, W, U, y, xs = rnn_graph(2)
    state, out = y.forward({x: xs})
    with pytest.raises(C.UserError, match="keep_for_backward"):
        y.backward(state, {y: [np.ones_like(o) for o in out[y]]}, {W})
    state, out = y.forward({x: xs}, keep_for_backward={y})
    with pytest.raises(C.UserError, match="backward: root_gradients"):
        y.backward(state, {y: [np.ones((n, 4)) for n in (3, 1, 5)]}, {W})
    with pytest.raises(C.UserError, match=r"lengths \[3, 1, 4\].*lengths \[3, 1, 5\]"):
        y.backward(state, {y: [np.ones((n, 3)) for n in (3, 1, 4)]}, {W})
    with pytest.raises(C.UserError, match="not one of the outputs"):
        y.forward({x: xs}, keep_for_backward={W})


def test_combine_runs_its_outputs_together():
    x, W, U, y, xs = rnn_graph(3)
    last = C.sequence.last(y)
    both = C.combine([y, last])
    assert both.outputs == (y, last) and both.arguments == [x]
    assert set(both.parameters) == {W, U}
    values = both.eval({x: xs})
    np.testing.assert_allclose(values[last], np.stack([v[-1] for v in values[y]]), rtol=1e-12)
    state, out = both.forward({x: xs}, keep_for_backward={y, last})
    grads = both.backward(state, {last: np.ones_like(out[last])}, [W])
    np.testing.assert_allclose(grads[W], last.grad({x: xs}, wrt=[W]), rtol=1e-10)
    with pytest.raises(C.UserError, match="several|use outputs"):
        both.output


def test_root_gradients_weight_the_outputs():
    # d sum(y * G) / dW for y = x W, by hand: sum over every step of x_t^T g_t.
    r = rng(4)
    x = C.sequence.input_variable(2)
    W = C.parameter(init=r.normal(size=(2, 3)), dtype=np.float64)
    y = C.times(x, W)
    xs = [r.normal(size=(n, 2)) for n in (3, 1, 5)]
    gs = [r.normal(size=(n, 3)) for n in (3, 1, 5)]
    with y.forward({x: xs}, keep_for_backward={y})[0] as state:
        grads = y.backward(state, {y: gs}, [W, x])
    np.testing.assert_allclose(grads[W], sum(a.T @ g for a, g in zip(xs, gs)), rtol=1e-10)
    for dx, g in zip(grads[x], gs):
        np.testing.assert_allclose(dx, g @ W.value.T, rtol=1e-10)


def test_threads_share_a_state_and_one_frees_it():
    import threading
    x, W, U, y, xs = rnn_graph(5)
    want = y.grad({x: xs}, wrt=[W])
    state, out = y.forward({x: xs}, keep_for_backward={y})
    ones = {y: [np.ones_like(o) for o in out[y]]}
    results, errors = [], []

    def run():
        for _ in range(5):
            try:
                results.append(y.backward(state, ones, [W])[W])
            except C.UserError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    state.free()
    for t in threads:
        t.join()
    assert len(results) + len(errors) == 15
    for g in results:
        np.testing.assert_allclose(g, want, rtol=1e-10)
    assert all("freed" in e for e in errors)
