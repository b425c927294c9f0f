// One table of cases drives check_gradients (finite differences, double) for every sequence op and
// both delays, alone and inside recurrence loops, on a batch of sequences of lengths 1, 3 and 7.
#include <doctest/doctest.h>

#include <functional>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::random_tensor;
using loom::testing::require_gradients;

namespace {

// What a case may use: a sequence input x [3], a per-sequence batch input v [3], and parameters.
struct Inputs {
    Variable x = sequence::input_variable({3}, "x");
    Variable v = input_variable({3}, "v");
    Parameter w = parameter(random_tensor({3, 3}, 11, -0.8, 0.8), "W");
    Parameter u = parameter(random_tensor({3, 3}, 12, -0.8, 0.8), "U");
    Parameter col = parameter(random_tensor({3, 1}, 13), "w_col");
    Parameter init = parameter(random_tensor({3}, 14), "init");
    std::vector<Variable> loop_targets;  // a placeholder's target that no output holds
};

struct Built {
    Variable out;
    std::vector<Variable> wrt;
};

struct Case {
    const char* name;
    std::function<Built(Inputs&)> build;
};

// A loop h[t] = tanh(x[t] W + delay(h)[t] U), closed through a placeholder.
Variable rnn(Inputs& s, bool forward, const Variable& initial_state) {
    Variable p = placeholder({3}, "h_prev");
    Variable prev = forward ? past_value(p, initial_state) : future_value(p, initial_state);
    Variable h = tanh(times(s.x, s.w) + times(prev, s.u));
    h.replace_placeholders({{p, h}});
    return h;
}

// A loop a[t] = x[t] W + delay(tanh(a), k)[t] U whose output is a: the delay reaches k steps back
// (or ahead) to tanh(a), which nothing outside the loop reads, so its gradient is added into only
// by the loop's own steps.
Variable reaching_loop(Inputs& s, bool forward, std::size_t k) {
    Variable p = placeholder({3}, "b_prev");
    Variable prev = forward ? past_value(p, 0.2, k) : future_value(p, 0.2, k);
    Variable a = times(s.x, s.w) + times(prev, s.u);
    Variable b = tanh(a);
    a.replace_placeholders({{p, b}});
    s.loop_targets.push_back(b);
    return a;
}

// The seed's cumulative log-sum-exp over each sequence, as a loop.
Variable log_cumsum_exp(const Variable& z) {
    Variable p = placeholder({1}, "p");
    Variable prev = element_select(sequence::is_first(z), constant(-1e30), past_value(p));
    Variable l = log_add_exp(z, prev);
    l.replace_placeholders({{p, l}});
    return l;
}

const std::vector<Case> cases = {
    {"is_first",
     [](Inputs& s) {
         return Built{s.x * (sequence::is_first(s.x) + 0.5), {s.x}};
     }},
    {"is_last",
     [](Inputs& s) {
         return Built{s.x * (sequence::is_last(s.x) + 0.5), {s.x}};
     }},
    {"first",
     [](Inputs& s) {
         return Built{sequence::first(tanh(s.x)), {s.x}};
     }},
    {"last",
     [](Inputs& s) {
         return Built{sequence::last(tanh(s.x)), {s.x}};
     }},
    {"slice [0, 2)",
     [](Inputs& s) {
         return Built{sequence::slice(s.x * s.x, 0, 2), {s.x}};
     }},
    {"slice [-2, end)",
     [](Inputs& s) {
         return Built{sequence::slice(tanh(s.x), -2, 0), {s.x}};
     }},
    {"slice then reduce",
     [](Inputs& s) {
         return Built{sequence::reduce_sum(sequence::slice(s.x, -3, 0) * s.v), {s.x, s.v}};
     }},
    {"broadcast_as batch",
     [](Inputs& s) {
         return Built{sequence::broadcast_as(s.v, s.x) * s.x, {s.x, s.v}};
     }},
    {"broadcast_as parameter",
     [](Inputs& s) {
         return Built{sequence::broadcast_as(s.init, s.x) * s.x, {s.x, s.init}};
     }},
    {"reduce_sum",
     [](Inputs& s) {
         return Built{sequence::reduce_sum(s.x * s.x), {s.x}};
     }},
    {"reduce_mean",
     [](Inputs& s) {
         return Built{sequence::reduce_mean(tanh(s.x)), {s.x}};
     }},
    {"reduce_max",
     [](Inputs& s) {
         return Built{sequence::reduce_max(s.x), {s.x}};
     }},
    {"softmax",
     [](Inputs& s) {
         return Built{sequence::softmax(times(s.x, s.w)), {s.x, s.w}};
     }},
    {"length",
     [](Inputs& s) {
         return Built{sequence::reduce_sum(s.x) * sequence::length(s.x), {s.x}};
     }},
    {"gather",
     [](Inputs& s) {
         // Keep the first step and every step whose x . w_col is positive (data-dependent).
         Variable cond = sequence::is_first(s.x) + greater(times(s.x, s.col), constant(0.0));
         return Built{sequence::gather(tanh(s.x), cond), {s.x}};
     }},
    {"unpack",
     [](Inputs& s) {
         return Built{sequence::unpack(tanh(s.x), 0.25).data, {s.x}};
     }},
    {"unpack then times",
     [](Inputs& s) {
         return Built{times(sequence::unpack(s.x, -1.0).data, s.w), {s.x, s.w}};
     }},
    {"where (no gradient through the positions)",
     [](Inputs& s) {
         // cond is 1 or 2 (a repeat count) on the first step, and 1 where x . w_col > 0.
         Variable cond = sequence::is_first(s.x) + greater(times(s.x, s.col), constant(0.0));
         Variable positions = sequence::reduce_sum(sequence::where(cond));
         return Built{s.x * sequence::broadcast_as(positions + 1.0, s.x), {s.x}};
     }},
    {"scatter of gather",
     [](Inputs& s) {
         Variable cond = sequence::is_first(s.x) + greater(times(s.x, s.col), constant(0.0));
         return Built{sequence::scatter(tanh(sequence::gather(s.x, cond)), cond) * s.x, {s.x}};
     }},
    {"to_sequence of unpack",
     [](Inputs& s) {
         Variable back = to_sequence(sequence::unpack(tanh(s.x), 0.5).data, sequence::length(s.x));
         return Built{back * back, {s.x}};
     }},
    {"to_sequence to length 1",
     [](Inputs& s) {
         Variable ones = sequence::length(sequence::slice(s.x, -1, 0));
         return Built{to_sequence(times(sequence::unpack(s.x).data, s.w), ones), {s.x, s.w}};
     }},
    {"batch::reduce_sum",
     [](Inputs& s) {
         return Built{batch::reduce_sum(s.v * sequence::reduce_sum(s.x)), {s.x, s.v}};
     }},
    {"batch::reduce_mean",
     [](Inputs& s) {
         return Built{batch::reduce_mean(tanh(s.v) * sequence::last(s.x)), {s.x, s.v}};
     }},
    {"batch::reduce_max",
     [](Inputs& s) {
         return Built{batch::reduce_max(sequence::reduce_mean(s.x) + s.v), {s.x, s.v}};
     }},
    {"batch::softmax",
     [](Inputs& s) {
         return Built{batch::softmax(times(sequence::reduce_sum(s.x) + s.v, s.w)), {s.x, s.v, s.w}};
     }},
    {"batch::broadcast_as of a reduction",
     [](Inputs& s) {
         return Built{batch::broadcast_as(batch::reduce_sum(s.v * s.v), s.v) * tanh(s.v), {s.v}};
     }},
    {"batch::broadcast_as of a parameter",
     [](Inputs& s) {
         return Built{batch::broadcast_as(s.init, s.v) * sequence::first(s.x), {s.x, s.v, s.init}};
     }},
    {"listwise softmax loss over the batch",
     [](Inputs& s) {
         // Scores of the N items from their sequences; the positive is the item s.v marks most.
         Variable scores = times(sequence::reduce_mean(tanh(times(s.x, s.w))), s.col);
         Variable target = batch::softmax(s.v * 5.0);  // soft labels summing to 1 over the batch
         return Built{negate(batch::reduce_sum(slice(target, 0, 0, 1) * log(batch::softmax(scores)))),
                      {s.x, s.w, s.col, s.v}};
     }},
    {"past_value",
     [](Inputs& s) {
         return Built{past_value(s.x, 0.3) * s.x, {s.x}};
     }},
    {"future_value",
     [](Inputs& s) {
         return Built{future_value(s.x, 0.3) * s.x, {s.x}};
     }},
    {"past_value time_step 2, parameter state",
     [](Inputs& s) {
         return Built{past_value(s.x, s.init, 2) * s.x, {s.x, s.init}};
     }},
    {"future_value time_step 4, batch state",
     [](Inputs& s) {
         return Built{future_value(s.x, s.v, 4) * s.x, {s.x, s.v}};
     }},
    {"rnn loop (past)",
     [](Inputs& s) {
         return Built{rnn(s, true, 0.0), {s.x, s.w, s.u}};
     }},
    {"rnn loop (future)",
     [](Inputs& s) {
         return Built{rnn(s, false, 0.0), {s.x, s.w, s.u}};
     }},
    {"loop reaching 2 steps back to a member read only inside it",
     [](Inputs& s) {
         return Built{reaching_loop(s, true, 2), {s.x, s.w, s.u}};
     }},
    {"loop reaching 3 steps ahead to a member read only inside it",
     [](Inputs& s) {
         return Built{reaching_loop(s, false, 3), {s.x, s.w, s.u}};
     }},
    {"rnn loop, parameter initial state",
     [](Inputs& s) {
         return Built{sequence::last(rnn(s, true, s.init)), {s.x, s.w, s.u, s.init}};
     }},
    {"rnn loop, per-sequence initial state",
     [](Inputs& s) {
         return Built{rnn(s, true, s.v), {s.x, s.w, s.u, s.v}};
     }},
    {"seed log-sum-exp loop",
     [](Inputs& s) {
         return Built{log_cumsum_exp(times(s.x, s.col)), {s.x, s.col}};
     }},
    {"seed attention weights",
     [](Inputs& s) {
         Variable z = times(s.x, s.col);
         Variable lse = sequence::last(log_cumsum_exp(z));
         return Built{sequence::reduce_sum(exp(z - sequence::broadcast_as(lse, z)) * s.x), {s.x, s.col}};
     }},
    {"loop with is_first and broadcast_as inside",
     [](Inputs& s) {
         // Both ops read the delayed value, so they are loop members and run one step at a time.
         Variable p = placeholder({3}, "h_prev");
         Variable delayed = past_value(p);
         Variable prev = element_select(sequence::is_first(delayed), sequence::broadcast_as(s.v, delayed), delayed);
         Variable h = tanh(s.x + times(prev, s.u));
         h.replace_placeholders({{p, h}});
         return Built{sequence::reduce_max(h), {s.x, s.u, s.v}};
     }},
    {"slice of a loop's output, then a loop on the new axis",
     [](Inputs& s) {
         Variable h = rnn(s, true, 0.0);
         Variable sl = sequence::slice(h, 0, 2);
         Variable p = placeholder({3}, "acc");
         Variable acc = sl + future_value(p);
         acc.replace_placeholders({{p, acc}});
         return Built{acc, {s.x, s.w, s.u}};
     }},
};

}  // namespace

TEST_CASE("gradient check of every sequence op and delay, on lengths 1, 3 and 7") {
    for (const Case& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        Inputs s;
        Built b = c.build(s);
        Bindings in{{s.x, Value::sequences(random_sequences({3}, loom::testing::default_lengths, 21))}};
        // The per-sequence input is bound only where the graph uses it.
        for (const auto& w : b.wrt)
            if (w == s.v) in[s.v] = Value::batch(random_rows({3}, 3, 22));
        require_gradients(c.name, identity(b.out), in, b.wrt);
    }
}

TEST_CASE("gradient check of the sequence ops on a batch of one sequence and on equal lengths") {
    for (const auto& lengths : {std::vector<std::size_t>{4}, std::vector<std::size_t>{3, 3}}) {
        for (const Case& c : cases) {
            const std::string name = c.name;
            CAPTURE(name);
            Inputs s;
            Built b = c.build(s);
            Bindings in{{s.x, Value::sequences(random_sequences({3}, lengths, 31))}};
            for (const auto& w : b.wrt)
                if (w == s.v) in[s.v] = Value::batch(random_rows({3}, lengths.size(), 32));
            require_gradients(c.name, identity(b.out), in, b.wrt);
        }
    }
}
