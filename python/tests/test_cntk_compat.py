"""CNTK's names that loom composes or accepts: activations and shape ops built from loom's ops
(values against numpy, gradients by central differences in float64), the named axes, reshape's -1,
eval's device and as_numpy, and Sequential over functions with For, Label, Delay and identity."""

import numpy as np
import pytest

import loom as C
from support import assert_close, numeric_gradient, total

SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)

# name, loom's op on x, numpy's formula (away from the kinks, which the data avoids).
ELEMENTWISE = [
    ("leaky_relu", lambda x: C.leaky_relu(x), lambda a: np.where(a > 0, a, 0.01 * a)),
    ("leaky_relu 0.2", lambda x: C.leaky_relu(x, alpha=0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    ("elu", lambda x: C.elu(x, alpha=0.5), lambda a: np.where(a > 0, a, 0.5 * (np.exp(a) - 1))),
    ("selu", lambda x: C.selu(x), lambda a: SELU[0] * np.where(a > 0, a, SELU[1] * (np.exp(a) - 1))),
    ("softsign", lambda x: C.softsign(x), lambda a: a / (1 + np.abs(a))),
    ("softsign steep", lambda x: C.softsign(x, steepness=3), lambda a: a / (1 + np.abs(3 * a))),
    ("tan", lambda x: C.tan(x), np.tan),
    ("sinh", lambda x: C.sinh(x), np.sinh),
    ("cosh", lambda x: C.cosh(x), np.cosh),
]


def _data(shape=(4, 3)):
    a = np.random.default_rng(7).uniform(-1.4, 1.4, size=shape)
    a[np.abs(a) < 0.05] = 0.3  # away from the kinks at 0
    return a


@pytest.mark.parametrize("name, op, reference", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_composed_activation_value_and_gradient(name, op, reference):
    x = C.input_variable(3, dtype=np.float64)
    a = _data()
    y = op(x)
    assert_close(y.eval({x: a}), reference(a), rtol=1e-12, atol=1e-14)
    weighted = y * C.constant(np.array([0.5, -1.0, 2.0]))
    assert_close(weighted.grad({x: a}, wrt=[x]), numeric_gradient(lambda: total(weighted.eval({x: a})), a),
                 rtol=1e-6, atol=1e-9)


def test_composed_activations_on_a_ragged_batch_keep_padding_out():
    x = C.sequence.input_variable(2, dtype=np.float64)
    seqs = [_data((3, 2)), _data((1, 2))]
    out = C.elu(x).eval({x: seqs})
    assert [o.shape for o in out] == [(3, 2), (1, 2)]
    assert all(np.isfinite(o).all() for o in out)
    # A large positive input: the unchosen exp branch must not overflow into a nan gradient.
    big = np.array([[100.0, -3.0]])
    y = C.input_variable(2, dtype=np.float64)
    grad = C.selu(y).grad({y: big}, wrt=[y])
    assert_close(grad, [[SELU[0], SELU[0] * SELU[1] * np.exp(-3.0)]], rtol=1e-12)


def test_param_relu_learns_its_slope_parameter():
    x = C.input_variable(3, dtype=np.float64)
    alpha = C.parameter((3,), init=0.25, dtype=np.float64)
    a = _data()
    y = C.param_relu(alpha, x)
    assert_close(y.eval({x: a}), np.where(a > 0, a, 0.25 * a), rtol=1e-12)
    assert_close(y.grad({x: a}, wrt=[alpha]), np.where(a > 0, 0, a).sum(0), rtol=1e-12)


def test_shape_ops_and_norms():
    x = C.input_variable((1, 3, 1), dtype=np.float64)
    a = np.random.default_rng(2).normal(size=(2, 1, 3, 1))
    assert C.squeeze(x).shape == (3,)
    assert_close(C.squeeze(x).eval({x: a}), a.reshape(2, 3))
    assert C.squeeze(x, axes=[0]).shape == (3, 1)
    with pytest.raises(C.UserError, match="squeeze: axis 1 of shape \\(1, 3, 1\\) is not of size 1"):
        C.squeeze(x, axes=[1])
    v = C.input_variable(3, dtype=np.float64)
    assert C.expand_dims(v, 0).shape == (1, 3) and C.expand_dims(v, -1).shape == (3, 1)
    m = C.input_variable((2, 3), dtype=np.float64)
    b = np.random.default_rng(3).normal(size=(4, 2, 3))
    assert_close(C.swapaxes(m).eval({m: b}), b.transpose(0, 2, 1))
    assert_close(C.reduce_l2(m, axis=1).eval({m: b}), np.sqrt((b ** 2).sum(2, keepdims=True)), rtol=1e-12)
    assert_close(C.reduce_l1(m).eval({m: b}), np.abs(b).sum((1, 2)).reshape(4, 1, 1), rtol=1e-12)
    assert_close(C.reduce_sum_square(m, axis=0, keepdims=False).eval({m: b}), (b ** 2).sum(1), rtol=1e-12)
    assert_close(C.reshape(m, (-1,)).eval({m: b}), b.reshape(4, 6))
    assert C.reshape(m, (3, -1)).shape == (3, 2)
    with pytest.raises(C.UserError, match="reshape: a sample of shape \\(2, 3\\) \\(6 elements\\) cannot take"):
        C.reshape(m, (4, -1))


def test_named_axes():
    seq = C.input_variable(2, dynamic_axes=[C.Axis.default_batch_axis(), C.Axis.default_dynamic_axis()])
    out = C.sequence.reduce_sum(seq).eval({seq: [np.ones((3, 2), np.float32), np.ones((1, 2), np.float32)]})
    assert_close(out, [[3, 3], [1, 1]])
    batch = C.input_variable(2, dynamic_axes=[C.Axis.default_batch_axis()])
    assert_close(C.reduce_sum(batch, axis=C.Axis.all_static_axes()).eval(np.ones((2, 2), np.float32)), [[2], [2]])
    with pytest.raises(C.UserError, match="input_variable: dynamic_axes is \\[\\]"):
        C.input_variable(2, dynamic_axes=[C.Axis.default_dynamic_axis()])
    # Every axis, the batch's too: one number.
    assert_close(C.reduce_sum(batch, axis=C.Axis.all_axes()).eval(np.ones((2, 2), np.float32)), [4])


def test_eval_and_grad_take_device_and_as_numpy():
    x = C.input_variable(2)
    y = C.square(x)
    a = np.array([[1.0, 2.0]], np.float32)
    assert_close(y.eval({x: a}, device=None), [[1, 4]])
    value = y.eval({x: a}, as_numpy=False)
    assert isinstance(value, C.Value)
    assert isinstance(y.grad({x: a}, wrt=[x], as_numpy=False), C.Value)
    assert_close(y.grad({x: a}, wrt=[x], device="cpu"), [[2, 4]])


def test_sequential_of_layers_and_functions_for_label_delay_identity():
    C.set_seed(3)
    x = C.sequence.input_variable(2, dtype=np.float64)
    dense = C.layers.Dense(3, name="d")
    stack = C.layers.For(range(2), lambda i: C.layers.Dense(2, name=f"s{i}"))
    model = C.layers.Sequential([dense, C.relu, C.layers.Label("hidden"), C.layers.Delay(1), C.layers.identity,
                                 stack])
    y = model(x)
    assert isinstance(model, C.layers.PythonSequential)
    assert [p.name for p in model.parameters] == ["d.W", "d.b", "s0.W", "s0.b", "s1.W", "s1.b"]
    p = {q.name: q.value for q in model.parameters}
    seqs = [np.random.default_rng(5).normal(size=(n, 2)) for n in (3, 1)]
    expected = []
    for s in seqs:
        h = np.maximum(s @ p["d.W"] + p["d.b"], 0)
        h = np.vstack([np.zeros((1, 3)), h[:-1]])  # the step before, 0 at the first
        expected.append((h @ p["s0.W"] + p["s0.b"]) @ p["s1.W"] + p["s1.b"])
    assert_close(y.eval({x: seqs}), expected, rtol=1e-12)
    ahead = C.layers.Delay(-1, initial_state=5)(x).eval({x: seqs})
    assert_close(ahead[0], np.vstack([seqs[0][1:], [[5, 5]]]))
    assert isinstance(C.layers.Sequential([C.layers.Dense(2), C.layers.Dense(1)]), C.layers.Layer)
    with pytest.raises(C.UserError, match="Sequential: takes loom layers and functions"):
        C.layers.Sequential([3])


class _Csr:
    """What eval reads of a scipy.sparse matrix (scipy is not a dependency): nnz and toarray()."""

    def __init__(self, dense):
        self.dense = np.asarray(dense, dtype=np.float32)
        self.nnz = int(np.count_nonzero(self.dense))

    def toarray(self):
        return self.dense


def test_sparse_inputs_take_one_hot_data_as_dense():
    # CNTK's one-hot inputs: is_sparse=True, data from Value.one_hot or scipy.sparse matrices (one
    # per sequence); loom stores them dense, so an embedding by times gives the table's rows.
    vocab, dim = 5, 3
    x = C.sequence.input_variable(vocab, is_sparse=True)
    table = np.arange(vocab * dim, dtype=np.float32).reshape(vocab, dim) / 10
    e = C.times(x, C.constant(table))
    ids = [[4, 0, 2], [1]]
    data = C.Value.one_hot(ids, vocab)
    assert [d.shape for d in data] == [(3, vocab), (1, vocab)]
    assert data[0][0].tolist() == [0, 0, 0, 0, 1] and data[0].sum() == 3
    out = e.eval({x: data})
    for got, seq in zip(out, ids):
        assert_close(got, table[seq], 1e-6)
    out = e.eval({x: [_Csr(d) for d in data]})
    for got, seq in zip(out, ids):
        assert_close(got, table[seq], 1e-6)
    # A batch input: one-hot rows of plain indices, and one sparse matrix for the batch.
    b = C.input_variable(vocab, is_sparse=True)
    rows = C.Value.one_hot([3, 0], vocab)
    assert rows.shape == (2, vocab)
    assert_close(C.times(b, C.constant(table)).eval({b: _Csr(rows)}), table[[3, 0]], 1e-6)
