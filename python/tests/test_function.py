"""The Function surface: properties, repr, eval's forms, docstrings on every public name."""

import inspect

import numpy as np
import pytest

import loom as C
from support import assert_close


def test_properties_of_a_graph():
    x = C.sequence.input_variable((2,), name="x")
    y = C.input_variable(1, name="y")
    w = C.parameter((2, 1), init=0.5, name="w")
    f = C.sequence.reduce_sum(C.times(x, w, name="zx") * 3.0, name="f") + y
    assert f.output == f and f.outputs == (f,)
    assert [v.name for v in f.arguments] == ["x", "y"]
    assert [p.name for p in f.parameters] == ["w"] and isinstance(f.parameters[0], C.Parameter)
    assert [type(v) for v in f.inputs][:3] == [C.Variable, C.Variable, C.Parameter]
    assert len(f.constants) == 1 and f.constants[0].is_constant and f.placeholders == []
    assert f.shape == (1,) and x.shape == (2,) and w.shape == (2, 1)
    assert x.is_input and x.is_sequence and not y.is_sequence and y.has_batch_axis
    assert w.is_parameter and not w.has_batch_axis and f.is_output
    assert C.Function is C.Variable
    assert "'zx'" in repr(C.times(x, w, name="zx")) and "shape (1,)" in repr(f) and "sequence" in repr(x)
    assert repr(w).startswith("<loom.Parameter")


def test_eval_forms():
    x = C.input_variable(2, name="x")
    f = x * 2
    g = x + 1
    a = np.array([[1.0, 2.0]], np.float32)
    assert_close(f.eval(a), 2 * a)
    assert_close(f.eval({x: a}), 2 * a)
    both = f.eval({x: a}, outputs=[f, g])
    assert set(both) == {f, g}
    assert_close(both[g], a + 1)
    # A graph of no input, as CNTK's doctests write it.
    assert_close(C.softmax([[1, 1, 2, 3]]).eval(), np.exp([[1, 1, 2, 3]]) / np.exp([[1, 1, 2, 3]]).sum(), rtol=1e-6)
    w = C.parameter(init=np.array([1.0, -2.0]))
    assert_close((w * 3).eval(), [3.0, -6.0])
    # Results are numpy arrays of the run's dtype; float64 data runs in float64.
    assert f.eval(a.astype(np.float64)).dtype == np.float64
    assert_close(f.eval(C.Value.batch(a)), 2 * a)


def test_grad_forms_and_errors():
    x = C.input_variable(2, name="x")
    w = C.parameter((2, 2), init=1.0, name="w")
    f = C.times(x, w)
    a = np.array([[1.0, 2.0]])
    assert_close(f.grad(a), [[2.0, 2.0]])  # wrt every input by default
    with pytest.raises(C.UserError):
        f.grad(a, wrt=[C.parameter((1,), name="elsewhere")])
    with pytest.raises(C.UserError, match="wrt holds Variables"):
        f.grad(a, wrt=["w"])


def test_an_exception_in_a_python_activation_comes_back_as_it_was():
    def broken(v):
        raise ZeroDivisionError("from the activation")

    layer = C.layers.Dense(2, activation=broken)
    with pytest.raises(ZeroDivisionError, match="from the activation"):
        layer(C.input_variable(3))


def test_every_public_name_has_a_docstring():
    missing = []
    for module in (C, C.sequence, C.layers):
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.getdoc(obj) or "").strip():
                missing.append(f"{module.__name__}.{name}")
    for name, member in inspect.getmembers(C.Variable):
        if not name.startswith("_") and not (inspect.getdoc(member) or "").strip():
            missing.append(f"Variable.{name}")
    assert missing == []


def test_the_version_is_the_library_s():
    assert C.__version__ == C._loom.__version__
