"""Errors: loom.UserError (a ValueError) and loom.DataError (an OSError) with loom's messages; bad
input of every kind raises, never crashes the interpreter."""

import os

import numpy as np
import pytest

import loom as C


def test_the_exception_classes():
    assert issubclass(C.UserError, ValueError)
    assert issubclass(C.DataError, C.UserError) and issubclass(C.DataError, OSError)
    assert issubclass(C.DataError, IOError)


def test_a_shape_mismatch_names_the_op_and_the_shapes():
    x = C.input_variable(3, name="x")
    with pytest.raises(C.UserError, match=r"times.*\[3\].*\[4, 2\]|times.*\[4, 2\].*\[3\]") as info:
        C.times(x, C.parameter((4, 2)))
    assert isinstance(info.value, ValueError)


def test_data_of_the_wrong_shape_names_the_input_its_shape_and_what_was_given():
    x = C.sequence.input_variable((2,), name="question")
    f = C.sequence.reduce_sum(x)
    with pytest.raises(C.UserError, match=r"eval: sequence input 'question' of sample shape \(2,\).*sequence 1.*"
                                          r"shape \(4, 3\) and dtype float32"):
        f.eval({x: [np.zeros((2, 2), np.float32), np.zeros((4, 3), np.float32)]})
    with pytest.raises(C.UserError, match=r"'question'.*an array of shape \(5,\)"):
        f.eval({x: np.zeros(5)})
    b = C.input_variable((2, 3), name="rows")
    with pytest.raises(C.UserError, match=r"input 'rows' of sample shape \(2, 3\).*\[N, 2, 3\].*shape \(4, 3, 2\)"):
        (b * 1).eval(np.zeros((4, 3, 2)))


def test_data_of_the_wrong_dtype_and_empty_sequences():
    x = C.sequence.input_variable(2, name="x")
    f = x * 1
    with pytest.raises(C.UserError, match=r"'x'.*float32 or float64.*complex128"):
        f.eval({x: [np.zeros((2, 2), np.complex128)]})
    with pytest.raises(C.UserError, match=r"'x'.*float32 or float64.*<U1"):
        f.eval({x: [np.array([["a", "b"]])]})
    with pytest.raises(C.UserError, match=r"sequence 0 is empty"):
        f.eval({x: [np.zeros((0, 2))]})
    with pytest.raises(C.UserError, match=r"at least one sequence"):
        f.eval({x: []})
    with pytest.raises(C.UserError, match=r"2\^24"):
        f.eval({x: [np.array([[1, 2**25]])]})


def test_missing_and_foreign_inputs():
    x = C.input_variable(1, name="x")
    y = C.input_variable(1, name="y")
    f = x + y
    with pytest.raises(C.UserError, match=r"no data for input 'y'"):
        f.eval({x: np.ones((1, 1))})
    with pytest.raises(C.UserError, match=r"not an input of this graph"):
        (x * 2).eval({x: np.ones((1, 1)), y: np.ones((1, 1))})
    with pytest.raises(C.UserError, match=r"one input; this one has 2"):
        f.eval(np.ones((1, 1)))
    with pytest.raises(C.UserError, match=r"keys of the data"):
        f.eval({"z": np.ones((1, 1)), y: np.ones((1, 1))})
    with pytest.raises(C.UserError, match=r"keys of the data"):
        f.eval({1: np.ones((1, 1)), y: np.ones((1, 1))})


def test_a_dangling_placeholder_is_an_error_not_a_crash():
    x = C.sequence.input_variable(1, name="x")
    p = C.placeholder((1,), name="p")
    h = x + C.past_value(p)
    with pytest.raises(C.UserError, match=r"placeholder"):
        h.eval({x: [np.ones((2, 1))]})
    q = C.placeholder()
    g = x + C.past_value(q)
    with pytest.raises(C.UserError):
        g.shape  # inferred only when the loop closes


def test_replace_placeholders_refuses_what_is_no_placeholder_or_a_wrong_shape():
    x = C.sequence.input_variable(2, name="x")
    p = C.placeholder((2,))
    h = x + C.past_value(p)
    with pytest.raises(C.UserError):
        h.replace_placeholders({x: h})
    with pytest.raises(C.UserError):
        h.replace_placeholders({p: C.reduce_sum(h)})
    with pytest.raises(TypeError):
        h.replace_placeholders([p, h])


def test_bad_arguments_to_makers():
    with pytest.raises(C.UserError, match=r"at least 1"):
        C.input_variable((2, 0))
    with pytest.raises(C.UserError, match=r"a shape is an int or a tuple"):
        C.input_variable("three")
    with pytest.raises(C.UserError, match=r"float32 or numpy.float64"):
        C.parameter((2,), dtype=np.int32)
    with pytest.raises(C.UserError, match=r"Value.one_hot: sequence 1 holds class indices from 0 to 3; got \[4\]"):
        C.Value.one_hot([[0, 1], [4]], 4)
    with pytest.raises(C.UserError, match=r"output_rank"):
        C.times(C.input_variable(3), C.parameter((3, 2)), output_rank=2)
    with pytest.raises(C.UserError, match=r"time_step"):
        C.past_value(C.sequence.input_variable(1), time_step=0)
    p = C.parameter((2, 2), init=0.0)
    with pytest.raises(C.UserError, match=r"shape is \[2, 2\].*\[3\]"):
        p.value = np.zeros(3)
    with pytest.raises(C.UserError, match=r"truth value"):
        bool(C.input_variable(1))


def test_an_id_out_of_range_is_an_error():
    ids = C.input_variable(1, name="ids")
    f = C.embedding(ids, C.parameter((4, 2)))
    with pytest.raises(C.UserError, match=r"embedding: id 7 .*0\.\.3"):
        f.eval(np.array([[7]]))


def test_model_files(tmp_path):
    x = C.input_variable(2, name="x")
    w = C.parameter((2, 2), init=C.glorot_uniform(), name="w")
    f = C.times(x, w)
    path = str(tmp_path / "m.loom")
    f.save(path)
    saved = w.value
    w.value = np.zeros((2, 2))
    f.restore(path)
    np.testing.assert_array_equal(w.value, saved)
    # Not a model file: a DataError (an OSError) naming the file.
    junk = tmp_path / "junk.loom"
    junk.write_bytes(os.urandom(200))
    with pytest.raises(C.DataError, match="junk.loom") as info:
        f.restore(str(junk))
    assert isinstance(info.value, OSError) and str(info.value)
    with pytest.raises(OSError, match="missing.loom"):
        f.restore(str(tmp_path / "missing.loom"))
    # Another graph's parameters: a UserError listing the names, nothing changed.
    other = C.times(x, C.parameter((2, 2), name="v"))
    with pytest.raises(C.UserError, match=r"'?v'?"):
        other.restore(path)
    # Unnamed parameters cannot be told apart in a file.
    with pytest.raises(C.UserError):
        C.times(x, C.parameter((2, 2))).save(str(tmp_path / "unnamed.loom"))
    assert not (tmp_path / "unnamed.loom").exists()
    with pytest.raises(NotImplementedError, match="restore"):
        C.load_model(path)


def test_values_that_are_not_numbers():
    with pytest.raises(C.UserError, match="constant: takes numbers"):
        C.constant("abc")
    with pytest.raises(C.UserError, match="takes numbers"):
        C.reduce_sum([[1.0, 2.0], [3.0]])  # ragged
    with pytest.raises(TypeError):  # no Variable can be made of it: the op's arguments do not fit
        C.exp([[1.0, 2.0], [3.0]])
    with pytest.raises(C.UserError, match="parameter: takes numbers"):
        C.parameter(init=[["a"]])
    with pytest.raises(TypeError):  # no Variable can be made of it: the op's arguments do not fit
        C.plus(C.input_variable(1), np.array(["x"]))
    p = C.parameter((2,), init=0.0, name="p")
    with pytest.raises(C.UserError, match="Parameter.value of .*'p'.*dtype <U1"):
        p.value = np.array(["a", "b"])
    with pytest.raises(C.UserError, match="Value.batch: takes float or integer numbers; got dtype object"):
        C.Value.batch(np.array([None, None]))
    x = C.sequence.input_variable(1, name="x")
    with pytest.raises(C.UserError, match="'x'.*dtype object"):
        (x * 1).eval({x: [np.array([[None]])]})
