"""CNTK's AttentionModel (C.layers.AttentionModel) and cells called as functions (lstm(h, c, x)),
inside a step function of a Recurrence, against numpy float64."""

import numpy as np
import pytest

import loom as C
from support import rng


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _weights(model):
    p = {q.name.rsplit(".", 1)[-1]: q.value for q in model.parameters}
    return p["W_k"], p["W_q"], p["v"].reshape(-1)


def _attend(enc, query, w_k, w_q, v):
    scores = np.tanh(enc @ w_k + query @ w_q) @ v
    a = np.exp(scores - scores.max())
    return (a / a.sum()) @ enc


def test_attention_model_of_a_batch_query_against_numpy():
    C.set_seed(1)
    enc = C.sequence.input_variable(4, name="enc")
    query = C.input_variable(3, name="query")
    model = C.layers.AttentionModel(5)
    context = model(enc, query)
    assert context.shape == (4,)
    C.to_precision(model.parameters, np.float64)
    assert len(model.parameters) == 3
    r = rng(2)
    encs, queries = [r.normal(size=(t, 4)) for t in (3, 1, 6)], r.normal(size=(3, 3))
    got = context.eval({enc: encs, query: queries})
    want = np.stack([_attend(e, q, *_weights(model)) for e, q in zip(encs, queries)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    weights = model.attention(enc, query)[1].eval({enc: encs, query: queries})
    np.testing.assert_allclose(weights.sum(axis=1), 1, rtol=1e-12)
    assert (weights[1, 1:] == 0).all()  # item 1 has one encoder step: its padding gets no weight


def test_attention_model_inside_a_python_step_against_a_numpy_loop():
    C.set_seed(3)
    enc = C.sequence.input_variable(4, name="enc")
    x = C.sequence.input_variable(4, name="x")
    model = C.layers.AttentionModel(6)

    def step(h, x_t):  # the decoder's state attends with its previous value
        return C.tanh(x_t + model(enc, h))

    y = C.layers.Recurrence(step, initial_state=np.zeros(4))(x)
    C.to_precision(model.parameters, np.float64)
    r = rng(4)
    encs, xs = [r.normal(size=(t, 4)) for t in (2, 5)], [r.normal(size=(t, 4)) for t in (4, 1)]
    got = y.eval({enc: encs, x: xs})
    for e, seq, g in zip(encs, xs, got):
        h, want = np.zeros(4), []
        for x_t in seq:
            h = np.tanh(x_t + _attend(e, h, *_weights(model)))
            want.append(h)
        np.testing.assert_allclose(g, np.array(want), rtol=1e-10, atol=1e-12)


def test_an_lstm_cell_called_in_a_step_against_numpy():
    C.set_seed(5)
    x = C.sequence.input_variable(3, name="x")
    cell = C.layers.LSTM(2, name="cell")
    h = C.layers.Recurrence(lambda h, c, x_t: cell(h, c, x_t), initial_state=(np.zeros(2), np.zeros(2)))(x)
    C.to_precision(cell.parameters, np.float64)
    p = {q.name.rsplit(".", 1)[-1]: q.value for q in cell.parameters}
    seq = rng(6).normal(size=(4, 3))
    hh, c, want = np.zeros(2), np.zeros(2), []
    for x_t in seq:
        a = x_t @ p["W"] + p["b"] + hh @ p["U"]
        i, f, o, g = _sigmoid(a[:2]), _sigmoid(a[2:4]), _sigmoid(a[4:6]), np.tanh(a[6:])
        c = f * c + i * g
        hh = o * np.tanh(c)
        want.append(hh)
    np.testing.assert_allclose(h.eval({x: [seq]})[0], np.array(want), rtol=1e-10, atol=1e-12)
    gru = C.layers.GRU(2)
    assert gru(C.constant(np.zeros(2)), C.constant(np.ones(3))).shape == (2,)  # one state: a Variable


def test_bad_calls_are_user_errors():
    cell = C.layers.LSTM(2, name="cell")
    with pytest.raises(C.UserError, match="cell.*2 state.*got 2 argument"):
        cell(C.constant(np.zeros(2)), C.constant(np.zeros(3)))
    with pytest.raises(C.UserError, match="attention_span"):
        C.layers.AttentionModel(4, attention_span=20)
    with pytest.raises(C.UserError, match="attention_dim"):
        C.layers.AttentionModel(0)
