// "Padding never leaks": each sequence's outputs and gradients are the same whether it is evaluated
// alone or inside a batch with longer and shorter sequences, in any order, with NaN written into the
// padding of the batch's storage.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::random_tensor;

namespace {

struct Inputs {
    Variable x = sequence::input_variable({2}, "x");
    Variable v = input_variable({2}, "v");  // one row per sequence
    Parameter w = parameter(random_tensor({2, 2}, 1, -0.9, 0.9), "W");
    Parameter col = parameter(random_tensor({2, 1}, 2), "w_col");
};

struct Built {
    Variable out;
    std::vector<Variable> wrt;
};

struct Case {
    const char* name;
    std::function<Built(Inputs&)> build;
};

Variable rnn(Inputs& s, bool forward, const Variable& init) {
    Variable p = placeholder({2}, "h_prev");
    Variable h = tanh(times(s.x, s.w) + (forward ? past_value(p, init) : future_value(p, init)));
    h.replace_placeholders({{p, h}});
    return h;
}

const std::vector<Case> cases = {
    {"is_first",
     [](Inputs& s) {
         return Built{s.x * sequence::is_first(s.x), {s.x}};
     }},
    {"is_last",
     [](Inputs& s) {
         return Built{s.x * sequence::is_last(s.x), {s.x}};
     }},
    {"first",
     [](Inputs& s) {
         return Built{sequence::first(s.x), {s.x}};
     }},
    {"last",
     [](Inputs& s) {
         return Built{sequence::last(s.x), {s.x}};
     }},
    {"slice",
     [](Inputs& s) {
         return Built{sequence::slice(s.x, -2, 0), {s.x}};
     }},
    {"slice from the start",
     [](Inputs& s) {
         return Built{exp(sequence::slice(s.x, 0, 2)), {s.x}};
     }},
    {"broadcast_as",
     [](Inputs& s) {
         return Built{sequence::broadcast_as(s.v, s.x) * s.x, {s.x, s.v}};
     }},
    {"reduce_sum",
     [](Inputs& s) {
         return Built{sequence::reduce_sum(s.x), {s.x}};
     }},
    {"reduce_max",
     [](Inputs& s) {
         return Built{sequence::reduce_max(s.x), {s.x}};
     }},
    {"reduce_mean",
     [](Inputs& s) {
         return Built{sequence::reduce_mean(s.x), {s.x}};
     }},
    {"softmax",
     [](Inputs& s) {
         return Built{sequence::softmax(s.x) * s.x, {s.x}};
     }},
    {"length",
     [](Inputs& s) {
         return Built{sequence::length(s.x) * sequence::reduce_sum(s.x), {s.x}};
     }},
    {"gather",
     [](Inputs& s) {
         Variable cond = sequence::is_last(s.x) + greater(times(s.x, s.col), constant(0.0));
         return Built{sequence::gather(s.x * s.x, cond), {s.x}};
     }},
    {"unpack data",
     [](Inputs& s) {
         return Built{sequence::unpack(s.x, 0.5).data, {s.x}};
     }},
    {"unpack mask",
     [](Inputs& s) {
         return Built{sequence::unpack(s.x, 0.5).mask * reduce_sum(sequence::reduce_sum(s.x)), {s.x}};
     }},
    {"past_value",
     [](Inputs& s) {
         return Built{past_value(s.x, s.v, 2) * s.x, {s.x, s.v}};
     }},
    {"future_value",
     [](Inputs& s) {
         return Built{future_value(s.x, 0.7, 1) * s.x, {s.x}};
     }},
    {"element-wise",
     [](Inputs& s) {
         return Built{log_add_exp(tanh(s.x * s.x + s.v), s.x), {s.x, s.v}};
     }},
    {"times",
     [](Inputs& s) {
         return Built{times(s.x, s.w), {s.x, s.w}};
     }},
    {"rnn loop (past)",
     [](Inputs& s) {
         return Built{rnn(s, true, s.v), {s.x, s.w, s.v}};
     }},
    {"rnn loop (future), last",
     [](Inputs& s) {
         return Built{sequence::last(rnn(s, false, 0.0)), {s.x, s.w}};
     }},
    {"softmax of a loop",
     [](Inputs& s) {
         return Built{sequence::reduce_sum(sequence::softmax(rnn(s, true, 0.0)) * s.x), {s.x, s.w}};
     }},
};

struct Result {
    Value out;
    std::vector<Value> grads;
};

// The batch of the given sequences, stored padded with NaN in the padding.
Value nan_padded(const std::vector<xt::xarray<double>>& seqs) {
    std::vector<std::size_t> lengths;
    for (const auto& s : seqs) lengths.push_back(s.shape()[0]);
    auto layout = std::make_shared<const SequenceLayout>(lengths);
    const std::size_t n_seq = seqs.size(), row = 2;
    xt::xarray<double> data = xt::zeros<double>({layout->max_length(), n_seq, row});
    std::fill(data.begin(), data.end(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t n = 0; n < n_seq; ++n)
        for (std::size_t t = 0; t < lengths[n]; ++t)
            for (std::size_t j = 0; j < row; ++j) data(t, n, j) = seqs[n](t, j);
    return Value::time_major_sequences(std::move(data), layout);
}

Result run(const Case& c, const std::vector<xt::xarray<double>>& seqs, const xt::xarray<double>& rows) {
    Inputs s;
    Built b = c.build(s);
    Bindings in{{s.x, nan_padded(seqs)}};
    if (std::find(b.wrt.begin(), b.wrt.end(), s.v) != b.wrt.end()) in[s.v] = Value::batch(rows);
    Result r;
    r.out = evaluate({b.out}, in)[b.out];
    auto g = gradients(b.out, in, b.wrt);
    for (const auto& w : b.wrt) r.grads.push_back(g[w]);
    return r;
}

// Item i of a value with dynamic axes, flattened.
std::vector<double> item(const Value& v, std::size_t i) {
    xt::xarray<double> a =
        v.kind() == Value::Kind::Sequence ? v.sequence<double>(i) : xt::xarray<double>(v.rows<double>());
    if (v.kind() == Value::Kind::Sequence) return {a.begin(), a.end()};
    const std::size_t row = a.size() / a.shape()[0];
    return {a.data() + i * row, a.data() + (i + 1) * row};
}

// `got` (from the batch) matches `want` (alone). A batch value may be longer (unpack's T_max): its
// extra tail must then be finite.
void check_item(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
    INFO(what);
    REQUIRE(got.size() >= want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
        REQUIRE(std::isfinite(got[k]));
        CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-10).scale(1.0));
    }
    for (std::size_t k = want.size(); k < got.size(); ++k) CHECK(std::isfinite(got[k]));
}

}  // namespace

TEST_CASE("padding never leaks: each sequence alone equals the same sequence inside any batch") {
    // Lengths 1, 3, 7 plus a 5 and a 2 that only appear as neighbours.
    const auto seqs = random_sequences({2}, {1, 3, 7, 5, 2}, 77);
    const xt::xarray<double> rows = random_rows({2}, 5, 78);
    const std::vector<std::vector<std::size_t>> orders{{0, 1, 2}, {0, 2, 1}, {1, 0, 2},       {1, 2, 0},
                                                       {2, 0, 1}, {2, 1, 0}, {3, 0, 4, 2, 1}, {1, 1, 2}};
    for (const Case& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        std::vector<Result> alone;
        for (std::size_t k = 0; k < 3; ++k) {
            xt::xarray<double> row = xt::zeros<double>({std::size_t{1}, std::size_t{2}});
            for (std::size_t j = 0; j < 2; ++j) row(0, j) = rows(k, j);
            alone.push_back(run(c, {seqs[k]}, row));
        }
        for (const auto& order : orders) {
            std::vector<xt::xarray<double>> batch;
            xt::xarray<double> batch_rows = xt::zeros<double>({order.size(), std::size_t{2}});
            for (std::size_t i = 0; i < order.size(); ++i) {
                batch.push_back(seqs[order[i]]);
                for (std::size_t j = 0; j < 2; ++j) batch_rows(i, j) = rows(order[i], j);
            }
            const Result r = run(c, batch, batch_rows);
            std::vector<std::vector<double>> param_sum;  // parameter gradients: the sum over the batch
            for (std::size_t i = 0; i < order.size(); ++i) {
                if (order[i] >= 3) continue;  // a neighbour only
                const Result& a = alone[order[i]];
                check_item(item(r.out, i), item(a.out, 0), "output of sequence " + std::to_string(order[i]));
                for (std::size_t w = 0; w < r.grads.size(); ++w) {
                    if (r.grads[w].kind() == Value::Kind::Static) continue;
                    check_item(item(r.grads[w], i), item(a.grads[w], 0),
                               "gradient " + std::to_string(w) + " of sequence " + std::to_string(order[i]));
                }
            }
            if (order.size() == 3 &&
                std::is_permutation(order.begin(), order.end(), std::vector<std::size_t>{0, 1, 2}.begin()))
                for (std::size_t w = 0; w < r.grads.size(); ++w) {
                    if (r.grads[w].kind() != Value::Kind::Static) continue;
                    xt::xarray<double> got = r.grads[w].tensor<double>(), want = xt::zeros<double>(got.shape());
                    for (const auto& a : alone) want += a.grads[w].tensor<double>();
                    check_item({got.begin(), got.end()}, {want.begin(), want.end()}, "parameter gradient");
                }
        }
    }
}
