"""CNTK's tests of Variable, Constant, Parameter and Function (cntk/tests/variables_test.py,
function_test.py), paraphrased as a CNTK user's program calls loom."""

import numpy as np
import pytest

import loom as C


@pytest.mark.parametrize("make", [C.Constant, C.Parameter], ids=["Constant", "Parameter"])
def test_dtype_and_shape_of_constants_and_parameters(make):
    assert make(shape=(2, 3)).dtype == np.float32
    assert make(shape=(2, 3), dtype=np.float32).dtype == np.float32
    if make is C.Parameter:
        assert make(shape=(2, 3), dtype=np.float64).dtype == np.float64
    for shape in [(), 1, (1,), (1, 2, 3)]:
        expected = shape if isinstance(shape, tuple) else (shape,)
        assert make(shape=shape).shape == expected


def test_parameter_set_value():
    p = C.Parameter(shape=(2, 3), init=1)
    n = np.random.default_rng(0).standard_normal((2, 3))
    p.value = n
    np.testing.assert_array_equal(p.value, n.astype(p.dtype))
    n = np.arange(6).reshape(2, 3)
    p.value = n
    op = C.plus(p, p)
    state, output = op.forward({}, op.outputs, op.outputs)
    np.testing.assert_array_equal(output[op.output], 2 * n.astype(p.dtype))
    state.free()


@pytest.mark.parametrize("value", [[1], [[1], [2]], [[[1, 2], [3, 4], [5, 6]], [[1, 2], [3, 4], [5, 6]]]])
def test_constant_and_parameter_values(value):
    np.testing.assert_allclose(C.Constant(value=value).value, value)
    np.testing.assert_allclose(C.Parameter(init=value).value, value)
    np.testing.assert_allclose(C.constant(np.asarray(value)).value, value)


def test_placeholders_in_products():
    p1, p2 = C.placeholder(shape=(1, 2)), C.placeholder(shape=(2, 1))
    assert C.times(p1, p2).shape == (1, 1)
    assert C.times(C.placeholder(shape=(1, 2)), [[1], [2]]).shape == (1, 1)


def test_integer_and_double_data_give_float32_results():
    assert C.input_variable(1).dtype == np.float32
    result = (C.input_variable(1) + 2).eval([np.arange(1, dtype=np.int32)])
    assert result.dtype == np.float32 and result.tolist() == [[2.0]]


def test_double_data_computes_in_float64():
    # CNTK casts float64 data to the input's float32; loom has no input dtype and computes in float64
    # (python/README.md, "Where loom differs").
    result = (C.input_variable(1) + 2).eval([np.arange(1.0)])
    assert result.dtype == np.float64 and result.tolist() == [[2.0]]


def test_getitem_slices_static_axes():
    x = C.input_variable(5)
    y = x + 0
    data = np.array([[1, 2, 3, 4, 5]], np.float32)
    np.testing.assert_allclose(y[3].eval({x: data}), [[4]])
    np.testing.assert_allclose(y[2:4:1].eval({x: data}), [[3, 4]])
    np.testing.assert_allclose(y[2::].eval({x: data}), [[3, 4, 5]])
    np.testing.assert_allclose(y[:3].eval({x: data}), [[1, 2, 3]])
    with pytest.raises(ValueError):
        y[1:4:2]
    m = C.input_variable((2, 3))
    rows = np.array([[[1, 2, 3], [-4, 5, 6]]], np.float32)
    f = m + 0
    np.testing.assert_allclose(f[1, 2].eval({m: rows}), [[[6]]])
    np.testing.assert_allclose(f[0, 1:3].eval({m: rows}), [[[2, 3]]])
    g = f[1, 2].grad({m: rows}, wrt=[m])
    np.testing.assert_array_equal(g, [[[0, 0, 0], [0, 0, 1]]])


def test_a_loop_through_a_placeholder():
    state = C.placeholder(name="placeholder")
    previous = C.past_value(state, name="prev_state")
    z = C.abs(previous, "abs")
    z = z.replace_placeholders({state: z.output})
    assert z.name == "abs" and not z.placeholders


def test_one_array_is_one_sequence_and_last_takes_its_last_step():
    x = C.sequence.input_variable(shape=(2,))
    data = np.asarray([[1, 2], [2, 3]], np.float32)
    np.testing.assert_array_equal(C.sequence.last(x).eval({x: data}), [[2., 3.]])


# ops/tests/function_tests.py

def test_an_op_on_a_constant_keeps_its_shape():
    assert (C.constant(value=2, shape=(3, 4)) + 1).shape == (3, 4)


def test_eval_by_input_or_by_its_name():
    i = C.input_variable(shape=(1,), needs_gradient=True, name="i")
    res = i + 3
    for key in (i, "i", u"i"):
        np.testing.assert_array_equal(res.eval({key: [[3]]}), [[6]])


def test_replace_placeholders_by_an_input_and_by_a_constant():
    p = C.placeholder(shape=(1,))
    i = C.input_variable(shape=(1,), name="i")
    res = p + 3
    res.replace_placeholders({p: i})
    np.testing.assert_array_equal(res.eval({i: [[3]]}), [[6]])
    c = C.constant([[10, 2]])
    op = C.times(C.placeholder(shape=(1, 2)), [[2], [3]])
    op.replace_placeholders({op.placeholders[0]: c})
    np.testing.assert_array_equal(op.eval(), [[26]])
    op = C.times(C.placeholder(shape=(1, 2)), [[2], [3]])
    op.replace_placeholder(c)
    np.testing.assert_array_equal(op.eval(), [[26]])


def test_data_without_names_for_two_inputs_is_refused():
    root = C.plus(C.input_variable((1, 2), name="i1"), C.input_variable((2, 1), name="i2"))
    with pytest.raises(ValueError):
        root.eval([[[[1, 2]]], [[[[1], [2]]]]])


def test_forward_of_an_intermediate_node():
    x, y = C.input_variable((2,)), C.input_variable((2,))
    x0, y0 = np.array([[2., 1.]], np.float32), np.array([[4., 6.]], np.float32)
    sum_node = x + 2
    times_node = sum_node * y
    _, values = times_node.forward({x: x0, y: y0}, sum_node.outputs)
    assert len(values) == 1
    np.testing.assert_allclose(list(values.values())[0], x0 + 2)
    _, values = times_node.forward({x: x0, y: y0}, times_node.outputs + sum_node.outputs)
    assert len(values) == 2
    np.testing.assert_allclose(values[times_node], (x0 + 2) * y0)
    np.testing.assert_allclose(values[sum_node], x0 + 2)


def test_evaluating_several_outputs_of_a_combine():
    a = C.input_variable(shape=(1,), name="a")
    a_plus_1 = a + 1
    out1 = ((a_plus_1 + 2) - 1) + 1
    out2 = ((a_plus_1 + 4) - 1) + 2
    res = C.combine([out1, out2]).eval({a: np.array([[1]], np.float32)})
    np.testing.assert_array_equal(res[out1.output], [[4.]])
    np.testing.assert_array_equal(res[out2.output], [[7.]])
    named = C.plus(C.times(C.input_variable(1), C.parameter((1, 2))), C.parameter(2), name="t_plus_b")
    assert [o.name for o in C.combine([named, named]).outputs] == ["t_plus_b", "t_plus_b"]


def test_a_loop_infers_the_shape_of_its_placeholder():
    i = C.sequence.input_variable((2,))
    p = C.placeholder()
    past_plus_i = C.past_value(p) + i
    past_plus_i.replace_placeholder(past_plus_i.output)
    assert past_plus_i.output.shape == (2,)


def test_broadcast_between_sequences_of_different_axes_is_refused():
    # CNTK refuses at eval, when the lengths differ; loom refuses when the graph is built, since each
    # sequence input has an axis of its own.
    x = C.sequence.input_variable((1,), name="x")
    ones = C.sequence.input_variable((1,), name="ones")
    with pytest.raises(ValueError):
        C.sequence.broadcast_as(C.sequence.last(ones), x) + x + ones


def test_find_by_name_reaches_named_intermediate_values():
    x = C.input_variable(2, name="x", dtype=np.float64)
    hidden = C.layers.Label("hidden")(x * 2)
    z = C.tanh(hidden, name="z")
    assert z.find_by_name("hidden") == hidden
    assert z.find_by_name("x") == x
    assert z.find_by_name("nothing") is None
    data = np.array([[0.1, -0.3]])
    np.testing.assert_allclose(z.find_by_name("hidden").eval({x: data}), 2 * data)
    twice = C.layers.Label("hidden")(z)
    assert len(twice.find_all_with_name("hidden")) == 2
    with pytest.raises(C.UserError, match="find_all_with_name"):
        twice.find_by_name("hidden")
