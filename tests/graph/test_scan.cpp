// Fused scans: a loop r = op(z, element_select(cond, c, delay(r))) runs as one scan over time.
// Its values and gradients must equal the step-by-step loop's: the same recurrence written with
// the operands swapped (op(s, z), which compile does not fuse) is the reference.
#include "gradcheck.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

using BinaryFn = Variable (*)(const Variable&, const Variable&, const std::string&);

struct Recurrence {
    Variable fused, stepwise;
};

// r = op(z, element_select(edge(z), c, delay(r))) and the same with op's operands swapped.
Recurrence build(BinaryFn op, const Variable& z, const Variable& c, const Variable& init, bool backwards) {
    auto one = [&](bool swap) {
        Variable p = placeholder(z.shape(), "p");
        Variable edge = backwards ? sequence::is_last(z) : sequence::is_first(z);
        Variable delayed = backwards ? future_value(p, init) : past_value(p, init);
        Variable s = element_select(edge, c, delayed);
        Variable r = swap ? op(s, z, {}) : op(z, s, {});
        r.replace_placeholders({{p, r}});
        return r;
    };
    return {one(false), one(true)};
}

// compile rewrote the loop into one node of the fused scan op, and no loop is left.
bool is_scan(const Variable& out) {
    auto plan = compile({out});
    bool scan = false, loop = false;
    for (const auto& pn : plan->nodes) scan |= pn.node->op && pn.node->op->name().find("_scan(") != std::string::npos;
    for (const auto& step : plan->steps) loop |= step.is_loop;
    return scan && !loop;
}

}  // namespace

TEST_CASE("fused scans equal the step-by-step loop in values and gradients") {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(random_tensor({2, 3}, 1), "w");
    Parameter c = parameter(xt::xarray<float>{0.1f, -0.2f, 0.3f}, "c");
    Variable rows = input_variable({3}, "init_rows");
    Variable z = times(x, w);
    Bindings in{{x, Value::sequences(random_sequences({2}, {1, 3, 7}, 2))},
                {rows, Value::batch(random_rows({3}, 3, 3))}};
    struct Case {
        const char* name;
        BinaryFn op;
        Variable c, init;
        bool backwards;
    };
    const std::vector<Case> cases{
        {"log_add_exp, past, the seed's -1e30", log_add_exp, constant(-1e30), Variable(0.0), false},
        {"plus, future, parameter c", plus, c, Variable(0.0), true},
        {"element_max, past, per-sequence initial state", element_max, c, rows, false},
        {"log_add_exp, future, parameter c", log_add_exp, c, Variable(0.0), true},
    };
    for (const auto& k : cases) {
        INFO(k.name);
        auto r = build(k.op, z, k.c, k.init, k.backwards);
        CHECK(is_scan(r.fused));
        CHECK_FALSE(is_scan(r.stepwise));
        std::vector<Variable> wrt{w, x};
        if (k.c.is_parameter()) wrt.push_back(k.c);
        if (k.init == rows) wrt.push_back(rows);
        for (DType precision : {DType::f64, DType::f32}) {
            auto a = evaluate({r.fused}, in, precision), b = evaluate({r.stepwise}, in, precision);
            for (std::size_t n = 0; n < 3; ++n) {
                auto va = a[r.fused].sequence<double>(n), vb = b[r.stepwise].sequence<double>(n);
                for (std::size_t e = 0; e < va.size(); ++e) CHECK(va.data()[e] == vb.data()[e]);
            }
            auto ga = gradients(r.fused, in, wrt, precision), gb = gradients(r.stepwise, in, wrt, precision);
            for (const auto& v : wrt) {
                auto ta = ga[v].tensor<double>(), tb = gb[v].tensor<double>();
                for (std::size_t e = 0; e < ta.size(); ++e)
                    CHECK(ta.data()[e] == doctest::Approx(tb.data()[e]).epsilon(1e-12));
            }
        }
        require_gradients(k.name, r.fused, in, wrt);
    }
}

TEST_CASE("a loop whose select or delay is used outside it runs step by step") {
    Variable x = sequence::input_variable({1}, "x");
    Variable p = placeholder({1}, "p");
    Variable d = past_value(p);
    Variable r = log_add_exp(x, element_select(sequence::is_first(x), constant(-1e30), d));
    r.replace_placeholders({{p, r}});
    CHECK(is_scan(r));
    CHECK_FALSE(is_scan(r + d));  // d is read outside the loop: not fused, still correct
    Bindings in{{x, Value::sequences(random_sequences({1}, {1, 3, 7}, 4))}};
    require_gradients("not fused", r + d, in, {x});
}
