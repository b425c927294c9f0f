"""Function.forward(memory_budget=...): a recurrence under a budget keeps less for backward and gives
the same gradients, bit for bit (loom's square-root checkpointing, Session::set_memory_budget)."""

import numpy as np
import pytest

import loom as C
from support import numeric_gradient, rng


def lstm_loss(steps, seed=0):
    C.set_seed(seed)
    x = C.sequence.input_variable(3)
    lstm = C.layers.Recurrence(C.layers.LSTM(8))
    loss = C.sequence.reduce_sum(C.reduce_sum(lstm(x)))
    return x, lstm, loss, [rng(seed).normal(size=(steps, 3)).astype(np.float32)]


def gradients_and_peak(loss, data, parameters, budget):
    with loss.forward(data, keep_for_backward={loss}, memory_budget=budget)[0] as state:
        g = loss.backward(state, {loss: np.ones((1, 1), np.float32)}, parameters)
        return g, state.loop_bytes_peak


def test_a_budget_keeps_less_and_gives_the_same_gradients_bit_for_bit():
    x, lstm, loss, xs = lstm_loss(600)
    plain, plain_peak = gradients_and_peak(loss, {x: xs}, lstm.parameters, 0)
    # A step keeps at least its states and gates, 8 floats each: 600 steps keep tens of kB.
    assert plain_peak > 600 * 8 * 4
    budgeted, peak = gradients_and_peak(loss, {x: xs}, lstm.parameters, plain_peak // 2)
    assert peak <= plain_peak // 2
    for p in lstm.parameters:
        assert budgeted[p].dtype == plain[p].dtype and (budgeted[p] == plain[p]).all()


def test_the_budgeted_gradient_is_the_numeric_one():
    x, lstm, loss, xs = lstm_loss(400, seed=1)
    C.to_precision(lstm.parameters, np.float64)
    xs = [xs[0].astype(np.float64)]
    _, plain_peak = gradients_and_peak(loss, {x: xs}, lstm.parameters, 0)
    w = lstm.parameters[0]
    g, peak = gradients_and_peak(loss, {x: xs}, [w], plain_peak * 6 // 10)
    assert peak < plain_peak
    value = w.value.copy()

    def f():
        w.value = value
        return float(loss.eval({x: xs}).sum())

    want = numeric_gradient(f, value)
    w.value = value
    np.testing.assert_allclose(g[w], want, rtol=1e-5, atol=1e-7)


def test_too_small_a_budget_is_a_user_error_giving_the_least_that_works():
    x, lstm, loss, xs = lstm_loss(200)
    with pytest.raises(C.UserError, match="budget"):
        loss.forward({x: xs}, keep_for_backward={loss}, memory_budget=64)
