"""Recurrence, Fold and RecurrenceFrom over step functions written in Python, against numpy float64 loops."""

import numpy as np
import pytest

import loom as C
from support import numeric_gradient, rng

LENGTHS = (3, 1, 5)


def elman_numpy(xs, W, U, b, backwards=False, h0=None):
    """h' = tanh(x W + h U + b) over each sequence; the states, one row per step."""
    outs = []
    for s in xs:
        h = np.zeros(U.shape[0]) if h0 is None else h0.copy()
        o = np.zeros((len(s), U.shape[0]))
        for t in (reversed(range(len(s))) if backwards else range(len(s))):
            h = np.tanh(s[t] @ W + h @ U + b)
            o[t] = h
        outs.append(o)
    return outs


def lstm_numpy(xs, Wi, Wf, Wg, Ui, Uf, Ug, h0=None, c0=None):
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    hs, cs = [], []
    for s in xs:
        h = np.zeros(Ui.shape[0]) if h0 is None else h0
        c = np.zeros(Ui.shape[0]) if c0 is None else c0
        ho, co = np.zeros((len(s), len(h))), np.zeros((len(s), len(h)))
        for t in range(len(s)):
            i, f, g = sig(s[t] @ Wi + h @ Ui), sig(s[t] @ Wf + h @ Uf), np.tanh(s[t] @ Wg + h @ Ug)
            c = f * c + i * g
            h = np.tanh(c)
            ho[t], co[t] = h, c
        hs.append(ho)
        cs.append(co)
    return hs, cs


def elman_setup(seed=0):
    r = rng(seed)
    W, U, b = r.normal(size=(2, 4)), r.normal(size=(4, 4)) * 0.5, r.normal(size=4)
    xs = [r.normal(size=(n, 2)) for n in LENGTHS]
    x = C.sequence.input_variable(2, name="x")
    Wp, Up, bp = (C.parameter(init=a, dtype=np.float64, name=n) for a, n in ((W, "W"), (U, "U"), (b, "b")))

    def step(h, x):
        return C.tanh(C.times(x, Wp) + C.times(h, Up) + bp)

    return x, xs, step, (W, U, b), (Wp, Up, bp)


def assert_sequences(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)


def test_elman_step_over_a_ragged_batch_equals_the_numpy_loop():
    x, xs, step, (W, U, b), _ = elman_setup()
    y = C.layers.Recurrence(step)(x)
    assert y.shape == (4,)
    assert_sequences(y.eval({x: xs}), elman_numpy(xs, W, U, b))


def test_go_backwards_equals_the_reversed_loop():
    x, xs, step, (W, U, b), _ = elman_setup(1)
    y = C.layers.Recurrence(step, go_backwards=True)(x)
    assert_sequences(y.eval({x: xs}), elman_numpy(xs, W, U, b, backwards=True))


def test_initial_state_and_recurrence_from_start_from_it():
    x, xs, step, (W, U, b), _ = elman_setup(2)
    h0 = np.array([0.5, -0.25, 1.0, 0.0])
    y = C.layers.Recurrence(step, initial_state=h0)(x)
    assert_sequences(y.eval({x: xs}), elman_numpy(xs, W, U, b, h0=h0))
    z = C.layers.RecurrenceFrom(step)(C.constant(h0), x)
    assert_sequences(z.eval({x: xs}), elman_numpy(xs, W, U, b, h0=h0))
    # a per-sequence initial state (an encoder's final state, say), going backwards
    starts = C.input_variable(4)
    h0s = rng(8).normal(size=(3, 4))
    z = C.layers.RecurrenceFrom(step, go_backwards=True)(starts, x)
    expected = [elman_numpy([s], W, U, b, backwards=True, h0=h)[0] for s, h in zip(xs, h0s)]
    assert_sequences(z.eval({x: xs, starts: h0s}), expected)


def test_gradient_for_W_matches_central_differences():
    x, xs, step, (W, U, b), (Wp, _, _) = elman_setup(3)
    y = C.layers.Recurrence(step)(x)
    analytic = y.grad({x: xs}, wrt=[Wp])
    w = W.copy()
    numeric = numeric_gradient(lambda: sum(o.sum() for o in elman_numpy(xs, w, U, b)), w)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_two_state_lstm_like_step_equals_numpy():
    r = rng(4)
    arrays = [r.normal(size=(2, 3)) for _ in range(3)] + [r.normal(size=(3, 3)) * 0.5 for _ in range(3)]
    Wi, Wf, Wg, Ui, Uf, Ug = (C.parameter(init=a, dtype=np.float64) for a in arrays)
    xs = [r.normal(size=(n, 2)) for n in LENGTHS]
    x = C.sequence.input_variable(2)

    def step(h, c, x):
        i = C.sigmoid(C.times(x, Wi) + C.times(h, Ui))
        f = C.sigmoid(C.times(x, Wf) + C.times(h, Uf))
        g = C.tanh(C.times(x, Wg) + C.times(h, Ug))
        c2 = f * c + i * g
        return C.tanh(c2), c2

    hs, cs = lstm_numpy(xs, *arrays)
    assert_sequences(C.layers.Recurrence(step)(x).eval({x: xs}), hs)
    h, c = C.layers.Recurrence(step, return_full_state=True)(x)
    assert_sequences(c.eval({x: xs}), cs)
    last_h, last_c = C.layers.Fold(step, return_full_state=True)(x)
    np.testing.assert_allclose(last_c.eval({x: xs}), np.stack([s[-1] for s in cs]), rtol=1e-10)
    h0, c0 = np.array([0.5, -1.0, 0.25]), np.array([1.0, 0.0, -0.5])
    hs0, cs0 = lstm_numpy(xs, *arrays, h0=h0, c0=c0)
    assert_sequences(C.layers.Recurrence(step, initial_state=(h0, c0))(x).eval({x: xs}), hs0)
    _, c_from = C.layers.RecurrenceFrom(step, return_full_state=True)(C.constant(h0), C.constant(c0), x)
    assert_sequences(c_from.eval({x: xs}), cs0)


def test_fold_last_state_equals_the_loops_last():
    x, xs, step, (W, U, b), _ = elman_setup(5)
    last = C.layers.Fold(step)(x).eval({x: xs})
    np.testing.assert_allclose(last, np.stack([o[-1] for o in elman_numpy(xs, W, U, b)]), rtol=1e-10)
    first = C.layers.Fold(step, go_backwards=True)(x).eval({x: xs})
    np.testing.assert_allclose(first, np.stack([o[0] for o in elman_numpy(xs, W, U, b, backwards=True)]),
                               rtol=1e-10)


def test_cell_recurrence_still_runs():
    x = C.sequence.input_variable(2)
    y = C.layers.Recurrence(C.layers.LSTM(3))(x)
    assert [o.shape for o in y.eval({x: [np.ones((4, 2), np.float32)]})] == [(4, 3)]


def test_step_returning_the_wrong_shape_names_the_shapes():
    x = C.sequence.input_variable(2)
    W = C.parameter((2, 3))
    U = C.parameter((4, 3))
    with pytest.raises(C.UserError, match=r"Recurrence: the loop cannot be built from the step's state 0: .*\[3\].*\[4, 3\]"):
        C.layers.Recurrence(lambda h, x: C.times(x, W) + C.times(h, U))(x)
    with pytest.raises(C.UserError, match=r"Recurrence: the step fails on states of shape \(2,\).*\[3\].*\[2\]"):
        C.layers.Recurrence(lambda h, x: C.times(x, W) + h, initial_state=np.ones(2))(x)
    with pytest.raises(C.UserError, match=r"Fold: the step returns states of other shapes .*\(2,\)"):
        C.layers.Fold(lambda h, x: C.times(x, W), initial_state=np.ones(2))(x)


def test_a_layer_on_the_state_takes_the_shape_from_initial_state():
    x = C.sequence.input_variable(2)
    dx, dh = C.layers.Dense(4), C.layers.Dense(4, bias=False)

    def step(h, x):
        return C.tanh(dx(x) + dh(h))

    with pytest.raises(C.UserError, match="Recurrence: the step needs the shape of its states.*initial_state"):
        C.layers.Recurrence(step)(x)
    y = C.layers.Recurrence(step, initial_state=np.zeros(4))(x)
    data = [np.ones((3, 2)), np.ones((1, 2))]
    W, b, U = dx.parameters[0].value, dx.parameters[1].value, dh.parameters[0].value
    W, b = (W, b) if W.ndim == 2 else (b, W)
    assert_sequences(y.eval({x: data}), elman_numpy(data, W, U, b))


def test_step_errors():
    x = C.sequence.input_variable(2)
    with pytest.raises(C.UserError, match="takes 1 argument"):
        C.layers.Recurrence(lambda x: x)
    with pytest.raises(C.UserError, match="takes 2 state.*returns 1"):
        C.layers.Recurrence(lambda h, c, x: h + x)(x)
    with pytest.raises(C.UserError, match="Python function"):
        C.layers.Recurrence(42)
    with pytest.raises(C.UserError, match="state 0 does not depend on the input x"):
        C.layers.Recurrence(lambda h, x: C.constant(np.ones(2)))(x)
    with pytest.raises(C.UserError, match="loop cannot be built from the step's state 0"):
        C.layers.Recurrence(lambda h, x: h)(x)
    with pytest.raises(C.UserError, match="sequence axis"):
        C.layers.Recurrence(lambda h, x: h + x)(C.input_variable(2))


def test_unfold_from_feeds_each_output_back_for_as_long_as_the_like_sequence():
    r = rng(6)
    W, b = r.normal(size=(3, 3)) * 0.7, r.normal(size=3)
    Wp, bp = C.parameter(init=W, dtype=np.float64), C.parameter(init=b, dtype=np.float64)
    like = C.sequence.input_variable(5)
    start = C.input_variable(3)
    y = C.layers.UnfoldFrom(lambda prev: C.tanh(C.times(prev, Wp) + bp))(start, like)
    starts = r.normal(size=(3, 3))
    likes = [np.full((n, 5), np.nan) for n in LENGTHS]  # its values play no part, NaN included
    expected = []
    for s0, n in zip(starts, LENGTHS):
        prev, rows = s0, []
        for _ in range(n):
            prev = np.tanh(prev @ W + b)
            rows.append(prev)
        expected.append(np.array(rows))
    assert_sequences(y.eval({start: starts, like: likes}), expected)
    with pytest.raises(C.UserError, match="until_predicate"):
        C.layers.UnfoldFrom(lambda prev: prev, until_predicate=lambda y: y)
    with pytest.raises(C.UserError, match="dynamic_axes_like is a sequence"):
        C.layers.UnfoldFrom(lambda prev: prev)(start, start)


def test_the_step_is_called_once_not_per_time_step():
    x, xs, step, (W, U, b), _ = elman_setup(7)
    calls = []

    def counted(h, x):
        calls.append(1)
        return step(h, x)

    y = C.layers.Recurrence(counted)(x)
    y.eval({x: xs})
    y.grad({x: xs}, wrt=[x])
    assert len(calls) == 1
