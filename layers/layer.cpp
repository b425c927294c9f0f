#include "layers/layer.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace loom::layers {

Layer::Layer(std::string name, Function function, ParameterList parameters)
    : name_(std::move(name)), function_(std::move(function)), parameters_(std::move(parameters)) {}

Variable Layer::operator()(const Variable& x) const {
    if (!function_) throw UserError("layers: calling an empty Layer; construct it with Dense(...), LSTM(...), ...");
    return function_(x);
}

std::vector<Parameter> Layer::parameters() const {
    std::vector<Parameter> out;
    if (parameters_) append_unique(out, parameters_());
    return out;
}

void append_unique(std::vector<Parameter>& list, const std::vector<Parameter>& more) {
    for (const auto& p : more)
        if (std::find(list.begin(), list.end(), p) == list.end()) list.push_back(p);
}

namespace {

Variable activate(const Activation& f, const Variable& v) { return f ? f(v) : v; }

std::size_t last_dim(const std::string& layer, const Variable& x) {
    if (x.shape().rank() == 0)
        throw UserError(layer + ": the input " + x.label() + " has no axis to map (sample shape " + x.shape().str() +
                        ")");
    return x.shape()[x.shape().rank() - 1];
}

}  // namespace

Layer Dense(const Shape& shape, const Activation& activation, bool bias, const Initializer& init,
            const std::string& name) {
    struct State {
        Parameter w, b;
    };
    auto state = std::make_shared<State>();
    if (bias) state->b = parameter(shape, zeros(), name + ".b");
    auto call = [=](const Variable& x) {
        const std::size_t in = last_dim(name, x);
        if (!state->w) {
            std::vector<std::size_t> dims{in};
            dims.insert(dims.end(), shape.begin(), shape.end());
            state->w = parameter(Shape(dims), init, name + ".W");
        } else if (state->w.shape()[0] != in) {
            throw UserError(name + ": was first called on inputs of dimension " + std::to_string(state->w.shape()[0]) +
                            " and now on " + x.label() + " of shape " + x.shape().str() +
                            "; a layer's weights are shared between calls, so make a new layer");
        }
        Variable y = bias ? affine(x, state->w, state->b) : times(x, state->w);
        return activate(activation, y);
    };
    auto params = [state] {
        std::vector<Parameter> p;
        if (state->w) p.push_back(state->w);
        if (state->b) p.push_back(state->b);
        return p;
    };
    return Layer(name, call, params);
}

Layer Dense(std::size_t dim, const Activation& activation, bool bias, const Initializer& init,
            const std::string& name) {
    return Dense(Shape{dim}, activation, bias, init, name);
}

namespace {
std::size_t& vocabulary_default() {
    static thread_local std::size_t size = 0;
    return size;
}
}  // namespace

std::size_t default_vocabulary_size() { return vocabulary_default(); }
DefaultVocabulary::DefaultVocabulary(std::size_t size) : previous_(vocabulary_default()) {
    vocabulary_default() = size;
}
DefaultVocabulary::~DefaultVocabulary() { vocabulary_default() = previous_; }

Layer Embedding(std::size_t dim, std::size_t vocabulary, const Initializer& init, const std::string& name) {
    struct State {
        std::size_t vocabulary;
        Parameter table;
    };
    auto state = std::make_shared<State>(State{vocabulary ? vocabulary : default_vocabulary_size(), {}});
    auto call = [=](const Variable& x) {
        const bool ids = x.shape().size() == 1 && x.shape().rank() <= 1;
        if (ids && state->vocabulary == 0) state->vocabulary = default_vocabulary_size();
        const std::size_t vocab = ids ? state->vocabulary : last_dim(name, x);
        if (vocab == 0)
            throw UserError(name + "(" + std::to_string(dim) + "): the vocabulary size of the ids in " + x.label() +
                            " is unknown; pass it as Embedding(" + std::to_string(dim) +
                            ", vocabulary) or build the layer inside a layers::DefaultVocabulary scope");
        if (!state->table) {
            state->table = parameter(Shape{vocab, dim}, init, name + ".E");
        } else if (state->table.shape()[0] != vocab) {
            throw UserError(name + ": the table has " + std::to_string(state->table.shape()[0]) + " rows but " +
                            x.label() + " of shape " + x.shape().str() + " needs " + std::to_string(vocab));
        }
        return ids ? embedding(x, state->table) : times(x, state->table);
    };
    auto params = [state] { return state->table ? std::vector<Parameter>{state->table} : std::vector<Parameter>{}; };
    return Layer(name, call, params);
}

Layer Sequential(const std::vector<Layer>& layers, const std::string& name) {
    auto call = [layers](const Variable& x) {
        Variable y = x;
        for (const auto& l : layers) y = l(y);
        return y;
    };
    auto params = [layers] {
        std::vector<Parameter> p;
        for (const auto& l : layers) append_unique(p, l.parameters());
        return p;
    };
    return Layer(name, call, params);
}

Layer Dropout(double rate, std::uint64_t seed, const std::string& name) {
    if (!(rate >= 0.0 && rate < 1.0)) throw UserError(name + ": rate " + std::to_string(rate) + " must be in [0, 1)");
    return Layer(name, [=](const Variable& x) { return dropout(x, rate, seed); });
}

Layer LayerNormalization(double epsilon, const std::string& name) {
    struct State {
        Parameter scale, bias;
    };
    auto state = std::make_shared<State>();
    auto call = [=](const Variable& x) {
        const std::size_t d = last_dim(name, x);
        if (!state->scale) {
            state->scale = parameter(Shape{d}, constant_initializer(1.0), name + ".scale");
            state->bias = parameter(Shape{d}, zeros(), name + ".bias");
        }
        return layer_norm(x, state->scale, state->bias, epsilon, name);
    };
    auto params = [state] {
        return state->scale ? std::vector<Parameter>{state->scale, state->bias} : std::vector<Parameter>{};
    };
    return Layer(name, call, params);
}

}  // namespace loom::layers
