"""Ragged batches of sequences: sequence ops against numpy per sequence, gradients by central
differences, NaN in the padding that must not leak, loops closed by replace_placeholders."""

import numpy as np
import pytest

import loom as C
from support import assert_close, numeric_gradient, rng, total

LENGTHS = [3, 1, 4]


def ragged(dim=2, seed=0, lengths=LENGTHS, positive=False):
    r = rng(seed)
    seqs = [r.normal(size=(n, dim)) for n in lengths]
    return [np.abs(s) + 0.1 for s in seqs] if positive else seqs


def _softmax_over_time(s):
    e = np.exp(s - s.max(axis=0))
    return e / e.sum(axis=0)


# name, op on a sequence input x of sample (2,), numpy reference on one sequence s [T, 2]
SEQUENCE_OPS = [
    ("reduce_sum", C.sequence.reduce_sum, lambda s: s.sum(axis=0)),
    ("reduce_max", C.sequence.reduce_max, lambda s: s.max(axis=0)),
    ("reduce_mean", C.sequence.reduce_mean, lambda s: s.mean(axis=0)),
    ("first", C.sequence.first, lambda s: s[0]),
    ("last", C.sequence.last, lambda s: s[-1]),
    ("softmax", C.sequence.softmax, _softmax_over_time),
    ("is_first", lambda x: C.sequence.is_first(x) * x, lambda s: np.eye(len(s))[0][:, None] * s),
    ("is_last", lambda x: C.sequence.is_last(x) * x, lambda s: np.eye(len(s))[-1][:, None] * s),
    ("slice", lambda x: C.sequence.slice(x, 0, 1), lambda s: s[0:1]),
    ("slice from the end", lambda x: C.sequence.slice(x, -1, 0), lambda s: s[-1:]),
    ("broadcast_as", lambda x: C.sequence.broadcast_as(C.sequence.last(x), x) * x, lambda s: s[-1] * s),
    ("past_value", C.past_value, lambda s: np.vstack([np.zeros((1, 2)), s[:-1]])),
    ("past_value 2 steps, initial 0.5", lambda x: C.past_value(x, initial_state=0.5, time_step=2),
     lambda s: np.vstack([np.full((2, 2), 0.5), s[:-2]])[: len(s)]),
    ("future_value", C.future_value, lambda s: np.vstack([s[1:], np.zeros((1, 2))])),
    ("sequence.past_value", lambda x: C.sequence.past_value(x, initial_state=np.array([1.0, -1.0])),
     lambda s: np.vstack([[1.0, -1.0], s[:-1]])),
]


@pytest.mark.parametrize("name,op,reference", SEQUENCE_OPS, ids=[s[0] for s in SEQUENCE_OPS])
def test_sequence_op_value_and_gradient_on_a_ragged_batch(name, op, reference):
    x = C.sequence.input_variable(2, name="x")
    f = op(x)
    seqs = ragged(seed=11)
    got = f.eval({x: seqs})
    expected = [reference(s) for s in seqs]
    if f.is_sequence:
        assert [len(g) for g in got] == [len(e) for e in expected]
        assert_close(got, expected, rtol=1e-9, atol=1e-12)
    else:
        assert_close(got, np.stack(expected), rtol=1e-9, atol=1e-12)
    weights = C.constant(rng(12).uniform(0.5, 1.5, size=f.shape))
    g = f * weights
    analytic = g.grad({x: seqs}, wrt=[x])
    assert isinstance(analytic, list) and [len(a) for a in analytic] == LENGTHS
    for i, s in enumerate(seqs):
        assert_close(analytic[i], numeric_gradient(lambda: total(g.eval({x: seqs})), s), rtol=1e-5, atol=1e-7)


def test_gather_where_and_scatter():
    x = C.sequence.input_variable(1, name="x")
    seqs = [np.array([[1.0], [-2.0], [3.0]]), np.array([[4.0], [5.0]])]
    keep = C.greater(x, 0)
    assert_close(C.sequence.gather(x, keep).eval({x: seqs}), [np.array([[1.0], [3.0]]), np.array([[4.0], [5.0]])])
    assert_close(C.sequence.where(keep).eval({x: seqs}), [np.array([[0.0], [2.0]]), np.array([[0.0], [1.0]])])
    back = C.sequence.scatter(C.sequence.gather(x, keep), keep)
    assert_close(back.eval({x: seqs}), [np.array([[1.0], [0.0], [3.0]]), np.array([[4.0], [5.0]])])


def test_unpack_gives_padded_data_and_mask():
    x = C.sequence.input_variable(2)
    data, mask = C.sequence.unpack(x, padding_value=-7.0)
    seqs = ragged(seed=13, lengths=[2, 3])
    d = data.eval({x: seqs})
    assert d.shape == (2, 3, 2)
    assert_close(d[0, :2], seqs[0])
    assert_close(d[0, 2], [-7.0, -7.0])
    assert_close(mask.eval({x: seqs}), [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])


def test_nan_in_the_padding_does_not_leak():
    x = C.sequence.input_variable(2, name="x")
    f = C.sequence.reduce_sum(C.log(x) * C.sequence.softmax(x)) + C.sequence.reduce_max(x)
    seqs = ragged(seed=14, positive=True)
    padded = np.full((len(seqs), max(LENGTHS), 2), np.nan)
    for n, s in enumerate(seqs):
        padded[n, : len(s)] = s
    expected = np.stack([(np.log(s) * _softmax_over_time(s)).sum(0) + s.max(0) for s in seqs])
    from_list = f.eval({x: seqs})
    from_padded = f.eval({x: C.Value.item_major_sequences(padded, LENGTHS)})
    assert np.all(np.isfinite(from_padded))
    assert_close(from_list, expected, rtol=1e-9)
    assert_close(from_padded, expected, rtol=1e-9)
    # Gradients for the input come back per sequence: its real steps only, finite.
    g = f.grad({x: C.Value.item_major_sequences(padded, LENGTHS)}, wrt=[x])
    assert [len(a) for a in g] == LENGTHS and all(np.all(np.isfinite(a)) for a in g)


def test_a_loop_closed_by_replace_placeholders_is_a_running_sum():
    x = C.sequence.input_variable(2, name="x")
    p = C.placeholder((2,))
    h = x + C.past_value(p)
    closed = h.replace_placeholders({p: h.output})
    assert closed == h and closed.placeholders == []
    seqs = ragged(seed=15)
    assert_close(h.eval({x: seqs}), [np.cumsum(s, axis=0) for s in seqs], rtol=1e-9)


def test_a_loop_through_a_placeholder_of_inferred_shape_with_a_parameter():
    x = C.sequence.input_variable(3, name="x")
    w = C.parameter((3, 3), init=C.glorot_uniform(), dtype=np.float64, name="w")
    p = C.placeholder()
    h = C.tanh(x + C.times(C.past_value(p), w))
    h.replace_placeholders({p: h})
    assert h.shape == (3,)
    seqs = ragged(dim=3, seed=16)
    wv = w.value

    def reference(s):
        out, prev = [], np.zeros(3)
        for row in s:
            prev = np.tanh(row + prev @ wv)
            out.append(prev)
        return np.array(out)

    assert_close(h.eval({x: seqs}), [reference(s) for s in seqs], rtol=1e-9)
    from support import parameter_numeric_gradient
    assert_close(h.grad({x: seqs}, wrt=[w]), parameter_numeric_gradient(h, {x: seqs}, w), rtol=1e-5, atol=1e-8)


def test_one_array_of_equal_length_sequences_and_ids_without_the_trailing_one():
    x = C.sequence.input_variable(1, name="ids")
    table = C.parameter(init=np.arange(10.0).reshape(5, 2), name="table")
    f = C.sequence.reduce_sum(C.embedding(x, table))
    got = f.eval({x: [np.array([1, 4]), np.array([0])]})
    assert_close(got, np.array([[10.0, 12.0], [0.0, 1.0]]))
    assert_close(f.eval({x: np.array([[1, 4], [0, 0]])}), np.array([[10.0, 12.0], [2.0 * 0 + 0, 2.0]]))


def test_sequence_outputs_are_views_of_one_buffer():
    x = C.sequence.input_variable(2)
    out = (x * 2).eval({x: ragged(seed=17)})
    assert all(o.base is not None for o in out)
    assert out[0].base is out[1].base
