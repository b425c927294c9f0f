// Running a graph from Python: eval, grad, forward and backward, save and restore. The data is converted
// and checked with the GIL held; the engine runs with it released, so other Python threads (another
// graph's eval) run meanwhile.
#include <mutex>
#include <thread>
#include <tuple>

#include "bindings.hpp"
#include "graph/weighted_gradients.hpp"

namespace loom_python {

using namespace loom;

void raise_pending_signals() {
    py::gil_scoped_acquire held;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

namespace {

/// The engine runs a call with the GIL released, and Ctrl-C stops it: between the engine's steps
/// (every 50 ms at most) the calling thread takes the GIL to run Python's signal handlers, and a
/// KeyboardInterrupt they raise leaves the call (graph/interrupt.hpp). Signals reach Python's main
/// thread only, so a call from another thread runs to its end.
class EngineRun {
public:
    EngineRun()
        : caller_(std::this_thread::get_id()),
          interrupts_(
              [caller = caller_] {
                  if (std::this_thread::get_id() == caller) raise_pending_signals();
              },
              0.05) {}

private:
    std::thread::id caller_;
    py::gil_scoped_release released_;
    InterruptCheckScope interrupts_;
};

std::vector<Variable> arguments_of(const std::vector<Variable>& outputs) {
    std::vector<Variable> out;
    for (const Variable& leaf : leaves_of(outputs))
        if (leaf.is_input()) out.push_back(leaf);
    return out;
}

std::string label_of(const Variable& v) { return v.name().empty() ? v.label() : "'" + v.name() + "'"; }

}  // namespace

Bindings bindings_of(const std::vector<Variable>& outputs, const py::object& arguments, const char* caller,
                     const std::vector<Variable>& called) {
    const std::vector<Variable> needed = arguments_of(outputs);
    const std::vector<Variable> accepted = called.empty() ? std::vector<Variable>{} : arguments_of(called);
    Bindings bindings;
    if (arguments.is_none()) {
        if (!needed.empty())
            throw UserError(std::string(caller) + ": no data given; the graph needs data for " +
                            std::to_string(needed.size()) + " input(s), the first " + label_of(needed[0]));
        return bindings;
    }
    if (!py::isinstance<py::dict>(arguments)) {
        if (needed.size() != 1)
            throw UserError(std::string(caller) + ": data without a dict is for a graph of one input; this one has " +
                            std::to_string(needed.size()) + ": give {input: data, ...}");
        bindings.emplace(needed[0], to_value(needed[0], arguments, caller));
        return bindings;
    }
    for (auto [key, data] : py::reinterpret_borrow<py::dict>(arguments)) {
        if (py::isinstance<py::str>(key)) {  // CNTK: an input by its name
            const std::string name = key.cast<std::string>();
            const auto is_named = [&](const Variable& v) { return v.name() == name; };
            const auto named = std::count_if(needed.begin(), needed.end(), is_named);
            if (named == 0 && std::count_if(accepted.begin(), accepted.end(), is_named) == 1) continue;
            if (named != 1)
                throw UserError(std::string(caller) + ": the keys of the data are the graph's inputs (Variables, or " +
                                "the name of one); " + std::to_string(named) + " of its inputs are named '" + name +
                                "'");
            const Variable input = *std::find_if(needed.begin(), needed.end(), is_named);
            bindings.emplace(input, to_value(input, data, caller));
            continue;
        }
        if (!py::isinstance<Variable>(key))
            throw UserError(std::string(caller) + ": the keys of the data are the graph's inputs (Variables, or " +
                            "the name of one); got " + std::string(py::str(py::repr(key))));
        const Variable input = key.cast<Variable>();
        if (std::find(needed.begin(), needed.end(), input) == needed.end()) {
            if (std::find(accepted.begin(), accepted.end(), input) != accepted.end()) continue;
            throw UserError(std::string(caller) + ": " + input.label() + " is not an input of this graph");
        }
        bindings.emplace(input, to_value(input, data, caller));
    }
    for (const Variable& input : needed)
        if (!bindings.count(input))
            throw UserError(std::string(caller) + ": no data for input " + label_of(input) + " of sample shape " +
                            input.shape().str());
    return bindings;
}

namespace {

std::vector<Variable> variables_of(const py::object& list, const char* caller, const char* what) {
    std::vector<Variable> out;
    for (py::handle item : list) {
        if (!py::isinstance<Variable>(item))
            throw UserError(std::string(caller) + ": " + what + " holds Variables; got " +
                            std::string(py::str(py::repr(item))));
        out.push_back(item.cast<Variable>());
    }
    return out;
}

// A result as numpy (as_numpy) or as the loom Value itself (CNTK's as_numpy=False).
py::object result_of(const Value& value, bool as_numpy) { return as_numpy ? to_numpy(value) : py::cast(value); }

py::object eval(const Variable& self, const py::object& arguments, const py::object& outputs, const py::object&,
                bool as_numpy) {
    const bool many = !outputs.is_none();
    const std::vector<Variable> wanted = many ? variables_of(outputs, "eval", "outputs") : std::vector<Variable>{self};
    const Bindings bindings = bindings_of(wanted, arguments, "eval", {self});
    ValueMap results;
    {
        const EngineRun released;
        results = evaluate(wanted, bindings);
    }
    if (wanted.size() == 1) return result_of(results[wanted[0]], as_numpy);  // CNTK: one output, its value
    py::dict out;
    for (const Variable& v : wanted) out[wrap(v)] = result_of(results[v], as_numpy);
    return out;
}

py::object grad(const Variable& self, const py::object& at, const py::object& wrt, const py::object& outputs,
                const py::object&, bool as_numpy, const py::object& grad_root) {
    const Variable root = grad_root.is_none() ? self : grad_root.cast<Variable>();
    std::vector<Variable> wanted = wrt.is_none() ? arguments_of({root}) : variables_of(wrt, "grad", "wrt");
    if (wanted.empty()) throw UserError("grad: nothing to differentiate for (wrt is empty and the graph has no input)");
    const Bindings bindings = bindings_of({root}, at, "grad", {self});
    ValueMap results;
    Value root_value;  // with outputs: the root's value, from the gradients' own forward pass
    {
        const EngineRun released;
        if (outputs.is_none())
            results = gradients(root, bindings, wanted);
        else
            std::tie(root_value, results) = value_and_gradients(root, bindings, wanted);
    }
    py::object grads;
    if (wanted.size() == 1) {
        grads = result_of(results[wanted[0]], as_numpy);
    } else {
        py::dict out;
        for (const Variable& v : wanted) out[wrap(v)] = result_of(results[v], as_numpy);
        grads = out;
    }
    if (outputs.is_none()) return grads;
    // CNTK's (gradients, values): the root's value from the same pass; any other output's from a
    // forward pass of its own.
    const std::vector<Variable> asked = variables_of(outputs, "grad", "outputs");
    std::vector<Variable> others;
    for (const Variable& v : asked)
        if (resolve(v.node().get()) != resolve(root.node().get())) others.push_back(v);
    ValueMap values;
    if (!others.empty()) {
        const Bindings other_bindings = bindings_of(others, at, "grad", {self});
        const EngineRun released;
        values = evaluate(others, other_bindings);
    }
    auto value_of = [&](const Variable& v) {
        return result_of(resolve(v.node().get()) == resolve(root.node().get()) ? root_value : values[v], as_numpy);
    };
    if (asked.size() == 1) return py::make_tuple(grads, value_of(asked[0]));
    py::dict out;
    for (const Variable& v : asked) out[wrap(v)] = value_of(v);
    return py::make_tuple(grads, out);
}

/// `data` as a numpy array of numbers, refused (a UserError starting with `what`) when its dtype is not
/// one of numbers (objects, strings), which numpy would convert to NaN or fail on.
py::array numeric_array(py::handle data, const std::string& what) {
    const py::array a = py::module_::import("numpy").attr("asarray")(data);
    const char kind = a.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
        throw UserError(what + ": takes float or integer numbers; got dtype " +
                        std::string(py::str(py::object(a.dtype()))));
    return a;
}

/// What f.forward keeps for f.backward (CNTK's BackPropState): the Session that ran the forward
/// pass, holding its values, and the data it was given. free() (or the end of a with-block) gives
/// the session back; a freed state used again is a UserError. A pass running meanwhile (the GIL is
/// released) holds its own references, and passes on one session take turns (`busy`).
struct ForwardState {
    Variable function;                         ///< the Function whose forward made it
    std::vector<Variable> outputs;             ///< what the forward computed; outputs[0] is the session's loss
    std::vector<Variable> kept;                ///< keep_for_backward: the outputs backward may start from
    std::shared_ptr<const Bindings> bindings;  ///< the data the forward was given
    std::shared_ptr<Session> session;          ///< null once freed
    std::shared_ptr<std::mutex> busy = std::make_shared<std::mutex>();  ///< held by a pass on the session
    /// Whether the session's backward ran since its forward (guarded by busy): a Session's backward
    /// frees what its forward kept, so another backward runs the forward again first.
    std::shared_ptr<bool> backward_ran = std::make_shared<bool>(false);

    void free() {
        session.reset();
        bindings.reset();
    }
};

std::shared_ptr<Session> live_session(const ForwardState& state, const Variable& function, const char* caller) {
    if (!state.session)
        throw UserError(std::string(caller) +
                        ": the state was freed (its with-block ended or free() was called); run forward again");
    if (!(state.function == function))
        throw UserError(std::string(caller) + ": the state comes from the forward of another Function (" +
                        label_of(state.function) + "), not of " + label_of(function));
    return state.session;
}

bool all_ones(py::handle data, const std::string& what) {
    if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
        for (py::handle item : data)
            if (!all_ones(item, what)) return false;
        return true;
    }
    const py::array a = numeric_array(data, what);
    return py::module_::import("numpy").attr("all")(a.attr("__eq__")(1)).cast<bool>();
}

/// A UserError starting with `what` unless `given` has the items (and sequence lengths) of `wanted`.
void same_layout(const Value& given, const Value& wanted, const std::string& what) {
    bool same = given.kind() == wanted.kind() && given.num_items() == wanted.num_items();
    if (same && given.kind() == Value::Kind::Sequence)
        for (std::size_t n = 0; n < given.num_items(); ++n)
            same = same && given.layout().length(n) == wanted.layout().length(n);
    if (!same) throw UserError(what + ": got " + given.describe() + "; the output is a " + wanted.describe());
}

/// Parameter i's gradient from the session's last backward, dense, as a static Value of its shape.
template <class T>
Value dense_gradient(const Session& session, std::size_t i) {
    const std::vector<T> flat = session.gradient<T>(i).to_dense();
    const auto& dims = session.parameters()[i].shape().dims();
    xt::xarray<T> out = xt::zeros<T>(std::vector<std::size_t>(dims.begin(), dims.end()));
    std::copy(flat.begin(), flat.end(), out.data());
    return Value::tensor(std::move(out));
}

py::tuple forward(const Variable& self, const py::object& arguments, const py::object& outputs,
                  const py::object& keep_for_backward, std::size_t memory_budget) {
    auto state = std::make_shared<ForwardState>();
    state->function = self;
    state->outputs = outputs.is_none() ? std::vector<Variable>{self} : variables_of(outputs, "forward", "outputs");
    if (state->outputs.empty()) throw UserError("forward: outputs is empty; give the Variables to compute");
    state->kept = keep_for_backward.is_none() ? std::vector<Variable>{}
                                              : variables_of(keep_for_backward, "forward", "keep_for_backward");
    for (const Variable& k : state->kept)
        if (std::find(state->outputs.begin(), state->outputs.end(), k) == state->outputs.end())
            throw UserError("forward: keep_for_backward holds " + label_of(k) + ", which is not one of the outputs");
    state->bindings = std::make_shared<const Bindings>(bindings_of(state->outputs, arguments, "forward", {self}));
    const std::vector<Parameter> parameters =
        state->kept.empty() ? std::vector<Parameter>{} : parameters_of({state->outputs[0]});
    {
        const EngineRun released;
        state->session = std::make_shared<Session>(state->outputs, parameters);
        state->session->set_memory_budget(memory_budget);
        state->session->forward(*state->bindings, "forward");
    }
    py::dict values;
    for (const Variable& v : state->outputs) values[wrap(v)] = to_numpy(state->session->value(v));
    return py::make_tuple(py::cast(state), values);
}

py::dict backward(const Variable& self, ForwardState& state, const py::dict& root_gradients,
                  const py::object& variables, bool as_numpy) {
    if (!as_numpy) throw UserError("backward: loom returns numpy arrays (as_numpy=False is not supported)");
    const std::shared_ptr<Session> session = live_session(state, self, "backward");
    const std::shared_ptr<const Bindings> bindings = state.bindings;
    const std::shared_ptr<std::mutex> busy = state.busy;
    const std::shared_ptr<bool> backward_ran = state.backward_ran;
    if (root_gradients.size() != 1)
        throw UserError("backward: root_gradients holds one output and its gradient; got " +
                        std::to_string(root_gradients.size()) + " entries");
    const auto [key, data] = *root_gradients.begin();
    if (!py::isinstance<Variable>(key))
        throw UserError("backward: the key of root_gradients is an output (a Variable); got " +
                        std::string(py::str(py::repr(key))));
    const Variable root = key.cast<Variable>();
    if (std::find(state.kept.begin(), state.kept.end(), root) == state.kept.end())
        throw UserError("backward: " + label_of(root) + " was not kept; pass it in forward's keep_for_backward");
    const Value weights = to_value(root, data, "backward: root_gradients");  // checked against the output
    const bool ones = all_ones(data, "backward: root_gradients");
    const std::vector<Variable> wanted = variables_of(variables, "backward", "variables");
    if (wanted.empty())
        throw UserError("backward: variables is empty; give the parameters or inputs to differentiate for");
    // The kept session differentiates the sum of its first output for its parameters; anything else
    // (an input, another output, root gradients other than ones) takes one more forward and backward
    // pass.
    std::vector<std::size_t> indices;
    for (const Variable& v : wanted) {
        const auto& ps = session->parameters();
        const auto at = std::find(ps.begin(), ps.end(), v);
        if (at == ps.end()) break;
        indices.push_back(static_cast<std::size_t>(at - ps.begin()));
    }
    const bool kept_session = ones && root == state.outputs[0] && indices.size() == wanted.size();
    ValueMap results;
    {
        const EngineRun released;
        const std::lock_guard<std::mutex> turn(*busy);
        if (ones) same_layout(weights, session->value(root), "backward: root_gradients for " + label_of(root));
        if (kept_session) {
            if (*backward_ran) session->forward(*bindings, "backward");
            *backward_ran = true;
            session->backward();
            for (std::size_t k = 0; k < wanted.size(); ++k)
                results.insert(wanted[k], session->dtype() == DType::f64 ? dense_gradient<double>(*session, indices[k])
                                                                         : dense_gradient<float>(*session, indices[k]));
        } else {
            results = ones ? gradients(root, *bindings, wanted) : weighted_gradients(root, weights, *bindings, wanted);
        }
    }
    py::dict out;
    for (const Variable& v : wanted) out[wrap(v)] = to_numpy(results[v]);
    return out;
}

}  // namespace

void bind_run(py::module_& m) {
    py::class_<Value> value(
        m, "Value", R"doc(Data bound to a graph's input, in loom's own layout (what eval and grad take besides numpy).

Value.sequences(list of arrays [T_i, sample...]) and Value.item_major_sequences(array [N, T,
sample...], lengths) make a batch of sequences; whatever is in the padding of the latter (NaN
included) is ignored. Value.batch(array [N, sample...]) makes a batch. Each copies the data once.)doc");
    value
        .def_static(
            "sequences",
            [](const py::list& seqs) {
                std::vector<xt::xarray<double>> out;
                bool f64 = false;
                for (py::handle s : seqs) {
                    const py::array a = numeric_array(s, "Value.sequences");
                    f64 = f64 || (a.dtype().kind() == 'f' && a.dtype().itemsize() == 8);
                    auto d = numbers_of<double>(a, "Value.sequences");
                    std::vector<std::size_t> shape(d.shape(), d.shape() + d.ndim());
                    xt::xarray<double> x = xt::zeros<double>(shape);
                    std::copy_n(d.data(), d.size(), x.data());
                    out.push_back(std::move(x));
                }
                if (f64) return Value::sequences(out);
                std::vector<xt::xarray<float>> floats;
                for (auto& x : out) floats.push_back(xt::cast<float>(x));
                return Value::sequences(floats);
            },
            py::arg("sequences"),
            "A batch of sequences from a list of arrays [T_i, sample...] (float64 stays float64).")
        .def_static(
            "item_major_sequences",
            [](const py::object& given, const std::vector<std::size_t>& lengths) {
                const py::array data = numeric_array(given, "Value.item_major_sequences");
                const bool f64 = data.dtype().kind() == 'f' && data.dtype().itemsize() == 8;
                auto d = numbers_of<double>(data, "Value.item_major_sequences");
                std::vector<std::size_t> shape(d.shape(), d.shape() + d.ndim());
                xt::xarray<double> x = xt::zeros<double>(shape);
                std::copy_n(d.data(), d.size(), x.data());
                if (f64) return Value::item_major_sequences(x, lengths);
                return Value::item_major_sequences(xt::xarray<float>(xt::cast<float>(x)), lengths);
            },
            py::arg("data"), py::arg("lengths"),
            "Sequences from padded item-major data [N, T, sample...]: item n's first lengths[n] steps\n"
            "(the padding, NaN included, is ignored). A length of 0 or above T is a loom.UserError.")
        .def_static(
            "batch",
            [](const py::object& given) {
                const py::array rows = numeric_array(given, "Value.batch");
                const bool f64 = rows.dtype().kind() == 'f' && rows.dtype().itemsize() == 8;
                auto d = numbers_of<double>(rows, "Value.batch");
                std::vector<std::size_t> shape(d.shape(), d.shape() + d.ndim());
                xt::xarray<double> x = xt::zeros<double>(shape);
                std::copy_n(d.data(), d.size(), x.data());
                if (f64) return Value::batch(std::move(x));
                return Value::batch(xt::xarray<float>(xt::cast<float>(x)));
            },
            py::arg("rows"), "A batch [N, sample...].")
        .def(
            "to_numpy", [](const Value& v) { return to_numpy(v); },
            "The data as numpy: sequences as a list of arrays [T_i, sample...], a batch as [N, sample...].")
        .def("__repr__", [](const Value& v) { return "<loom.Value " + v.describe() + ">"; });
    value.attr("__module__") = "loom";

    py::class_<Variable> v = py::reinterpret_borrow<py::class_<Variable>>(m.attr("Variable"));
    v.def("eval", &eval, py::arg("arguments") = py::none(), py::arg("outputs") = py::none(),
          py::arg("device") = py::none(), py::arg("as_numpy") = true,
          R"doc(Runs the graph forward and returns its value as numpy.

arguments: {input: data, ...} (an input or its name, as CNTK), or the data alone when the graph has
one input (None when it has none). A sequence input's data is a list of arrays [T_i, sample...]
(an item of the sample's shape is one step), one array [N, T, sample...], or one array [T,
sample...], one sequence (as CNTK; but for sample shape (1,) a 2-D array is [N, T], where CNTK
reads [T, 1]); a batch input's an array [N, sample...]; float32 or float64 (integer ids are taken
as float32, exact up to 2^24); for sample shape (1,) the trailing 1 may be left out. Data of the
wrong dtype, rank or shape raises loom.UserError naming the input, its shape and what was given,
before anything runs. The data is copied once into loom's padded layout.

Returns, for a sequence output, a list of arrays [T_i, sample...]: views into one padded buffer
that they keep alive (no copy; np.ascontiguousarray makes one contiguous); for a batch output an
array [N, sample...]; for a static one an array of its shape. The element type is float64 when
any input's data or any parameter is float64, else float32 (loom differs from CNTK: an input has
no dtype of its own). With outputs=[...] of several, a dict of each output's value instead (of
one, its value, as CNTK). device is accepted and ignored (loom runs on the CPU); as_numpy=False returns loom.Value objects instead of
arrays. The GIL is released while the engine runs.)doc")
        .def(
            "grad", &grad, py::arg("at"), py::arg("wrt") = py::none(), py::arg("outputs") = py::none(),
            py::arg("device") = py::none(), py::arg("as_numpy") = true, py::arg("grad_root") = py::none(),
            R"doc(The gradient of the sum of this Variable's value (over every sequence, step and element) with respect to wrt.

at: the data, as eval's arguments. wrt: a list of parameters and inputs; None means every input
(loom differs from CNTK: inputs have no needs_gradient flag). Returns one array (or a list of
per-sequence arrays for a sequence input) when wrt has one entry, else a dict by Variable;
with outputs=[...], the pair (gradients, values), values as eval(at, outputs) gives them (one
more forward pass). grad_root: the Variable to differentiate instead of this one (a combine's
output, as CNTK's). device and as_numpy as in eval. The GIL is released while the engine runs.)doc")
        .def(
            "save",
            [](const Variable& self, const std::string& path) {
                save_model_file(path, "python", parameters_of({self}));
            },
            py::arg("filename"),
            R"doc(Writes the graph's parameters to a loom model file, by name (written atomically).

loom differs from CNTK: the file holds the parameters, not the graph; rebuild the graph in code
and call restore(filename). Every parameter needs a name of its own (else loom.UserError).)doc")
        .def(
            "restore",
            [](const Variable& self, const std::string& path) {
                assign_parameters(read_model_file(path), parameters_of({self}));
            },
            py::arg("filename"),
            R"doc(Sets the graph's parameters from a loom model file, by name (any kind of loom model file).

A missing, truncated or foreign file raises loom.DataError; a parameter missing from the file,
one the graph lacks, or a shape that differs raises loom.UserError listing them, and nothing is
changed.)doc");

    py::class_<ForwardState, std::shared_ptr<ForwardState>> state(
        m, "BackPropState",
        R"doc(What Function.forward keeps for Function.backward: the session that ran the forward pass.

free() gives its memory back; as a context manager (``with f.forward(...)[0] as state:``) it is freed
at the end of the block. A freed state passed to backward raises loom.UserError.)doc");
    state
        .def(
            "free", [](ForwardState& s) { s.free(); }, "Gives the session back.")
        .def_property_readonly(
            "is_freed", [](const ForwardState& s) { return !s.session; }, "Whether free() was called.")
        .def_property_readonly(
            "function", [](const ForwardState& s) { return wrap(s.function); }, "The Function whose forward made it.")
        .def_property_readonly(
            "loop_bytes_peak",
            [](const ForwardState& s) { return live_session(s, s.function, "loop_bytes_peak")->loop_bytes_peak(); },
            "The most bytes one recurrence loop held for backward in this state's passes (loom's; see "
            "Function.forward's memory_budget).")
        .def("__enter__", [](py::object s) { return s; })
        .def(
            "__exit__",
            [](ForwardState& s, const py::object&, const py::object&, const py::object&) {
                s.free();
                return false;
            },
            py::arg("type"), py::arg("value"), py::arg("traceback"));
    state.attr("__module__") = "loom";
    v.def("forward", &forward, py::arg("arguments") = py::none(), py::arg("outputs") = py::none(),
          py::arg("keep_for_backward") = py::none(), py::kw_only(), py::arg("memory_budget") = 0,
          R"doc(Runs the graph forward, keeping the session for backward: returns (state, {output: value}).

arguments as eval's; outputs: the Variables to compute (this one by default); keep_for_backward: the
outputs backward may start from (a set; empty: the state only holds the values). The state holds
the session until it is freed (state.free(), or a with-block). loom differs from eval here: the
session runs in its parameters' element type (float64 data with float32 parameters gives float32),
as CNTK's Function does. memory_budget (loom's, not CNTK's; bytes, 0: none) bounds what each
recurrence loop keeps for backward: a loop that would hold more runs in segments and backward
recomputes each one (square-root checkpointing), with the same gradients bit for bit; too small a
budget is a loom.UserError giving the least one that works. state.loop_bytes_peak says what a loop
held. The GIL is released while the engine runs.)doc");
    v.def("backward", &backward, py::arg("state"), py::arg("root_gradients"), py::arg("variables"),
          py::arg("as_numpy") = true,
          R"doc(Runs the backward pass from a forward's state: returns {variable: gradient}.

root_gradients: {output: gradient}, one output that forward kept, its gradient in the output's
layout (a list of arrays [T_i, ...] for a sequence output). variables: the parameters and inputs
to differentiate for. With root gradients of ones, the first output's parameter gradients come
from the kept session; an input's, another output's, or other root gradients take one more
forward and backward pass (loom differs from CNTK there). A freed state, or one of another Function, is a loom.UserError.
The GIL is released while the engine runs.)doc");
}

}  // namespace loom_python
