// Every binary op and loss with one operand broadcast over a ragged batch of sequences: a
// parameter (static), a batch value (one row per sequence) or a second sequence on the same axis.
// The batch is stored with NaN in its padding; each sequence's values and input gradients must equal
// those of the sequence evaluated alone, and a parameter's gradient the sum of the alone ones, in
// float and in double. Where a local derivative is infinite at the padding (1/0, log 0), the zero
// upstream gradient there must still contribute nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;

namespace {

enum class Form { parameter, batch, sequence };
const char* form_name(Form f) { return f == Form::parameter ? "parameter" : f == Form::batch ? "batch" : "sequence"; }

struct BinaryCase {
    const char* name;
    std::function<Variable(const Variable&, const Variable&)> op;
    bool differentiable;
};

const std::vector<BinaryCase> binary_cases = {
    {"plus", [](const Variable& a, const Variable& b) { return plus(a, b); }, true},
    {"minus", [](const Variable& a, const Variable& b) { return minus(a, b); }, true},
    {"element_times", [](const Variable& a, const Variable& b) { return element_times(a, b); }, true},
    {"element_divide", [](const Variable& a, const Variable& b) { return element_divide(a, b); }, true},
    {"log_add_exp", [](const Variable& a, const Variable& b) { return log_add_exp(a, b); }, true},
    {"element_max", [](const Variable& a, const Variable& b) { return element_max(a, b); }, true},
    {"element_min", [](const Variable& a, const Variable& b) { return element_min(a, b); }, true},
    {"greater", [](const Variable& a, const Variable& b) { return greater(a, b); }, false},
    {"less", [](const Variable& a, const Variable& b) { return less(a, b); }, false},
    {"equal", [](const Variable& a, const Variable& b) { return equal(a, b); }, false},
    {"greater_equal", [](const Variable& a, const Variable& b) { return greater_equal(a, b); }, false},
    {"less_equal", [](const Variable& a, const Variable& b) { return less_equal(a, b); }, false},
    {"not_equal", [](const Variable& a, const Variable& b) { return not_equal(a, b); }, false},
    {"cosine_distance", [](const Variable& a, const Variable& b) { return cosine_distance(a, b); }, true},
    {"squared_error", [](const Variable& a, const Variable& b) { return squared_error(a, b); }, true},
    {"binary_cross_entropy", [](const Variable& a, const Variable& b) { return binary_cross_entropy(a, b); }, true},
    {"cross_entropy_with_softmax",
     [](const Variable& a, const Variable& b) { return cross_entropy_with_softmax(a, b); }, true},
    {"classification_error", [](const Variable& a, const Variable& b) { return classification_error(a, b); }, false},
};

constexpr std::size_t dim = 3;
const std::vector<std::size_t> lengths{1, 4, 7};
// Data in (0.2, 0.8): inside every op's domain (a probability for binary_cross_entropy, non-zero
// for a divisor), while the padding holds NaN and the executor's zeros give 1/0 and log 0.
const auto sequence_data = loom::testing::random_sequences({dim}, lengths, 11, 0.2, 0.8);
const auto other_sequence_data = loom::testing::random_sequences({dim}, lengths, 12, 0.2, 0.8);
const auto row_data = loom::testing::random_rows({dim}, lengths.size(), 13, 0.2, 0.8);
const auto parameter_data = loom::testing::random_tensor({dim}, 14, 0.2, 0.8);

template <class T>
Value nan_padded(const std::vector<xt::xarray<double>>& seqs) {
    std::vector<std::size_t> lens;
    for (const auto& s : seqs) lens.push_back(s.shape()[0]);
    auto layout = std::make_shared<const SequenceLayout>(lens);
    xt::xarray<T> data = xt::zeros<T>({layout->max_length(), seqs.size(), dim});
    std::fill(data.begin(), data.end(), std::numeric_limits<T>::quiet_NaN());
    for (std::size_t n = 0; n < seqs.size(); ++n)
        for (std::size_t t = 0; t < lens[n]; ++t)
            for (std::size_t j = 0; j < dim; ++j) data(t, n, j) = static_cast<T>(seqs[n](t, j));
    return Value::time_major_sequences(std::move(data), layout);
}

struct Run {
    std::vector<double> out;                 // per item, flattened, in batch order
    std::vector<std::vector<double>> grads;  // [operand] flattened: per item for dynamic ones
    std::vector<std::vector<std::size_t>> item_offsets;
};

std::vector<double> flat(const xt::xarray<double>& a) { return {a.begin(), a.end()}; }

// Runs `op` on the items `order` (indices into the data): operand `pos` in the given form, the
// other a sequence. Returns values and gradients item by item, in order.
template <class T>
struct Harness {
    const BinaryCase& c;
    Form form;
    std::size_t pos;

    std::vector<std::vector<double>> values, seq_grad, other_grad;  // per item
    std::vector<double> param_grad;

    void run(const std::vector<std::size_t>& order) {
        const SequenceAxis axis;
        Variable s = sequence::input_variable({dim}, "s", axis);
        Variable other;
        if (form == Form::parameter) {
            other = parameter(parameter_data, "p");
        } else if (form == Form::batch) {
            other = input_variable({dim}, "row");
        } else {
            other = sequence::input_variable({dim}, "s2", axis);
        }
        Variable out = pos == 0 ? c.op(other, s) : c.op(s, other);
        std::vector<xt::xarray<double>> seqs, seqs2;
        xt::xarray<T> rows = xt::zeros<T>({order.size(), dim});
        for (std::size_t i = 0; i < order.size(); ++i) {
            seqs.push_back(sequence_data[order[i]]);
            seqs2.push_back(other_sequence_data[order[i]]);
            for (std::size_t j = 0; j < dim; ++j) rows(i, j) = static_cast<T>(row_data(order[i], j));
        }
        Bindings in{{s, nan_padded<T>(seqs)}};
        if (form == Form::batch) in[other] = Value::batch(rows);
        if (form == Form::sequence) in[other] = nan_padded<T>(seqs2);
        const Value v = evaluate({out}, in)[out];
        values.clear();
        for (std::size_t i = 0; i < order.size(); ++i) values.push_back(flat(v.sequence<double>(i)));
        if (!c.differentiable) return;
        auto g = gradients(out, in, {s, other});
        seq_grad.clear();
        other_grad.clear();
        for (std::size_t i = 0; i < order.size(); ++i) {
            seq_grad.push_back(flat(g[s].sequence<double>(i)));
            if (form == Form::batch) {
                const xt::xarray<double> r = g[other].rows<double>();
                other_grad.push_back({r.data() + i * dim, r.data() + (i + 1) * dim});
            } else if (form == Form::sequence) {
                other_grad.push_back(flat(g[other].sequence<double>(i)));
            }
        }
        if (form == Form::parameter) param_grad = flat(g[other].tensor<double>());
    }
};

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
        INFO("element " << k << ": " << got[k] << " vs " << want[k]);
        REQUIRE(std::isfinite(got[k]));
        CHECK(std::abs(got[k] - want[k]) <= tol * (1.0 + std::abs(want[k])));
    }
}

template <class T>
void check_all(double tol) {
    const std::vector<std::vector<std::size_t>> orders{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
    std::size_t checked = 0;
    for (const BinaryCase& c : binary_cases)
        for (Form form : {Form::parameter, Form::batch, Form::sequence})
            for (std::size_t pos : {0, 1}) {
                const std::string what = std::string(c.name) + ", operand " + std::to_string(pos) + " a " +
                                         form_name(form) + ", " + (sizeof(T) == 4 ? "float" : "double");
                CAPTURE(what);
                std::vector<Harness<T>> alone;
                for (std::size_t k = 0; k < lengths.size(); ++k) {
                    alone.push_back(Harness<T>{c, form, pos, {}, {}, {}, {}});
                    alone.back().run({k});
                }
                for (const auto& order : orders) {
                    Harness<T> batch{c, form, pos, {}, {}, {}, {}};
                    batch.run(order);
                    std::vector<double> param_sum(dim, 0.0);
                    for (std::size_t i = 0; i < order.size(); ++i) {
                        const Harness<T>& a = alone[order[i]];
                        const std::string item = what + ", sequence of length " + std::to_string(lengths[order[i]]);
                        check_close(batch.values[i], a.values[0], tol, "value: " + item);
                        if (!c.differentiable) continue;
                        check_close(batch.seq_grad[i], a.seq_grad[0], tol, "sequence gradient: " + item);
                        if (form != Form::parameter)
                            check_close(batch.other_grad[i], a.other_grad[0], tol, "broadcast gradient: " + item);
                        else
                            for (std::size_t j = 0; j < dim; ++j) param_sum[j] += a.param_grad[j];
                        ++checked;
                    }
                    if (c.differentiable && form == Form::parameter)
                        check_close(batch.param_grad, param_sum, tol, "parameter gradient: " + what);
                }
            }
    CHECK(checked > 0);
}

}  // namespace

TEST_CASE("padding with NaN: binary ops and losses with a broadcast operand, in double") { check_all<double>(1e-12); }

TEST_CASE("padding with NaN: binary ops and losses with a broadcast operand, in float") { check_all<float>(1e-5); }
