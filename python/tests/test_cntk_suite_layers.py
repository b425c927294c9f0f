"""CNTK's layer tests (layers/tests/layers_test.py) for the layers loom has, paraphrased as a CNTK
user's program calls loom: each forward value computed here with numpy from the layer's own
parameters (or, for the recurrent blocks with constant weights, CNTK's published numbers beside
a numpy reference)."""

import numpy as np
import pytest

import loom as C
from support import lstm_reference

F64 = np.float64


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _gru_reference(seq, W, H, H1, b, n):
    # CNTK's GRU (cntk/layers/blocks.py): update z and reset r from x W + h H, then the candidate from
    # x's third of W and (r * h) H1; h' = (1 - z) c + z h.
    h, out = np.zeros(n), []
    for x in seq:
        projx, projh = x @ W + b, h @ H
        z = _sigmoid(projx[:n] + projh[:n])
        r = _sigmoid(projx[n:2 * n] + projh[n:])
        c = np.tanh(projx[2 * n:] + (r * h) @ H1)
        h = (1 - z) * c + z * h
        out.append(h)
    return np.array(out)


def _rnn_reference(seq, W, H, b):
    h, out = np.zeros(W.shape[1]), []
    for x in seq:
        h = _sigmoid(x @ W + h @ H + b)
        out.append(h)
    return np.array(out)


# block, W's width, H's width (in units of the block's size), CNTK's values for arange(16) as 4 steps
BLOCKS = [
    (C.layers.LSTM, 4, 4, [0.21532, 0.760161, 0.95975, 0.993661]),
    (C.layers.GRU, 3, 2, [0.1903, 0.262537, 0.276712, 0.279545]),
    (C.layers.RNNStep, 1, 1, [0.645656, 0.925727, 0.986114, 0.997249]),
]


@pytest.mark.parametrize("block, w_mult, h_mult, cntk_values", BLOCKS, ids=["LSTM", "GRU", "RNNStep"])
def test_recurrent_blocks_with_constant_weights(block, w_mult, h_mult, cntk_values):
    size = 5
    y = C.input_variable(4, dynamic_axes=[C.Axis.default_batch_axis(), C.Axis("sequenceAxis")])
    net = C.layers.Recurrence(block(size, init=0.1))(y)
    assert net.b.shape == (w_mult * size,)
    assert net.W.shape == (4, w_mult * size)
    assert net.H.shape == (size, h_mult * size)
    data = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    out = net.eval(data)[0]
    W, H, b = net.W.value.astype(F64), net.H.value.astype(F64), net.b.value.astype(F64)
    seq = data[0].astype(F64)
    if block is C.layers.LSTM:
        expected = lstm_reference(seq, W, H, b, size)
    elif block is C.layers.GRU:
        expected = _gru_reference(seq, W, H, net.H1.value.astype(F64), b, size)
    else:
        expected = _rnn_reference(seq, W, H, b)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, np.repeat(np.array(cntk_values)[:, None], size, axis=1), atol=1e-5)


def test_recurrence_of_a_gru_with_a_constant_and_a_data_initial_state():
    # CNTK's test_recurrence: GRU(5, init=0.05) over arange(25) as 5 steps, from 0.1, both as
    # Recurrence's initial_state and as RecurrenceFrom's argument.
    cntk = [0.239151, 0.338713, 0.367456, 0.375577, 0.377891]
    x = C.sequence.input_variable(5)
    data = np.arange(25, dtype=np.float32).reshape(1, 5, 5)
    from_constant = C.layers.Recurrence(C.layers.GRU(5, init=0.05), initial_state=0.1)(x)
    np.testing.assert_allclose(from_constant.eval({x: data})[0], np.repeat(np.array(cntk)[:, None], 5, 1), atol=1e-5)
    gru = C.layers.GRU(5, init=0.05)
    state = C.input_variable(5)  # one initial state per sequence
    from_data = C.layers.RecurrenceFrom(lambda h, v: gru(h, v))(state, x)
    out = from_data.eval({x: data, state: np.full((1, 5), 0.1, np.float32)})
    np.testing.assert_allclose(out[0], np.repeat(np.array(cntk)[:, None], 5, 1), atol=1e-5)


def test_recurrence_of_python_steps_with_several_states():
    # CNTK's test_recurrence_step_fun makes steps of 1 to 10 states; here each state also runs.
    x = C.sequence.input_variable(1, dtype=F64)
    data = [np.array([[2.], [3.], [4.]])]
    total = np.cumsum(data[0])[:, None]

    def one(h, v):
        return h + v

    def two(h, c, v):
        return h + v, c + 2 * v

    def three(h, c, d, v):
        return h + v, c + 2 * v, d + 3 * v

    np.testing.assert_allclose(C.layers.Recurrence(one)(x).eval({x: data})[0], total)
    for step, count in ((two, 2), (three, 3)):
        states = C.layers.Recurrence(step, return_full_state=True)(x)
        assert len(states) == count
        for k, state in enumerate(states):
            np.testing.assert_allclose(state.eval({x: data})[0], total * (k + 1))


def test_fold_of_plus_and_of_element_max():
    r = C.layers.Fold(C.plus)
    x = C.sequence.input_variable(1, dtype=F64)
    data = [np.array([[2.], [6.], [4.], [8.], [6.]])]
    np.testing.assert_array_equal(r(x).eval({x: data}), [data[0].sum(0)])
    m = C.layers.Fold(C.element_max)
    x2 = C.sequence.input_variable(2, dtype=F64)
    data2 = [np.array([[2., 1], [6, 3], [4, 2], [8, 1], [6, 0]])]
    np.testing.assert_array_equal(m(x2).eval({x2: data2}), [data2[0].max(0)])


def test_unfold_from_doubles_for_as_long_as_each_sequence():
    x = C.sequence.input_variable(1)
    unfold = C.layers.UnfoldFrom(lambda s: s * 2)
    out = unfold(C.Constant(np.array([1.0])), x).eval({x: [np.zeros((3, 1), np.float32), np.zeros((5, 1),
                                                                                                    np.float32)]})
    np.testing.assert_array_equal(out[0], [[2.], [4.], [8.]])
    np.testing.assert_array_equal(out[1], [[2.], [4.], [8.], [16.], [32.]])


def test_unfold_from_until_predicate_is_a_clear_error():
    with pytest.raises(C.UserError, match="until_predicate"):
        C.layers.UnfoldFrom(lambda s: s * 2, until_predicate=lambda s: C.greater(s, 63), length_increase=1.6)


def test_dense_layers_against_numpy():
    y = C.input_variable(2)
    dat = np.array([[-1., 1.]], dtype=np.float32)
    p = C.layers.Dense(2, activation=None, name="foo")(y)
    np.testing.assert_allclose(p(y).eval({y: dat}), dat @ p.foo.W.value + p.foo.b.value, rtol=1e-6)
    np.testing.assert_allclose(p(dat), dat @ p.foo.W.value + p.foo.b.value, rtol=1e-6)  # a Function on data
    with pytest.raises(C.UserError, match="clone"):
        p(C.input_variable(2))
    p = C.layers.Dense(2, activation=C.sigmoid, name="foo")(y)
    np.testing.assert_allclose(p.eval({y: dat}), _sigmoid(dat @ p.foo.W.value + p.foo.b.value), rtol=1e-6)
    p = C.layers.Dense(3, activation=None, name="foo")(y)
    q = C.layers.Dense(3, activation=None, name="bar")(p)
    first = dat @ q.foo.W.value + q.foo.b.value
    np.testing.assert_allclose(q.eval({y: dat}), first @ q.bar.W.value + q.bar.b.value, rtol=1e-5)
    with pytest.raises(ValueError):
        C.layers.Dense(2, input_rank=1, map_rank=1)


def test_lookup_of_layer_parameters_by_name():
    model = C.layers.Sequential([C.layers.Dense(3, init=1, name="first"), C.layers.Dense(2, init=2, name="second")])
    model.update_signature((2,))
    np.testing.assert_array_equal(model.first.W.value, np.ones((2, 3)))
    np.testing.assert_array_equal(model.second.W.value, np.full((3, 2), 2.0))


def test_embedding_layers():
    y = C.input_variable(2)
    dat = np.array([[-1., 1.]], dtype=np.float32)
    e = C.layers.Embedding(shape=3, name="foo")
    np.testing.assert_allclose(e(y).eval({y: dat}), dat @ e.E.value, rtol=1e-6)
    table = [[1, 3, 2], [3, 4, 1]]
    e = C.layers.Embedding(3, init=table, name="bar")
    np.testing.assert_array_equal(e(y).eval({y: dat}), dat @ np.array(table))
    e = C.layers.Embedding(weights=table, name="baz")
    np.testing.assert_array_equal(e(y).eval({y: dat}), dat @ np.array(table))
    with pytest.raises(ValueError):
        C.layers.Embedding(shape=None, init=1, weights=[1., 2., 3.])
    with pytest.raises(ValueError):
        C.layers.Embedding(3, weights=[1., 2., 3.])
    with pytest.raises(ValueError):
        C.layers.Embedding(name="embedding")


def test_sequential_of_layers_and_functions():
    x = C.input_variable(3, dtype=F64)
    model = C.layers.Sequential([C.layers.Dense(4, init=0.1), C.relu, C.layers.Dense(2, init=-0.2)])
    data = np.array([[1., -2., 3.]])
    h = np.maximum(data @ np.full((3, 4), 0.1), 0)
    np.testing.assert_allclose(model(x).eval({x: data}), h @ np.full((4, 2), -0.2), rtol=1e-6)


def test_layer_normalization_against_numpy():
    x = C.input_variable(4, dtype=F64)
    data = np.array([[1., 2., 4., 7.], [0., -1., 3., 3.]])
    out = C.layers.LayerNormalization()(x).eval({x: data})
    mean, var = data.mean(1, keepdims=True), data.var(1, keepdims=True)
    np.testing.assert_allclose(out, (data - mean) / np.sqrt(var + 1e-5), rtol=1e-9)


def test_dropout_layer_is_the_identity_in_eval_and_checks_its_rate():
    dat = np.array([[1., 1., 1., 1.]], dtype=np.float32)
    y = C.input_variable(4)
    p = C.layers.Dense(1, activation=None, name="foo")(y)
    for layer in (C.layers.Dropout(0.75, name="bar"), C.layers.Dropout(keep_prob=0.25, name="bar")):
        np.testing.assert_allclose(layer(p).eval({y: dat}), [[np.sum(p.foo.W.value)]], rtol=1e-6)
    with pytest.raises(ValueError):
        C.layers.Dropout(keep_prob=-1.5, name="bar")(p)
    with pytest.raises(ValueError):
        C.layers.Dropout(1.5, name="bar")(p)


def test_stabilizer_starts_as_the_identity_and_learns_a_scale():
    y = C.input_variable(4, dtype=F64)
    stabilizer = C.layers.Stabilizer()
    p = stabilizer(y)
    dat = np.array([[1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_allclose(p.eval({y: dat}), dat, rtol=1e-6)
    s = stabilizer.s
    # d sum(beta x) / d s = sum(x) * sigmoid(4 s), beta = softplus(4 s) / 4
    np.testing.assert_allclose(p.grad({y: dat}, wrt=[s]), [dat.sum() / (1 + np.exp(-4 * s.value[0]))], rtol=1e-6)


def test_layer_normalization_layer_parameters_and_values():
    y = C.input_variable(4)
    p = C.layers.LayerNormalization(name="foo")(y)
    assert p.foo.bias.shape == y.shape and p.foo.scale.shape == y.shape
    dat = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    x = dat - dat.mean()
    std = np.sqrt(np.mean(x * x))
    out = p.eval({y: dat})
    # loom takes epsilon inside the root, sqrt(var + eps), as PyTorch; CNTK's layer divides by std + eps.
    np.testing.assert_allclose(out, x / np.sqrt(std ** 2 + 1e-5), rtol=1e-5)
    np.testing.assert_allclose(out, x / (std + 1e-5), atol=1e-5)


def test_default_options_reach_the_layers_made_inside():
    # CNTK's sequence_test builds its models inside default_options(initial_state=0.1).
    x = C.sequence.input_variable(2, dtype=F64)
    data = [np.array([[1., 2.], [3., 4.]])]
    with C.default_options(initial_state=0.1):
        summed = C.layers.Recurrence(C.plus)(x)
    np.testing.assert_allclose(summed.eval({x: data})[0], 0.1 + np.cumsum(data[0], axis=0))
    y = C.input_variable(3, dtype=F64)
    with C.layers.default_options(activation=C.relu, init=0.5, bias=False):
        dense = C.layers.Dense(2)
        with C.layers.default_options(activation=None):
            plain = C.layers.Dense(2)
        given = C.layers.Dense(2, activation=C.tanh)
    data3 = np.array([[1., -2., 0.5]])
    np.testing.assert_allclose(dense(y).eval({y: data3}), np.maximum(data3 @ np.full((3, 2), 0.5), 0))
    np.testing.assert_allclose(plain(y).eval({y: data3}), data3 @ np.full((3, 2), 0.5))
    np.testing.assert_allclose(given(y).eval({y: data3}), np.tanh(data3 @ np.full((3, 2), 0.5)))
    assert len(dense.parameters) == 1  # bias=False: W alone
    with C.default_options(enable_self_stabilization=True):
        with pytest.raises(C.UserError, match="enable_self_stabilization"):
            C.layers.LSTM(3)
