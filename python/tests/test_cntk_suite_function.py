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
    for shape in [1, (1,), (1, 2, 3)]:
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
