#include "layers/recurrent.hpp"

#include "core/errors.hpp"

namespace loom::layers {

Cell::Cell(std::string name, std::vector<Shape> state_shapes, Project project, Step step,
           Layer::ParameterList parameters)
    : name_(std::move(name)),
      state_shapes_(std::move(state_shapes)),
      project_(std::move(project)),
      step_(std::move(step)),
      parameters_(std::move(parameters)) {
    if (state_shapes_.empty()) throw UserError("Cell " + name_ + ": a cell needs at least one state");
}

Variable Cell::project(const Variable& x) const {
    if (!project_) throw UserError("layers: using an empty Cell; construct it with LSTM(...), GRU(...), ...");
    return project_(x);
}

std::vector<Variable> Cell::step(const std::vector<Variable>& states, const Variable& projected) const {
    if (!step_) throw UserError("layers: using an empty Cell; construct it with LSTM(...), GRU(...), ...");
    if (states.size() != state_shapes_.size())
        throw UserError(name_ + ": the step takes " + std::to_string(state_shapes_.size()) + " states, got " +
                        std::to_string(states.size()));
    auto next = step_(states, projected);
    if (next.size() != states.size())
        throw UserError(name_ + ": the step returned " + std::to_string(next.size()) + " states instead of " +
                        std::to_string(states.size()));
    return next;
}

std::vector<Variable> Cell::operator()(const std::vector<Variable>& states, const Variable& x) const {
    return step(states, project(x));
}

std::vector<Variable> Cell::operator()(const Variable& h, const Variable& c, const Variable& x) const {
    return (*this)({h, c}, x);
}

std::vector<Parameter> Cell::parameters() const {
    std::vector<Parameter> out;
    if (parameters_) append_unique(out, parameters_());
    return out;
}

namespace {

// The non-recurrent half shared by the cells: x W + b with W [in, width] created at the first call.
struct InputProjection {
    std::size_t width;
    Initializer init;
    std::string name;
    Parameter w, b;

    Variable operator()(const Variable& x) {
        if (x.shape().rank() != 1)
            throw UserError(name + ": the input " + x.label() + " must be a vector (its sample shape is " +
                            x.shape().str() + ")");
        const std::size_t in = x.shape()[0];
        if (!w) {
            w = parameter(Shape{in, width}, init, name + ".W");
            b = parameter(Shape{width}, zeros(), name + ".b");
        } else if (w.shape()[0] != in) {
            throw UserError(name + ": was first called on inputs of dimension " + std::to_string(w.shape()[0]) +
                            " and now on " + x.label() + " of shape " + x.shape().str());
        }
        return affine(x, w, b);
    }
    void list(std::vector<Parameter>& out) const {
        if (w) out.insert(out.end(), {w, b});
    }
};

Variable gate(const Variable& z, std::size_t k, std::size_t n) {
    return slice(z, -1, static_cast<int>(k * n), static_cast<int>((k + 1) * n));
}

}  // namespace

Cell LSTM(std::size_t n, bool peepholes, const Initializer& init, const std::string& name) {
    struct State {
        InputProjection input;
        Parameter u, p_i, p_f, p_o;
    };
    auto s = std::make_shared<State>(State{{4 * n, init, name, {}, {}}, {}, {}, {}, {}});
    s->u = parameter(Shape{n, 4 * n}, init, name + ".U");
    if (peepholes) {
        s->p_i = parameter(Shape{n}, glorot_uniform(), name + ".peep_i");
        s->p_f = parameter(Shape{n}, glorot_uniform(), name + ".peep_f");
        s->p_o = parameter(Shape{n}, glorot_uniform(), name + ".peep_o");
    }
    auto step = [s, n, peepholes](const std::vector<Variable>& st, const Variable& xw) {
        const Variable &h = st[0], &c = st[1];
        Variable z = affine(h, s->u, xw);
        if (!peepholes) {  // the fused cell: same arithmetic, two ops instead of thirteen
            Variable c_fused = lstm_cell_state(z, c);
            return std::vector<Variable>{lstm_cell_output(z, c_fused), c_fused};
        }
        Variable zi = gate(z, 0, n), zf = gate(z, 1, n), zo = gate(z, 2, n), zg = gate(z, 3, n);
        if (peepholes) {
            zi = zi + c * s->p_i;
            zf = zf + c * s->p_f;
        }
        Variable c_next = sigmoid(zf) * c + sigmoid(zi) * tanh(zg);
        if (peepholes) zo = zo + c_next * s->p_o;
        Variable h_next = sigmoid(zo) * tanh(c_next);
        return std::vector<Variable>{h_next, c_next};
    };
    auto params = [s] {
        std::vector<Parameter> p;
        s->input.list(p);
        p.push_back(s->u);
        if (s->p_i) p.insert(p.end(), {s->p_i, s->p_f, s->p_o});
        return p;
    };
    return Cell(
        name, {Shape{n}, Shape{n}}, [s](const Variable& x) { return s->input(x); }, step, params);
}

Cell GRU(std::size_t n, const Initializer& init, const std::string& name) {
    struct State {
        InputProjection input;
        Parameter u_rz, u_g;
    };
    auto s = std::make_shared<State>(State{{3 * n, init, name, {}, {}}, {}, {}});
    s->u_rz = parameter(Shape{n, 2 * n}, init, name + ".U_rz");
    s->u_g = parameter(Shape{n, n}, init, name + ".U_g");
    auto step = [s, n](const std::vector<Variable>& st, const Variable& xw) {
        const Variable& h = st[0];
        Variable hu = times(h, s->u_rz);
        Variable r = sigmoid(gate(xw, 0, n) + gate(hu, 0, n));
        Variable z = sigmoid(gate(xw, 1, n) + gate(hu, 1, n));
        Variable g = tanh(gate(xw, 2, n) + times(r * h, s->u_g));
        return std::vector<Variable>{g + z * (h - g)};  // (1 - z) g + z h
    };
    auto params = [s] {
        std::vector<Parameter> p;
        s->input.list(p);
        p.insert(p.end(), {s->u_rz, s->u_g});
        return p;
    };
    return Cell(
        name, {Shape{n}}, [s](const Variable& x) { return s->input(x); }, step, params);
}

Cell RNNStep(std::size_t n, const Activation& activation, const Initializer& init, const std::string& name) {
    struct State {
        InputProjection input;
        Parameter u;
    };
    auto s = std::make_shared<State>(State{{n, init, name, {}, {}}, {}});
    s->u = parameter(Shape{n, n}, init, name + ".U");
    auto step = [s, activation](const std::vector<Variable>& st, const Variable& xw) {
        Variable z = affine(st[0], s->u, xw);
        return std::vector<Variable>{activation ? activation(z) : z};
    };
    auto params = [s] {
        std::vector<Parameter> p;
        s->input.list(p);
        p.push_back(s->u);
        return p;
    };
    return Cell(
        name, {Shape{n}}, [s](const Variable& x) { return s->input(x); }, step, params);
}

std::vector<Variable> recurrence_states(const Cell& cell, const Variable& x, bool go_backwards,
                                        const std::vector<Variable>& initial_states) {
    const std::size_t k = cell.num_states();
    if (initial_states.size() != 1 && initial_states.size() != k)
        throw UserError(cell.name() + " recurrence: " + std::to_string(initial_states.size()) +
                        " initial states given; the cell has " + std::to_string(k) + " (or give one for all)");
    if (!x.axis().is_sequence())
        throw UserError(cell.name() + " recurrence: the input " + x.label() + " must be a sequence (it is on the " +
                        x.axis().str() + ")");
    // Outside the loop: depends on x only, so it runs once over all steps.
    Variable projected = cell.project(x);
    std::vector<Variable> holes, previous;
    for (std::size_t i = 0; i < k; ++i) {
        holes.push_back(placeholder(cell.state_shapes()[i], cell.name() + ".state" + std::to_string(i)));
        const Variable& init = initial_states[initial_states.size() == 1 ? 0 : i];
        previous.push_back(go_backwards ? future_value(holes[i], init) : past_value(holes[i], init));
    }
    std::vector<Variable> next = cell.step(previous, projected);
    std::vector<std::pair<Variable, Variable>> closing;
    for (std::size_t i = 0; i < k; ++i) closing.emplace_back(holes[i], next[i]);
    next[0].replace_placeholders(closing);
    return next;
}

Layer Recurrence(const Cell& cell, bool go_backwards, const Variable& initial_state, const std::string& name) {
    return Layer(
        name, [=](const Variable& x) { return recurrence_states(cell, x, go_backwards, {initial_state})[0]; },
        [cell] { return cell.parameters(); });
}

Variable RecurrenceFrom::operator()(const std::vector<Variable>& initial_states, const Variable& x) const {
    return recurrence_states(cell_, x, backwards_, initial_states)[0];
}

Layer Fold(const Cell& cell, bool go_backwards, const Variable& initial_state, const std::string& name) {
    return Layer(
        name,
        [=](const Variable& x) {
            Variable h = recurrence_states(cell, x, go_backwards, {initial_state})[0];
            return go_backwards ? sequence::first(h) : sequence::last(h);
        },
        [cell] { return cell.parameters(); });
}

Layer BiRecurrence(const Cell& forward, const Cell& backward, const std::string& name) {
    return Layer(
        name,
        [=](const Variable& x) {
            Variable f = recurrence_states(forward, x, false, {Variable(0.0)})[0];
            Variable b = recurrence_states(backward, x, true, {Variable(0.0)})[0];
            return splice({f, b}, -1);
        },
        [forward, backward] {
            std::vector<Parameter> p = forward.parameters();
            append_unique(p, backward.parameters());
            return p;
        });
}

}  // namespace loom::layers
