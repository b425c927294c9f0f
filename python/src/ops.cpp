// The ops of graph/ops.hpp under CNTK's Python names and argument names. The package (loom/) wraps
// the few whose CNTK signature needs more than a name (axis=None, keepdims, output_rank).
#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

using Unary = Variable (*)(const Variable&, const std::string&);
using Binary = Variable (*)(const Variable&, const Variable&, const std::string&);

void unary(py::module_& m, const char* name, Unary f, const char* doc) {
    m.def(name, f, py::arg("x"), py::arg("name") = "", doc);
}

void binary(py::module_& m, const char* name, Binary f, const char* doc) {
    m.def(name, f, py::arg("left"), py::arg("right"), py::arg("name") = "", doc);
}

void bind_elementwise(py::module_& m) {
    unary(m, "exp", &loom::exp, "e^x, element by element.");
    unary(m, "log", &loom::log, "The natural logarithm of x, element by element.");
    unary(m, "sqrt", &loom::sqrt, "The square root of x, element by element.");
    unary(m, "square", &loom::square, "x * x, element by element.");
    unary(m, "abs", &loom::abs, "|x|, element by element (gradient 0 at 0).");
    unary(m, "sin", &loom::sin, "The sine of x (radians).");
    unary(m, "cos", &loom::cos, "The cosine of x (radians).");
    unary(m, "tanh", &loom::tanh, "The hyperbolic tangent of x.");
    unary(m, "sigmoid", &loom::sigmoid, "1 / (1 + e^-x).");
    unary(m, "relu", &loom::relu, "max(x, 0).");
    unary(m, "gelu", &loom::gelu,
          "x Phi(x), Phi the standard normal's distribution function (the exact erf form, as\n"
          "torch.nn.GELU()). loom's; CNTK has none.");
    unary(m, "softplus", &loom::softplus, "log(1 + e^x), without overflow.");
    unary(m, "reciprocal", &loom::reciprocal, "1 / x.");
    unary(m, "negate", &loom::negate, "-x.");
    unary(m, "alias", &loom::identity, "x itself, as a node of its own.");
    unary(m, "stop_gradient", &loom::stop_gradient, "x in forward; passes no gradient back.");
    unary(m, "floor", &loom::floor, "The largest whole number not above x; gradient 0.");
    unary(m, "ceil", &loom::ceil, "The smallest whole number not below x; gradient 0.");
    unary(m, "round", &loom::round,
          "x to the nearest whole number, halves up as CNTK's (floor(x + 0.5): 2.5 -> 3, -2.5 -> -2;\n"
          "numpy.round takes halves to even); gradient 0.");
    binary(m, "plus", &loom::plus, "left + right, broadcasting numpy-style (the + operator).");
    binary(m, "minus", &loom::minus, "left - right, broadcasting (the - operator).");
    binary(m, "element_times", &loom::element_times, "left * right element by element, broadcasting (the * operator).");
    binary(m, "element_divide", &loom::element_divide,
           "left / right element by element, broadcasting (the / operator).");
    binary(m, "log_add_exp", &loom::log_add_exp, "log(e^left + e^right), without overflow.");
    binary(m, "greater", &loom::greater, "1 where left > right, else 0; no gradient.");
    binary(m, "less", &loom::less, "1 where left < right, else 0; no gradient.");
    binary(m, "equal", &loom::equal, "1 where left == right, else 0; no gradient.");
    binary(m, "greater_equal", &loom::greater_equal, "1 where left >= right, else 0; no gradient.");
    binary(m, "less_equal", &loom::less_equal, "1 where left <= right, else 0; no gradient.");
    binary(m, "not_equal", &loom::not_equal, "1 where left != right, else 0; no gradient.");
    binary(m, "element_max", &loom::element_max, "max(left, right); at a tie the gradient goes to left.");
    binary(m, "element_min", &loom::element_min, "min(left, right); at a tie the gradient goes to left.");
    m.def("element_select", &loom::element_select, py::arg("flag"), py::arg("value_if_true"), py::arg("value_if_false"),
          py::arg("name") = "",
          "value_if_true where flag != 0, else value_if_false; the gradient goes to the one chosen.");
    m.def("clip", &loom::clip, py::arg("x"), py::arg("min_value"), py::arg("max_value"), py::arg("name") = "",
          "x limited to [min_value, max_value]; the gradient passes where x is inside.");
}

void bind_products_and_losses(py::module_& m) {
    m.def("_times", &loom::times, py::arg("left"), py::arg("right"), py::arg("name") = "");
    m.def("times_transpose", &loom::times_transpose, py::arg("left"), py::arg("right"), py::arg("name") = "",
          "left times right's transpose: left [..., k] with a matrix right [m, k] gives [..., m].");
    m.def("cosine_distance", &loom::cosine_distance, py::arg("x"), py::arg("y"), py::arg("name") = "",
          "x.y / (|x| |y|) over the sample, shape (1,): the cosine SIMILARITY, under CNTK's name for it\n"
          "(0 for a zero vector).");
    m.def("squared_error", &loom::squared_error, py::arg("output"), py::arg("target"), py::arg("name") = "",
          "sum_j (output_j - target_j)^2 over the sample, shape (1,).");
    m.def("binary_cross_entropy", &loom::binary_cross_entropy, py::arg("output"), py::arg("target"),
          py::arg("name") = "",
          "-sum_j (t_j log p_j + (1 - t_j) log(1 - p_j)), p = output (a probability), shape (1,).");
    m.def("_cross_entropy_with_softmax", &loom::cross_entropy_with_softmax, py::arg("output_vector"),
          py::arg("target_vector"), py::arg("name") = "");
    m.def("_classification_error", &loom::classification_error, py::arg("output_vector"), py::arg("target_vector"),
          py::arg("name") = "");
}

void bind_reductions_and_shapes(py::module_& m) {
    m.attr("_all_static_axes") = all_static_axes;
    m.def("_reduce_sum", &loom::reduce_sum, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_reduce_mean", &loom::reduce_mean, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_reduce_max", &loom::reduce_max, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_reduce_min", &loom::reduce_min, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_reduce_log_sum_exp", &loom::reduce_log_sum_exp, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_softmax", &loom::softmax, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_log_softmax", &loom::log_softmax, py::arg("x"), py::arg("axis"), py::arg("name"));
    m.def("_splice", &loom::splice, py::arg("inputs"), py::arg("axis"), py::arg("name"));
    m.def("_slice", &loom::slice, py::arg("x"), py::arg("axis"), py::arg("begin_index"), py::arg("end_index"),
          py::arg("name"));
    m.def(
        "_reshape",
        [](const Variable& x, const std::vector<std::size_t>& shape, const std::string& name) {
            return loom::reshape(x, Shape(shape), name);
        },
        py::arg("x"), py::arg("shape"), py::arg("name"));
    m.def("_transpose", &loom::transpose, py::arg("x"), py::arg("perm"), py::arg("name"));
    m.def("_one_hot", &loom::one_hot, py::arg("x"), py::arg("num_classes"), py::arg("name"));
    m.def("_dropout", &loom::dropout, py::arg("x"), py::arg("dropout_rate"), py::arg("seed"), py::arg("name"));
    m.def("embedding", &loom::embedding, py::arg("ids"), py::arg("table"), py::arg("name") = "",
          "Row ids[i] of table [V, D] for each id (sample shape (1,), whole numbers 0..V-1) -> [D]; an\n"
          "id out of range is a loom.UserError. loom's (CNTK multiplies a one-hot input instead).");
    m.def("layer_norm", &loom::layer_norm, py::arg("x"), py::arg("scale"), py::arg("bias"), py::arg("epsilon") = 1e-5,
          py::arg("name") = "",
          "(x - mean) / sqrt(var + epsilon) * scale + bias over the last axis (biased variance).\n"
          "loom's op; CNTK has the layer LayerNormalization.");
}

void bind_delays_and_sequences(py::module_& m) {
    m.def("_past_value", &loom::past_value, py::arg("x"), py::arg("initial_state"), py::arg("time_step"),
          py::arg("name"));
    m.def("_future_value", &loom::future_value, py::arg("x"), py::arg("initial_state"), py::arg("time_step"),
          py::arg("name"));
    py::module_ s = m.def_submodule("sequence", "Ops over a sequence axis (CNTK's C.sequence).");
    s.def("is_first", &sequence::is_first, py::arg("seq"), py::arg("name") = "",
          "1 on the first step of each sequence, else 0: shape (1,) on seq's sequence axis.");
    s.def("is_last", &sequence::is_last, py::arg("seq"), py::arg("name") = "",
          "1 on the last step of each sequence, else 0: shape (1,) on seq's sequence axis.");
    s.def("first", &sequence::first, py::arg("seq"), py::arg("name") = "",
          "The first step of each sequence, as a batch value (one per sequence).");
    s.def("last", &sequence::last, py::arg("seq"), py::arg("name") = "",
          "The last step of each sequence, as a batch value (one per sequence).");
    s.def("slice", &sequence::slice, py::arg("seq"), py::arg("begin_index"), py::arg("end_index"), py::arg("name") = "",
          "Steps [begin_index, end_index) of each sequence; negative indices count from each\n"
          "sequence's end, end_index 0 means to the end. A sequence left empty is a loom.UserError.");
    s.def("broadcast_as", &sequence::broadcast_as, py::arg("operand"), py::arg("broadcast_as_operand"),
          py::arg("name") = "", "A per-sequence (batch) value repeated along every step of the other's sequences.");
    s.def("reduce_sum", &sequence::reduce_sum, py::arg("seq"), py::arg("name") = "",
          "The sum over the steps of each sequence, as a batch value.");
    s.def("reduce_max", &sequence::reduce_max, py::arg("seq"), py::arg("name") = "",
          "The maximum over the steps of each sequence, as a batch value.");
    s.def("reduce_mean", &sequence::reduce_mean, py::arg("seq"), py::arg("name") = "",
          "The mean over the steps of each sequence, as a batch value (loom's; CNTK has none).");
    s.def("softmax", &sequence::softmax, py::arg("seq"), py::arg("name") = "",
          "Softmax over the steps of each sequence, element by element; on seq's axis.");
    s.def("length", &sequence::length, py::arg("seq"), py::arg("name") = "",
          "The length of each sequence, as a batch value of shape (1,) (loom's; CNTK has none).");
    s.def("gather", &sequence::gather, py::arg("seq"), py::arg("condition"), py::arg("name") = "",
          "The steps of seq where condition (shape (1,) on seq's axis) is non-zero, on a new\n"
          "sequence axis. An empty result sequence is a loom.UserError.");
    s.def("scatter", &sequence::scatter, py::arg("seq"), py::arg("condition"), py::arg("name") = "",
          "The inverse of gather: seq's steps placed in order where condition is non-zero, zeros\n"
          "elsewhere; on condition's axis.");
    s.def("where", &sequence::where, py::arg("condition"), py::arg("name") = "",
          "The positions t (as numbers, shape (1,)) where condition is non-zero, on a new sequence\n"
          "axis; a whole count c > 1 repeats t c times.");
    s.def(
        "_unpack",
        [](const Variable& x, double padding_value, const std::string& name) {
            auto u = sequence::unpack(x, padding_value, name);
            return py::make_tuple(u.data, u.mask);
        },
        py::arg("x"), py::arg("padding_value"), py::arg("name"));
}

}  // namespace

void bind_ops(py::module_& m) {
    bind_elementwise(m);
    bind_products_and_losses(m);
    bind_reductions_and_shapes(m);
    bind_delays_and_sequences(m);

    // Operators on Variable; a number or an array on either side becomes a constant.
    py::class_<Variable> v = py::reinterpret_borrow<py::class_<Variable>>(m.attr("Variable"));
    const auto op = py::is_operator();
    v.def(
         "__add__", [](const Variable& a, const Variable& b) { return a + b; }, op)
        .def(
            "__radd__", [](const Variable& a, const Variable& b) { return b + a; }, op)
        .def(
            "__sub__", [](const Variable& a, const Variable& b) { return a - b; }, op)
        .def(
            "__rsub__", [](const Variable& a, const Variable& b) { return b - a; }, op)
        .def(
            "__mul__", [](const Variable& a, const Variable& b) { return a * b; }, op)
        .def(
            "__rmul__", [](const Variable& a, const Variable& b) { return b * a; }, op)
        .def(
            "__truediv__", [](const Variable& a, const Variable& b) { return a / b; }, op)
        .def(
            "__rtruediv__", [](const Variable& a, const Variable& b) { return b / a; }, op)
        .def(
            "__matmul__", [](const Variable& a, const Variable& b) { return times(a, b); }, op)
        .def(
            "__rmatmul__", [](const Variable& a, const Variable& b) { return times(b, a); }, op)
        .def("__neg__", [](const Variable& a) { return -a; })
        .def("__abs__", [](const Variable& a) { return loom::abs(a); });
}

}  // namespace loom_python
