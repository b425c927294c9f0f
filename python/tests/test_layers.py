"""C.layers: each layer's value against its formula in numpy (from its own parameters' values), and
gradients by central differences in float64 on ragged batches."""

import numpy as np
import pytest

import loom as C
from support import assert_close, lstm_reference, numeric_gradient, parameter_numeric_gradient, rng, total



def _by_name(layer):
    return {p.name.split(".")[-1]: p for p in layer.parameters}


def test_dense_and_sequential():
    x = C.input_variable(3, name="x")
    first = C.layers.Dense(4, activation=C.tanh, name="first")
    second = C.layers.Dense((2,), name="second")
    model = C.layers.Sequential([first, second])
    y = model(x)
    assert y.shape == (2,)
    assert [p.name for p in model.parameters] == ["first.W", "first.b", "second.W", "second.b"]
    p1, p2 = _by_name(first), _by_name(second)
    a = rng(20).normal(size=(5, 3))
    expected = np.tanh(a @ p1["W"].value + p1["b"].value) @ p2["W"].value + p2["b"].value
    assert_close(y.eval(a), expected, rtol=1e-5, atol=1e-6)
    # Called again, the layer shares its parameters.
    z = first(C.input_variable(3))
    assert set(p.name for p in z.parameters) == {"first.b", "first.W"}


def test_embedding_of_ids_and_of_one_hot_rows():
    ids = C.sequence.input_variable(1, name="ids")
    e = C.layers.Embedding(3, vocabulary=5, name="e")
    table = None
    out = e(ids).eval({ids: [np.array([4, 0]), np.array([2])]})
    table = e.parameters[0].value
    assert table.shape == (5, 3)
    assert_close(out, [table[[4, 0]], table[[2]]])
    rows = C.input_variable(5)
    e2 = C.layers.Embedding(2)
    one_hot = np.eye(5)[[1, 3]]
    assert_close(e2(rows).eval(one_hot), one_hot @ e2.parameters[0].value, rtol=1e-6)


def test_lstm_recurrence_fold_and_birecurrence_against_numpy_and_by_finite_differences():
    C.set_seed(4)
    x = C.sequence.input_variable(3, name="x")
    fwd_cell, bwd_cell = C.layers.LSTM(2, name="fwd"), C.layers.LSTM(2, name="bwd")
    bi = C.layers.BiRecurrence(fwd_cell, bwd_cell)
    y = bi(x)
    assert y.shape == (4,)
    C.to_precision(y.parameters, np.float64)
    f, b = _by_name(fwd_cell), _by_name(bwd_cell)
    seqs = [rng(21).normal(size=(n, 3)) for n in (3, 1, 5)]
    expected = [np.hstack([lstm_reference(s, f["W"].value, f["U"].value, f["b"].value, 2),
                           lstm_reference(s, b["W"].value, b["U"].value, b["b"].value, 2, backwards=True)])
                for s in seqs]
    assert_close(y.eval({x: seqs}), expected, rtol=1e-9, atol=1e-12)
    last = C.layers.Fold(fwd_cell)(x)
    assert_close(last.eval({x: seqs}), np.stack([e[-1, :2] for e in expected]), rtol=1e-9)
    loss = C.sequence.reduce_sum(y * C.constant(np.array([0.5, 1.0, -1.5, 2.0])))
    g = loss.grad({x: seqs}, wrt=[f["W"], b["U"], x])
    assert_close(g[f["W"]], parameter_numeric_gradient(loss, {x: seqs}, f["W"]), rtol=1e-5, atol=1e-8)
    assert_close(g[b["U"]], parameter_numeric_gradient(loss, {x: seqs}, b["U"]), rtol=1e-5, atol=1e-8)
    for i, s in enumerate(seqs):
        assert_close(g[x][i], numeric_gradient(lambda: total(loss.eval({x: seqs})), s), rtol=1e-5, atol=1e-8)


def test_rnn_step_with_a_python_activation_and_gru_run():
    x = C.sequence.input_variable(2, name="x")
    cell = C.layers.RNNStep(3, activation=lambda v: C.tanh(v) * 2)
    y = C.layers.Recurrence(cell)(x)
    p = _by_name(cell)
    s = rng(22).normal(size=(4, 2))
    h, out = np.zeros(3), []
    for row in s:
        h = np.tanh(row @ p["W"].value + p["b"].value + h @ p["U"].value) * 2
        out.append(h)
    assert_close(y.eval({x: [s]}), [np.array(out)], rtol=1e-5, atol=1e-6)
    gru = C.layers.Recurrence(C.layers.GRU(3))(x)
    assert [o.shape for o in gru.eval({x: [s, s[:1]]})] == [(4, 3), (1, 3)]


def test_layer_errors():
    with pytest.raises(C.UserError, match="activation"):
        C.layers.Dense(2, activation="tanh")
    with pytest.raises(C.UserError, match="cell"):
        C.layers.BiRecurrence(lambda h, x: h + x, C.layers.GRU(2))
    with pytest.raises(C.UserError, match="Sequential"):
        C.layers.Sequential([C.layers.Dense(2), 3])
    with pytest.raises(C.UserError, match="vocabulary"):
        C.layers.Embedding(3)(C.input_variable(1))
    with pytest.raises(C.UserError, match="enable_self_stabilization"):
        C.layers.LSTM(3, enable_self_stabilization=True)
