// Variable (CNTK's Function and Variable: in loom every op's result is a Variable that is its own
// output), Parameter, SequenceAxis, Initializer, and the makers of a graph's leaves.
#include <sstream>

#include "bindings.hpp"

namespace loom_python {

using namespace loom;

py::tuple shape_tuple(const Shape& shape) {
    py::tuple t(shape.rank());
    for (std::size_t i = 0; i < shape.rank(); ++i) t[i] = py::int_(shape[i]);
    return t;
}

py::object wrap(const Variable& v) {
    if (v.node() && v.is_parameter()) return py::cast(Parameter(v.node()));
    return py::cast(v);
}

namespace {

py::list wrap_all(const std::vector<Variable>& vs) {
    py::list out;
    for (const Variable& v : vs) out.append(wrap(v));
    return out;
}

std::vector<Variable> leaves_of_kind(const Variable& v, NodeKind kind) {
    std::vector<Variable> out;
    for (const Variable& leaf : leaves_of({v}))
        if (leaf.node()->kind == kind) out.push_back(leaf);
    return out;
}

NodeKind kind_of(const Variable& v) {
    if (!v.node()) throw UserError("this Variable is empty (it handles no node)");
    return v.node()->kind;
}

std::string axes_text(const Axis& axis) {
    switch (axis.kind) {
        case Axis::Kind::None:
            return "static";
        case Axis::Kind::Batch:
            return "batch";
        case Axis::Kind::Sequence:
            return "sequence";
        case Axis::Kind::Any:
            return "any axis";
    }
    return "?";
}

std::string repr(const Variable& v) {
    if (!v.node()) return "<loom.Variable: empty>";
    std::ostringstream out;
    out << "<loom." << (v.is_parameter() ? "Parameter " : "Variable ") << v.label();
    if (v.node()->type.shape_known) {
        out << ": shape " << std::string(py::repr(shape_tuple(v.node()->type.shape)));
    } else {
        out << ": shape inferred when its loop closes";
    }
    out << ", " << axes_text(v.node()->type.axis) << ">";
    return out.str();
}

/// `value` (a number, a numpy array, a list) as a constant's double tensor.
xt::xarray<double> doubles_of(py::handle value) {
    auto a = numbers_of<double>(value, "a constant's or parameter's value");
    std::vector<std::size_t> shape(a.shape(), a.shape() + a.ndim());
    xt::xarray<double> out = xt::zeros<double>(shape);
    std::copy_n(a.data(), a.size(), out.data());
    return out;
}

Variable constant_of(py::handle value, const std::string& name) {
    xt::xarray<double> v = doubles_of(value);
    if (v.dimension() == 0) return constant(v(), name);
    return constant(v, name);
}

/// The parameter's value as numpy: a copy in the parameter's own dtype.
py::array parameter_value(const Parameter& p) {
    return visit_dtype(p.dtype(), [&](auto zero) -> py::array {
        using T = decltype(zero);
        const xt::xarray<T> v = p.value<T>();
        py::array_t<T> out(std::vector<py::ssize_t>(v.shape().begin(), v.shape().end()));
        std::copy_n(v.data(), v.size(), out.mutable_data());
        return out;
    });
}

void set_parameter_value(const Parameter& p, py::handle value) {
    const py::array a = py::module_::import("numpy").attr("asarray")(value);
    std::vector<std::size_t> shape(a.shape(), a.shape() + a.ndim());
    if (Shape(shape) != p.shape())
        throw UserError("Parameter.value of " + p.label() + ": the parameter's shape is " + p.shape().str() +
                        ", the value given has shape " + Shape(shape).str());
    const char kind = a.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u')
        throw UserError("Parameter.value of " + p.label() + ": takes float or integer numbers, got dtype " +
                        std::string(py::str(py::object(a.dtype()))));
    if (p.dtype() == DType::f64) {
        xt::xarray<double> v = doubles_of(a);
        p.set_value(v);
    } else {
        auto f = numbers_of<float>(a, "Parameter.value of " + p.label());
        xt::xarray<float> v = xt::zeros<float>(shape);
        std::copy_n(f.data(), f.size(), v.data());
        p.set_value(v);
    }
}

/// The initializer `init` made to draw from its own generator seeded with `seed`, not global_rng().
Initializer seeded(Initializer init, std::uint64_t seed) {
    return [init = std::move(init), seed](const Shape& shape, Rng&) {
        Rng own(seed);
        return init(shape, own);
    };
}

}  // namespace

void bind_graph(py::module_& m) {
    py::class_<Initializer>(m, "Initializer",
                            "How a parameter's values are drawn (glorot_uniform(), normal(0.1), ...): pass it as\n"
                            "parameter(shape, init=...). Draws from loom's global generator (set_seed) unless\n"
                            "it was made with a seed.");
    m.def(
        "glorot_uniform", [](double scale) { return glorot_uniform(scale); }, py::arg("scale") = 1.0,
        "U(-limit, limit), limit = scale * sqrt(6 / (fan_in + fan_out)); fan_in is the product of all\n"
        "but the last dimension, fan_out the last one (a weight [in, out] used as times(x, W)).");
    m.def(
        "glorot_normal", [](double scale) { return glorot_normal(scale); }, py::arg("scale") = 1.0,
        "N(0, scale^2 * 2 / (fan_in + fan_out)), the fans as for glorot_uniform.");
    m.def(
        "uniform", [](double scale) { return uniform(scale); }, py::arg("scale"), "U(-scale, scale).");
    m.def(
        "normal", [](double scale, double mean) { return normal(scale, mean); }, py::arg("scale"),
        py::arg("mean") = 0.0, "N(mean, scale^2): scale is the standard deviation.");
    m.def(
        "zeros", [] { return zeros(); }, "All zeros.");
    m.def(
        "constant_initializer", [](double value) { return constant_initializer(value); }, py::arg("value"),
        "Every element `value`.");
    m.def(
        "_array_initializer",
        [](const py::object& value) -> Initializer {
            xt::xarray<double> v = doubles_of(value);
            return [v](const Shape& shape, Rng&) {
                const Shape given(std::vector<std::size_t>(v.shape().begin(), v.shape().end()));
                if (given != shape)
                    throw UserError("init: the array given has shape " + given.str() + "; the parameter's is " +
                                    shape.str());
                return v;
            };
        },
        py::arg("value"));
    m.def("_seeded", &seeded, py::arg("init"), py::arg("seed"));
    m.def("set_seed", &set_seed, py::arg("seed"),
          "Reseeds loom's global generator, which initializers and dropout draw from: a seeded\n"
          "program builds the same parameters every run.");

    py::class_<SequenceAxis>(m, "SequenceAxis",
                             "A sequence axis that several sequence inputs share (aligned features and labels):\n"
                             "pass it as sequence.input_variable(shape, sequence_axis=axis).")
        .def(py::init<>())
        .def("__repr__", [](const SequenceAxis& a) { return "<loom.SequenceAxis " + std::to_string(a.id()) + ">"; });

    py::class_<Variable> variable(
        m, "Variable", R"doc(A node of loom's graph: an input, a parameter, a constant, a placeholder or an op's result.

loom has one class where CNTK has two: every op's result is a Variable that is its own (single)
output, so ``f.output`` is ``f`` and ``f.outputs`` is ``[f]``; ``Function`` is another name for it.
Equality and hashing are by node, so Variables key dicts (``f.eval({x: data})``). Arithmetic
operators build ops: ``+ - * /`` element-wise with broadcasting, unary ``-``, ``abs()``, ``@`` (times).
A graph lives as long as a Variable on it does: its outputs keep everything they depend on.)doc");
    variable
        .def(py::init([](double v) { return Variable(v); }), py::arg("value"),
             "A scalar constant (a number where a Variable is expected becomes one).")
        .def(py::init([](long long v) { return Variable(static_cast<double>(v)); }), py::arg("value"))
        .def(py::init([](const py::array& a) { return constant_of(a, ""); }), py::arg("value"),
             "A constant holding a copy of the array's values.")
        .def(py::init([](const py::list& a) { return constant_of(a, ""); }), py::arg("value"),
             "A constant holding the list's values.")
        .def_property_readonly(
            "shape", [](const Variable& v) { return shape_tuple(v.shape()); },
            "The sample shape, as a tuple (without the batch and sequence axes).")
        .def_property_readonly("name", &Variable::name, "The name given when the node was made ('' if none).")
        .def_property_readonly(
            "output", [](const Variable& v) { return wrap(v); }, "The Variable itself (a loom op has a single output).")
        .def_property_readonly(
            "outputs", [](const Variable& v) { return py::make_tuple(wrap(v)); },
            "A tuple holding the Variable itself.")
        .def_property_readonly(
            "inputs", [](const Variable& v) { return wrap_all(leaves_of({v})); },
            "Every leaf the graph depends on (inputs, parameters, constants, open\n"
            "placeholders), in creation order, as CNTK's composite Function.inputs.")
        .def_property_readonly(
            "arguments", [](const Variable& v) { return wrap_all(leaves_of_kind(v, NodeKind::Input)); },
            "The inputs the graph must be given data for, in creation order.")
        .def_property_readonly(
            "parameters", [](const Variable& v) { return parameters_of({v}); },
            "Every parameter the graph depends on, in creation order.")
        .def_property_readonly(
            "constants", [](const Variable& v) { return wrap_all(leaves_of_kind(v, NodeKind::Constant)); },
            "Every constant the graph depends on, in creation order.")
        .def_property_readonly(
            "placeholders", [](const Variable& v) { return wrap_all(leaves_of_kind(v, NodeKind::Placeholder)); },
            "The placeholders not bound yet (replace_placeholders binds them), in creation order.")
        .def(
            "find_all_with_name",
            [](const Variable& v, const std::string& name) { return wrap_all(find_all_with_name({v}, name)); },
            py::arg("name"), "Every node of the graph named `name` (ops and leaves), in creation order (CNTK's).")
        .def(
            "find_by_name",
            [](const Variable& v, const std::string& name) -> py::object {
                const std::vector<Variable> found = find_all_with_name({v}, name);
                if (found.size() > 1)
                    throw UserError("find_by_name: " + std::to_string(found.size()) + " nodes are named '" + name +
                                    "'; find_all_with_name lists them");
                return found.empty() ? py::object(py::none()) : wrap(found[0]);
            },
            py::arg("name"),
            "The node of the graph named `name`, or None (CNTK's); several of the name are a\n"
            "loom.UserError.")
        .def_property_readonly(
            "is_input", [](const Variable& v) { return kind_of(v) == NodeKind::Input; },
            "Whether this is an input (input_variable).")
        .def_property_readonly(
            "is_parameter", [](const Variable& v) { return kind_of(v) == NodeKind::Parameter; },
            "Whether this is a parameter.")
        .def_property_readonly(
            "is_constant", [](const Variable& v) { return kind_of(v) == NodeKind::Constant; },
            "Whether this is a constant.")
        .def_property_readonly(
            "is_placeholder", [](const Variable& v) { return kind_of(v) == NodeKind::Placeholder; },
            "Whether this is a placeholder.")
        .def_property_readonly(
            "is_output", [](const Variable& v) { return kind_of(v) == NodeKind::Op; },
            "Whether this is an op's result.")
        .def_property_readonly(
            "is_sequence", [](const Variable& v) { return v.axis().is_sequence(); },
            "Whether the Variable has a sequence axis (its data is a batch of sequences).")
        .def_property_readonly(
            "has_batch_axis", [](const Variable& v) { return v.axis().is_dynamic(); },
            "Whether the Variable has a batch axis (False for parameters and constants).")
        .def(
            "replace_placeholders",
            [](const Variable& self, const py::dict& substitutions) {
                std::vector<std::pair<Variable, Variable>> map;
                for (auto [key, value] : substitutions) map.emplace_back(key.cast<Variable>(), value.cast<Variable>());
                return wrap(self.replace_placeholders(map));
            },
            py::arg("substitutions"),
            R"doc(Binds each placeholder (key) to its Variable (value), closing loops, and returns self.

As CNTK's: ``h.replace_placeholders({p: h.output})`` closes the loop through ``past_value(p)``.
Raises loom.UserError for a key that is no placeholder or is bound already, a binding to itself or
into a cycle of placeholders, or a shape or sequence axis other than the placeholder's.)doc")
        .def("__repr__", &repr)
        .def("__hash__", [](const Variable& v) { return VariableHash()(v); })
        .def("__eq__", [](const Variable& a,
                          const py::object& b) { return py::isinstance<Variable>(b) && a == b.cast<Variable>(); })
        .def("__ne__", [](const Variable& a,
                          const py::object& b) { return !(py::isinstance<Variable>(b) && a == b.cast<Variable>()); })
        .def("__bool__", [](const Variable&) {
            throw UserError(
                "a loom Variable has no truth value: it is a node of a graph, not a number (use eval() for its value, "
                "or element_select for a choice inside the graph)");
            return false;
        });
    variable.attr("__module__") = "loom";
    py::implicitly_convertible<double, Variable>();
    py::implicitly_convertible<long long, Variable>();
    py::implicitly_convertible<py::array, Variable>();
    py::implicitly_convertible<py::list, Variable>();

    py::class_<Parameter, Variable> parameter_class(
        m, "Parameter", R"doc(A learnable tensor: its value lives with the node, shared by every handle on it.

``p.value`` is a copy of the value as numpy (in the parameter's dtype); ``p.value = array`` sets
it (the same shape, else loom.UserError). Not on any dynamic axis.)doc");
    parameter_class
        .def(py::init([](const py::args& args, const py::kwargs& kwargs) {
                 // CNTK's Parameter(shape, init, dtype, device, name): loom.parameter's arguments.
                 return py::module_::import("loom._graph").attr("parameter")(*args, **kwargs).cast<Parameter>();
             }),
             "The same as loom.parameter(shape, init, dtype, device, name) (CNTK's class).")
        .def_property("value", &parameter_value, &set_parameter_value,
                      "The value: a numpy copy in the parameter's dtype; assigning sets it (same shape).")
        .def_property_readonly(
            "dtype",
            [](const Parameter& p) {
                return py::module_::import("numpy").attr(p.dtype() == DType::f64 ? "float64" : "float32");
            },
            "numpy.float32 or numpy.float64: the element type the value is stored in.");
    parameter_class.attr("__module__") = "loom";

    m.def(
        "_input_variable",
        [](const std::vector<std::size_t>& shape, const std::string& name, int axes, const SequenceAxis* axis) {
            if (axes == 2)
                return axis ? sequence::input_variable(Shape(shape), name, *axis)
                            : sequence::input_variable(Shape(shape), name);
            if (axes == 1) return input_variable(Shape(shape), name);
            return static_input_variable(Shape(shape), name);
        },
        py::arg("shape"), py::arg("name"), py::arg("axes"), py::arg("sequence_axis") = nullptr);
    m.def(
        "_parameter",
        [](const std::vector<std::size_t>& shape, const Initializer& init, const std::string& name, bool f64) {
            return parameter(Shape(shape), init, name, f64 ? DType::f64 : DType::f32);
        },
        py::arg("shape"), py::arg("init"), py::arg("name"), py::arg("f64"));
    m.def(
        "_parameter_from",
        [](const py::handle& value, const std::string& name, bool f64) {
            const xt::xarray<double> v = doubles_of(value);
            const Shape shape(std::vector<std::size_t>(v.shape().begin(), v.shape().end()));
            return parameter(
                shape, [v](const Shape&, Rng&) { return v; }, name, f64 ? DType::f64 : DType::f32);
        },
        py::arg("value"), py::arg("name"), py::arg("f64"));
    m.def("_constant", &constant_of, py::arg("value"), py::arg("name"));
    m.def(
        "_placeholder",
        [](const std::optional<std::vector<std::size_t>>& shape, const std::string& name) {
            return shape ? placeholder(Shape(*shape), name) : placeholder();
        },
        py::arg("shape"), py::arg("name"));
}

}  // namespace loom_python
