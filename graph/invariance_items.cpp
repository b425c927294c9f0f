#include "graph/invariance_items.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

namespace loom::invariance {

Piece piece_of(const Value& v, std::size_t position) {
    Piece p;
    if (v.kind() == Value::Kind::Sequence) {
        xt::xarray<double> a = v.sequence<double>(position);
        p.shape.assign(a.shape().begin(), a.shape().end());
        p.data.assign(a.begin(), a.end());
        return p;
    }
    xt::xarray<double> a = v.tensor<double>();
    p.shape.assign(a.shape().begin(), a.shape().end());
    if (v.kind() == Value::Kind::Batch) {
        p.shape.erase(p.shape.begin());
        const std::size_t row = v.sample_shape().size();
        p.data.assign(a.data() + position * row, a.data() + (position + 1) * row);
    } else {
        p.data.assign(a.begin(), a.end());
    }
    return p;
}

xt::xarray<double> row_of(const Value& v, std::size_t position) {
    Piece p = piece_of(v, position);
    xt::xarray<double> a = xt::zeros<double>(p.shape);
    std::copy(p.data.begin(), p.data.end(), a.begin());
    return a;
}

std::string shape_str(const std::vector<std::size_t>& s) { return Shape(s).str(); }

std::vector<char> growable_axes(const PlanNode& n) {
    std::vector<char> grow;
    if (n.type.axis.is_sequence()) grow.push_back(0);
    for (std::size_t d : n.type.shape) grow.push_back(d == 0);
    return grow;
}

double relative_error(double alone, double batched, const InvarianceOptions& o) {
    if (alone == batched || (std::isnan(alone) && std::isnan(batched))) return 0;
    if (!std::isfinite(alone) || !std::isfinite(batched)) return INFINITY;
    const double tol = o.absolute_tolerance + o.relative_tolerance * std::max(std::abs(alone), std::abs(batched));
    return std::abs(alone - batched) / tol;
}

std::vector<Order> batch_orders(std::size_t n, const InvarianceOptions& o) {
    std::vector<Order> orders{{"given", std::vector<std::size_t>(n)}};
    std::iota(orders[0].items.begin(), orders[0].items.end(), std::size_t{0});
    if (n < 2) return orders;
    orders.push_back({"reversed", {orders[0].items.rbegin(), orders[0].items.rend()}});
    std::mt19937_64 rng(o.seed);
    for (std::size_t s = 0; n > 2 && s < o.shuffles; ++s) {
        Order shuffled{"shuffled " + std::to_string(s + 1), orders[0].items};
        std::shuffle(shuffled.items.begin(), shuffled.items.end(), rng);
        orders.push_back(std::move(shuffled));
    }
    return orders;
}

namespace {
Value nan_padded_sequences(const std::vector<xt::xarray<double>>& seqs) {
    Value v = Value::sequences(seqs);
    const SequenceLayout& layout = v.layout();
    const std::size_t row = v.sample_shape().size(), n = layout.num_sequences();
    double* data = v.data<double>().data();
    for (std::size_t t = 0; t < layout.max_length(); ++t)
        for (std::size_t s = 0; s < n; ++s)
            if (!layout.valid(t, s))
                std::fill_n(data + (t * n + s) * row, row, std::numeric_limits<double>::quiet_NaN());
    return v;
}
}  // namespace

Bindings bind_items(const std::vector<SplitInput>& inputs, const std::vector<std::size_t>& items, bool nan_padding) {
    Bindings b;
    for (const auto& in : inputs) {
        if (in.items.empty()) {
            b[in.var] = in.shared;
            continue;
        }
        if (in.is_sequence) {
            std::vector<xt::xarray<double>> seqs;
            for (std::size_t i : items) seqs.push_back(in.items[i]);
            b[in.var] = nan_padding ? nan_padded_sequences(seqs) : Value::sequences(seqs);
            continue;
        }
        std::vector<std::size_t> dims{items.size()};
        dims.insert(dims.end(), in.sample.begin(), in.sample.end());
        xt::xarray<double> rows = xt::zeros<double>(dims);
        const std::size_t row = in.sample.size();
        for (std::size_t p = 0; p < items.size(); ++p)
            std::copy(in.items[items[p]].begin(), in.items[items[p]].end(), rows.data() + p * row);
        b[in.var] = Value::batch(rows);
    }
    return b;
}

}  // namespace loom::invariance
