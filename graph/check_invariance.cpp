#include "graph/check_invariance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "core/errors.hpp"
#include "graph/invariance_items.hpp"
#include "graph/op.hpp"
#include "graph/run_dtype.hpp"

namespace loom {

namespace {

using namespace invariance;

// Runs every item alone once (its outputs, weights and gradients kept), then the batch in each
// order, comparing as it goes; on a failure, reruns the worst order keeping every node's value (or
// gradient) to find where the difference starts.
template <class T>
class Checker {
public:
    Checker(std::shared_ptr<const Plan> plan, const Bindings& bindings, const InvarianceOptions& options);
    InvarianceReport run();

private:
    struct Results {  // of one item alone
        std::vector<Piece> outputs, grads;
        std::vector<std::vector<double>> weights;  // per output: the item's weights (empty: static output)
    };

    // Binds the items in this order (a batch of one when alone) and runs forward.
    std::unique_ptr<Execution<T>> execute(const std::vector<std::size_t>& items, bool nan_padding);
    // Backward of sum(w . y), each item's weights placed where this batch holds its outputs.
    void backward(Execution<T>& ex, const std::vector<std::size_t>& items, const std::vector<int>& wrt) const;
    void compare(const Piece& alone, const Piece& batched, const PlanNode& node, InvarianceDifference& worst,
                 const std::string& what, std::size_t item, const Order& order);
    // Whether the item at `position` of the batch's value differs from its value alone.
    bool differs(const Value& alone, const Value& batched, std::size_t position, const PlanNode& node) const;
    void localize_forward(const Order& order);
    void localize_backward(const Order& order);

    InvarianceOptions options_;
    std::shared_ptr<const Plan> plan_;
    std::vector<int> outputs_, wrt_;  // plan indices; outputs without repeats
    std::vector<SplitInput> inputs_;
    std::size_t n_ = 0;
    std::vector<Results> alone_;
    std::vector<Order> orders_;
    InvarianceReport report_;
};

template <class T>
Checker<T>::Checker(std::shared_ptr<const Plan> plan, const Bindings& bindings, const InvarianceOptions& options)
    : options_(options), plan_(std::move(plan)) {
    for (int o : plan_->outputs)
        if (std::find(outputs_.begin(), outputs_.end(), o) == outputs_.end()) outputs_.push_back(o);
    const Variable* first = nullptr;
    for (const auto& [var, value] : bindings) {
        if (!var || plan_->find(resolve(var.node().get())) < 0) continue;  // not used by the outputs
        SplitInput in{var, value, {}, value.kind() == Value::Kind::Sequence, value.sample_shape()};
        if (value.kind() != Value::Kind::Static) {
            if (first && value.num_items() != n_)
                throw UserError("check_batch_invariance: " + var.label() + " is bound to " +
                                std::to_string(value.num_items()) + " items but " + first->label() + " to " +
                                std::to_string(n_) + "; item i is the i-th sequence or row of every input");
            first = &var;
            n_ = value.num_items();
            for (std::size_t i = 0; i < n_; ++i)
                in.items.push_back(in.is_sequence ? value.template sequence<double>(i) : row_of(value, i));
        }
        inputs_.push_back(std::move(in));
    }
    if (!first)
        throw UserError(
            "check_batch_invariance: no input with a batch axis is bound, so there is no batch to "
            "split; bind a Value::sequences or Value::batch");
    const std::string who = "check_batch_invariance";
    if (!options_.gradients) return;
    if (options_.wrt.empty()) {
        for (std::size_t i = 0; i < plan_->nodes.size(); ++i) {
            const NodeKind k = plan_->nodes[i].node->kind;
            if (k == NodeKind::Parameter || k == NodeKind::Input) wrt_.push_back(static_cast<int>(i));
        }
        return;
    }
    for (const auto& w : options_.wrt) {
        const Node* node = w ? resolve(w.node().get()) : nullptr;
        const int i = node ? plan_->find(node) : -1;
        if (i < 0)
            throw UserError(who + ": the outputs do not depend on " +
                            (w ? w.label() : std::string("an empty Variable")) + "; remove it from wrt");
        if (node->kind != NodeKind::Input && node->kind != NodeKind::Parameter)
            throw UserError(who + ": " + w.label() + " in wrt is neither an input nor a parameter");
        wrt_.push_back(i);
    }
}

template <class T>
std::unique_ptr<Execution<T>> Checker<T>::execute(const std::vector<std::size_t>& items, bool nan_padding) {
    auto ex = std::make_unique<Execution<T>>(plan_);
    ex->bind(bind_items(inputs_, items, nan_padding), "check_batch_invariance");
    ex->forward();
    return ex;
}

template <class T>
void Checker<T>::backward(Execution<T>& ex, const std::vector<std::size_t>& items, const std::vector<int>& wrt) const {
    std::vector<std::vector<T>> weights(outputs_.size());
    std::unordered_map<int, const std::vector<T>*> seeds;
    for (std::size_t k = 0; k < outputs_.size(); ++k) {
        const int out = outputs_[k];
        weights[k].assign(ex.value_buffer(out).size(), T(0));
        seeds[out] = &weights[k];
        const PlanNode& node = plan_->nodes[static_cast<std::size_t>(out)];
        if (!node.type.axis.is_dynamic()) continue;  // counted once in a batch, once per item alone
        const Value v = ex.value(out);
        const std::size_t row = v.sample_shape().size(), n = items.size();
        for (std::size_t p = 0; p < n; ++p) {
            const std::vector<double>& w = alone_[items[p]].weights[k];
            const Piece batched = piece_of(v, p);
            // Storage index of element b of position p's piece: [T, N, row] or [N, row].
            auto storage = [&](std::size_t b) {
                return v.kind() == Value::Kind::Sequence ? ((b / row) * n + p) * row + b % row : p * row + b;
            };
            correspond(alone_[items[p]].outputs[k].shape, batched.shape, growable_axes(node),
                       [&](std::size_t a, std::size_t b) { weights[k][storage(b)] = static_cast<T>(w[a]); });
        }
    }
    ex.backward(wrt, seeds);
}

template <class T>
void Checker<T>::compare(const Piece& alone, const Piece& batched, const PlanNode& node, InvarianceDifference& worst,
                         const std::string& what, std::size_t item, const Order& order) {
    auto note = [&](double error, double difference, std::size_t index, double a, double b) {
        worst.difference = std::max(worst.difference, difference);
        if (error <= worst.error && !worst.variable.empty()) return;
        worst = {worst.difference, error, what, item, order.name, index, a, b};
    };
    const bool fits = correspond(alone.shape, batched.shape, growable_axes(node), [&](std::size_t a, std::size_t b) {
        ++report_.compared;
        const double x = alone.data[a], y = batched.data[b];
        const double d = std::isnan(x - y) ? INFINITY : std::abs(x - y);
        note(relative_error(x, y, options_), x == y || (std::isnan(x) && std::isnan(y)) ? 0 : d, a, x, y);
    });
    if (fits) return;
    note(INFINITY, INFINITY, 0, 0, 0);
    if (report_.message.empty())
        report_.message = what + " of item " + std::to_string(item) + " has shape " + shape_str(alone.shape) +
                          " alone but " + shape_str(batched.shape) + " in the batch (order " + order.name + ")";
}

template <class T>
bool Checker<T>::differs(const Value& alone, const Value& batched, std::size_t position, const PlanNode& node) const {
    const Piece a = piece_of(alone, 0), b = piece_of(batched, position);
    bool differ = false;
    const bool fits = correspond(a.shape, b.shape, growable_axes(node), [&](std::size_t i, std::size_t j) {
        differ = differ || relative_error(a.data[i], b.data[j], options_) > 1;
    });
    return differ || !fits;
}

template <class T>
InvarianceReport Checker<T>::run() {
    report_.items = n_;
    for (std::size_t i = 0; i < n_; ++i) {
        auto ex = execute({i}, false);
        Results r;
        for (std::size_t k = 0; k < outputs_.size(); ++k) {
            r.outputs.push_back(piece_of(ex->value(outputs_[k]), 0));
            std::vector<double> w;
            if (plan_->nodes[static_cast<std::size_t>(outputs_[k])].type.axis.is_dynamic()) {
                std::seed_seq seq{options_.seed, std::uint64_t{i}, std::uint64_t{k}};
                std::mt19937_64 rng(seq);
                std::uniform_real_distribution<double> dist(0.5, 1.5);
                w.resize(r.outputs.back().data.size());
                for (auto& x : w) x = dist(rng);
            }
            r.weights.push_back(std::move(w));
        }
        alone_.push_back(std::move(r));
        if (wrt_.empty()) continue;
        backward(*ex, {i}, wrt_);
        for (int w : wrt_) alone_.back().grads.push_back(piece_of(ex->gradient(w), 0));
    }

    orders_ = batch_orders(n_, options_);
    report_.orders = orders_.size();
    for (const Order& order : orders_) {
        auto ex = execute(order.items, true);
        for (std::size_t k = 0; k < outputs_.size(); ++k) {
            const Value v = ex->value(outputs_[k]);
            const PlanNode& node = plan_->nodes[static_cast<std::size_t>(outputs_[k])];
            for (std::size_t p = 0; p < n_; ++p)
                compare(alone_[order.items[p]].outputs[k], piece_of(v, p), node, report_.values,
                        "output " + node.node->label(), order.items[p], order);
        }
        if (wrt_.empty()) continue;
        backward(*ex, order.items, wrt_);
        for (std::size_t w = 0; w < wrt_.size(); ++w) {
            const Value g = ex->gradient(wrt_[w]);
            const PlanNode& node = plan_->nodes[static_cast<std::size_t>(wrt_[w])];
            const std::string what = "gradient of " + node.node->label();
            if (!node.type.axis.is_dynamic()) {  // a parameter: the batch's is the sum of the items'
                Piece sum = alone_[0].grads[w];
                for (std::size_t i = 1; i < n_; ++i)
                    for (std::size_t e = 0; e < sum.data.size(); ++e) sum.data[e] += alone_[i].grads[w].data[e];
                compare(sum, piece_of(g, 0), node, report_.gradients, what, n_, order);
                continue;
            }
            for (std::size_t p = 0; p < n_; ++p)
                compare(alone_[order.items[p]].grads[w], piece_of(g, p), node, report_.gradients, what, order.items[p],
                        order);
        }
    }

    report_.ok = report_.values.error <= 1 && report_.gradients.error <= 1;
    if (report_.ok) return report_;
    const bool forward = report_.values.error > 1;
    const InvarianceDifference& worst = forward ? report_.values : report_.gradients;
    if (report_.message.empty()) {
        std::ostringstream m;
        m.precision(17);
        m << worst.variable << " differs: " << worst.alone << " alone, " << worst.batched << " in the batch (order "
          << worst.order << ", element " << worst.index << ", "
          << (worst.item == n_ ? std::string("summed over the batch") : "item " + std::to_string(worst.item)) << ")";
        report_.message = m.str();
    }
    const Order& order =
        *std::find_if(orders_.begin(), orders_.end(), [&](const Order& o) { return o.name == worst.order; });
    if (forward)
        localize_forward(order);
    else
        localize_backward(order);
    return report_;
}

template <class T>
void Checker<T>::localize_forward(const Order& order) {
    auto batch = execute(order.items, true);
    std::vector<std::unique_ptr<Execution<T>>> alone;
    for (std::size_t i = 0; i < n_; ++i) alone.push_back(execute({i}, false));
    for (std::size_t j = 0; j < plan_->nodes.size(); ++j) {
        const PlanNode& node = plan_->nodes[j];
        const Value b = batch->value(static_cast<int>(j));
        for (std::size_t p = 0; p < n_; ++p) {
            if (!differs(alone[order.items[p]]->value(static_cast<int>(j)), b, p, node)) continue;
            report_.pass = "forward";
            report_.first_differing_node = node.node->label();
            report_.first_differing_op = node.node->op ? node.node->op->name() : report_.first_differing_node;
            report_.message += "; the first node whose value differs is " + report_.first_differing_node + " (item " +
                               std::to_string(order.items[p]) + ", order " + order.name + ")";
            return;
        }
    }
}

template <class T>
void Checker<T>::localize_backward(const Order& order) {
    std::vector<int> all = wrt_;  // every node with a batch axis, and the parameters asked for
    for (std::size_t j = 0; j < plan_->nodes.size(); ++j)
        if (plan_->nodes[j].type.axis.is_dynamic() &&
            std::find(all.begin(), all.end(), static_cast<int>(j)) == all.end())
            all.push_back(static_cast<int>(j));
    std::sort(all.begin(), all.end());
    auto batch = execute(order.items, true);
    backward(*batch, order.items, all);
    std::vector<std::unique_ptr<Execution<T>>> alone;
    for (std::size_t i = 0; i < n_; ++i) {
        alone.push_back(execute({i}, false));
        backward(*alone.back(), {i}, all);
    }
    // The op whose backward wrote a gradient: the consumers of that node.
    auto blame = [&](std::size_t j, const std::string& where) {
        std::string ops, labels;
        for (const PlanNode& k : plan_->nodes)
            if (std::find(k.inputs.begin(), k.inputs.end(), static_cast<int>(j)) != k.inputs.end()) {
                ops += (ops.empty() ? "" : ", ") + k.node->op->name();
                labels += (labels.empty() ? "" : ", ") + k.node->label();
            }
        report_.pass = "backward";
        report_.first_differing_op = ops;
        report_.first_differing_node = labels;
        report_.message += "; going backward from the outputs, the first gradient that differs is that of " +
                           plan_->nodes[j].node->label() + where + ", written by the backward of " + labels;
    };
    // Walking from the outputs: a node's gradient is final once every consumer's backward ran.
    for (std::size_t j = plan_->nodes.size(); j-- > 0;) {
        const PlanNode& node = plan_->nodes[j];
        if (!node.type.axis.is_dynamic()) continue;
        const Value b = batch->gradient(static_cast<int>(j));
        for (std::size_t p = 0; p < n_; ++p)
            if (differs(alone[order.items[p]]->gradient(static_cast<int>(j)), b, p, node)) {
                blame(j, " (item " + std::to_string(order.items[p]) + ", order " + order.name + ")");
                return;
            }
    }
    // Every per-item gradient agrees: a parameter's sum differs.
    for (int w : wrt_)
        if (report_.gradients.variable == "gradient of " + plan_->nodes[static_cast<std::size_t>(w)].node->label()) {
            blame(static_cast<std::size_t>(w), " (summed over the batch)");
            return;
        }
}

}  // namespace

std::string InvarianceReport::str() const {
    std::ostringstream s;
    s << (ok ? "batch invariant" : "NOT BATCH INVARIANT") << " (" << items << " items, " << orders << " orders, "
      << compared << " elements compared); worst value difference " << values.difference;
    if (!values.variable.empty()) s << " (" << values.error << " of the tolerance at " << values.variable << ")";
    s << ", worst gradient difference " << gradients.difference;
    if (!gradients.variable.empty())
        s << " (" << gradients.error << " of the tolerance at " << gradients.variable << ")";
    if (!ok) s << ": " << message;
    return s.str();
}

InvarianceReport check_batch_invariance(const std::vector<Variable>& outputs, const Bindings& bindings,
                                        const InvarianceOptions& options) {
    if (outputs.empty()) throw UserError("check_batch_invariance: no outputs given");
    for (const auto& o : outputs)
        if (!o) throw UserError("check_batch_invariance: an empty Variable among the outputs");
    auto plan = compile(outputs);
    const DTypeRequest asked = DTypeRequest::given_or_exact(options.precision);
    return run_dtype(plan_parameters(*plan), bindings, asked, "check_batch_invariance") == DType::f64
               ? Checker<double>(std::move(plan), bindings, options).run()
               : Checker<float>(std::move(plan), bindings, options).run();
}

}  // namespace loom
