// The extension module loom._loom: the package loom (python/loom/) re-exports it under CNTK's names.
#include "bindings.hpp"

PYBIND11_MODULE(_loom, m) {
    m.doc() = "loom's C++ engine, bound for Python; import the package `loom`, which re-exports it.";
    m.attr("__version__") = std::string(loom::version());
    loom_python::bind_errors(m);
    loom_python::bind_graph(m);
    loom_python::bind_ops(m);
    loom_python::bind_run(m);
    loom_python::bind_layers(m);
    loom_python::bind_training(m);
    loom_python::bind_transformer_models(m);
    loom_python::bind_engine(m);
    loom_python::bind_qa(m);
}
