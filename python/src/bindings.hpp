#pragma once
// The extension's parts: each binds one piece of loom.hpp under CNTK's Python names. Names and
// conversions only: what a Python user needs that the library lacks belongs in the library.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include <loom.hpp>

namespace loom_python {

namespace py = pybind11;

/// The Python exception classes loom's errors become: loom.UserError (a ValueError) and
/// loom.DataError (a UserError and an OSError); the translator is registered by bind_errors.
void bind_errors(py::module_& m);
/// Variable (CNTK's Function and Variable in one), Parameter, SequenceAxis, Initializer and the
/// makers of leaves: input_variable, parameter, constant, placeholder.
void bind_graph(py::module_& m);
/// The ops of graph/ops.hpp, with CNTK's argument names.
void bind_ops(py::module_& m);
/// Running a graph from Python: eval, grad, save and restore (numpy in, numpy out).
void bind_run(py::module_& m);
/// loom::layers under CNTK's names (the submodule layers): Layer, Cell and their factories.
void bind_layers(py::module_& m);
/// loom's training/ under CNTK's names: learners and rates, Trainer, fit, ProgressPrinter (the
/// package's learners.py, train.py and logging.py give CNTK's signatures).
void bind_training(py::module_& m);
/// The Transformer models, attention, generation (C.layers) and safetensors (C's top level):
/// python/src/models.cpp; after bind_layers, whose submodule it adds to.
void bind_transformer_models(py::module_& m);
/// The engine's process-wide settings: threads and the precision of float products
/// (python/src/engine.cpp).
void bind_engine(py::module_& m);
/// QA and text tools (loom.qa, loom.text), the Batcher (loom.io), the batch-axis ops (loom.batch)
/// and ParameterAverage: what the QA sample's recipe needs (python/src/qa.cpp).
void bind_qa(py::module_& m);

/// `obj` as a C-contiguous array of T, numbers converted (a list, an array, a number); a UserError
/// starting with `what` when it holds no numbers.
template <class T>
py::array_t<T, py::array::c_style | py::array::forcecast> numbers_of(py::handle obj, const std::string& what) {
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (!a)
        throw loom::UserError(what + ": takes numbers (an array, a list or a number); got " +
                              std::string(py::str(py::repr(obj))).substr(0, 100));
    return a;
}

/// A shape as a Python tuple.
py::tuple shape_tuple(const loom::Shape& shape);
/// A Variable as Python sees it: a Parameter's node as a loom.Parameter, anything else as a Variable.
py::object wrap(const loom::Variable& v);

/// The data given for `input` (a numpy array, a list of them, or a loom.Value) as a Value, checked
/// against the input's shape and dynamic axes before anything runs: a UserError starting with
/// `caller` names the input, its shape and what was given.
loom::Value to_value(const loom::Variable& input, py::handle data, const char* caller);
/// The data of `arguments` (a dict by Variable or by name, or the data of the one argument) as
/// Bindings for the inputs of `outputs`, every one given and no other key, each checked and converted
/// before anything runs (a UserError starting with `caller`). Keys that are inputs of `called` (the
/// Function a method was called on, when the outputs are part of it) are accepted and skipped when
/// the outputs do not need them, as CNTK's.
loom::Bindings bindings_of(const std::vector<loom::Variable>& outputs, const py::object& arguments, const char* caller,
                           const std::vector<loom::Variable>& called = {});
/// A Value as numpy, sharing its storage (no copy): a static tensor as one array, a batch as one
/// array [N, sample...], sequences as a list of arrays [T_i, sample...] (strided views into one
/// padded time-major buffer, which the arrays keep alive).
py::object to_numpy(loom::Value value);

/// Called with the GIL released, from inside a long call: takes the GIL, runs Python's signal
/// handlers and throws what they raise (KeyboardInterrupt on Ctrl-C) as py::error_already_set.
void raise_pending_signals();

}  // namespace loom_python
