// loom::layers under CNTK's names (C.layers): a Layer is a callable that owns its parameters, made
// at its first call; a Cell is an LSTM's, GRU's or RNN's step, run over a sequence by Recurrence,
// Fold or BiRecurrence.
#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

/// A Python callable (C.tanh, a lambda over ops) as a layer's activation; None: the identity.
/// It is called while a graph is built, with the GIL held.
layers::Activation activation_of(const py::object& f) {
    if (f.is_none()) return {};
    if (!PyCallable_Check(f.ptr()))
        throw UserError("an activation is a function of a Variable (C.tanh, C.relu, ...) or None; got " +
                        std::string(py::str(py::repr(f))));
    return [f](const Variable& x) {
        py::gil_scoped_acquire held;
        return f(x).cast<Variable>();
    };
}

}  // namespace

void bind_layers(py::module_& m) {
    py::module_ l =
        m.def_submodule("layers", "loom::layers: layer factories that own their parameters (CNTK's C.layers).");
    py::class_<layers::Layer> layer(l, "Layer", R"doc(A function of a Variable that owns its parameters.

Parameters whose shape depends on the input (Dense's input dimension, an LSTM's input projection)
are made at the first call, as CNTK infers them; calling the layer again reuses them (shared
weights). layer.parameters lists those made so far.)doc");
    layer
        .def(
            "__call__", [](const layers::Layer& self, const Variable& x) { return self(x); }, py::arg("x"))
        .def_property_readonly("parameters", &layers::Layer::parameters, "The parameters made so far.")
        .def_property_readonly("name", &layers::Layer::name, "The layer's name.")
        .def("__repr__", [](const layers::Layer& self) { return "<loom.layers.Layer " + self.name() + ">"; });
    layer.attr("__module__") = "loom.layers";
    py::class_<layers::Cell> cell(
        l, "Cell",
        R"doc(A recurrent step (LSTM, GRU, RNNStep): Recurrence, Fold or BiRecurrence runs it over a sequence.)doc");
    cell.def(
            "__call__",
            [](const layers::Cell& self, const py::args& args) -> py::object {
                if (args.size() != self.num_states() + 1)
                    throw UserError("the cell " + self.name() + " is called with its " +
                                    std::to_string(self.num_states()) + " state(s), then the input; got " +
                                    std::to_string(args.size()) + " argument(s)");
                std::vector<Variable> states;
                for (std::size_t k = 0; k + 1 < args.size(); ++k) states.push_back(args[k].cast<Variable>());
                const std::vector<Variable> next = self(states, args[args.size() - 1].cast<Variable>());
                if (next.size() == 1) return py::cast(next[0]);
                return py::tuple(py::cast(next));
            },
            R"doc(One step, as CNTK's cells: lstm(h, c, x) -> (h', c'), gru(h, x) -> h', rnn(h, x) -> h'.

Each state and the input is a Variable of one step (a placeholder's past_value inside a step
function given to Recurrence, say); the parameters are made at the first call (or by a Recurrence
over the cell) and shared by every call.)doc")
        .def_property_readonly("parameters", &layers::Cell::parameters, "The parameters made so far.")
        .def_property_readonly("name", &layers::Cell::name, "The cell's name.")
        .def("__repr__", [](const layers::Cell& self) { return "<loom.layers.Cell " + self.name() + ">"; });
    cell.attr("__module__") = "loom.layers";

    l.def(
        "_Dense",
        [](const std::vector<std::size_t>& shape, const py::object& activation, bool bias, const Initializer& init,
           const std::string& name) {
            return layers::Dense(Shape(shape), activation_of(activation), bias, init, name);
        },
        py::arg("shape"), py::arg("activation"), py::arg("bias"), py::arg("init"), py::arg("name"));
    l.def("_Embedding", &layers::Embedding, py::arg("dim"), py::arg("vocabulary"), py::arg("init"), py::arg("name"));
    l.def("_Sequential", &layers::Sequential, py::arg("layers"), py::arg("name"));
    l.def("_Dropout", &layers::Dropout, py::arg("rate"), py::arg("seed"), py::arg("name"));
    l.def("_LayerNormalization", &layers::LayerNormalization, py::arg("epsilon"), py::arg("name"));
    l.def("_LSTM", &layers::LSTM, py::arg("n"), py::arg("peepholes"), py::arg("init"), py::arg("name"));
    l.def("_GRU", &layers::GRU, py::arg("n"), py::arg("init"), py::arg("name"));
    l.def(
        "_RNNStep",
        [](std::size_t n, const py::object& activation, const Initializer& init, const std::string& name) {
            return layers::RNNStep(n, activation_of(activation), init, name);
        },
        py::arg("n"), py::arg("activation"), py::arg("init"), py::arg("name"));
    l.def("_Recurrence", &layers::Recurrence, py::arg("cell"), py::arg("go_backwards"), py::arg("initial_state"),
          py::arg("name"));
    l.def("_Fold", &layers::Fold, py::arg("cell"), py::arg("go_backwards"), py::arg("initial_state"), py::arg("name"));
    l.def("_BiRecurrence", &layers::BiRecurrence, py::arg("forward"), py::arg("backward"), py::arg("name"));

    m.def(
        "_to_precision",
        [](const std::vector<Parameter>& parameters, bool f64) {
            to_precision(parameters, f64 ? DType::f64 : DType::f32);
        },
        py::arg("parameters"), py::arg("f64"));
}

}  // namespace loom_python
