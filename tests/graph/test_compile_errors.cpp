// Graphs that cannot run fail with a loom::UserError whose message names the culprit (the node, op
// or input by its name) rather than crashing or computing garbage.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;

namespace {

Bindings sequences_for(const Variable& x, const std::vector<std::size_t>& lengths = {1, 3, 7}) {
    return {{x, Value::sequences(random_sequences(x.shape(), lengths, 9))}};
}

// Runs `f`, requires a UserError, and returns its message.
template <class F>
std::string user_error(F f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("expected a loom::UserError, got another exception: " << e.what());
        return {};
    }
    FAIL("expected a loom::UserError, nothing was thrown");
    return {};
}

}  // namespace

TEST_CASE("a cycle with no delay in it") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "p");
    Variable h = tanh(x + p, "h_no_delay");
    h.replace_placeholders({{p, h}});
    const std::string msg = user_error([&] { evaluate({h}, sequences_for(x)); });
    CHECK(msg.find("no past_value/future_value") != std::string::npos);
    CHECK(msg.find("h_no_delay") != std::string::npos);
}

TEST_CASE("a loop with both past_value and future_value") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "p");
    Variable h = tanh(x + past_value(p, 0.0, 1, "back") + future_value(p, 0.0, 1, "ahead"), "h_mixed");
    h.replace_placeholders({{p, h}});
    const std::string msg = user_error([&] { evaluate({h}, sequences_for(x)); });
    CHECK(msg.find("mixes past_value and future_value") != std::string::npos);
    CHECK(msg.find("back") != std::string::npos);
    CHECK(msg.find("ahead") != std::string::npos);
}

TEST_CASE("a placeholder left unbound") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "forgotten");
    Variable h = x + past_value(p);
    const std::string msg = user_error([&] { evaluate({h}, sequences_for(x)); });
    CHECK(msg.find("forgotten") != std::string::npos);
    CHECK(msg.find("replace_placeholders") != std::string::npos);
}

TEST_CASE("an input that is not bound at evaluation") {
    Variable x = sequence::input_variable({2}, "x");
    Variable y = sequence::input_variable({2}, "unbound_input");
    Variable z = sequence::reduce_sum(x) + sequence::reduce_sum(y);
    const std::string msg = user_error([&] { evaluate({z}, sequences_for(x)); });
    CHECK(msg.find("unbound_input") != std::string::npos);
    CHECK(msg.find("not bound") != std::string::npos);
}

TEST_CASE("data of the wrong sample shape") {
    Variable x = sequence::input_variable({2}, "x_two");
    Bindings in{{x, Value::sequences(random_sequences({3}, {1, 3}, 1))}};
    const std::string msg = user_error([&] { evaluate({tanh(x)}, in); });
    CHECK(msg.find("x_two") != std::string::npos);
    CHECK(msg.find("[2]") != std::string::npos);
    CHECK(msg.find("[3]") != std::string::npos);
}

TEST_CASE("sequence operands on different sequence axes, caught when the graph is built") {
    Variable q = sequence::input_variable({2}, "question");
    Variable a = sequence::input_variable({2}, "answer");
    std::string msg = user_error([&] { (void)(q + a); });
    CHECK(msg.find("plus") != std::string::npos);
    CHECK(msg.find("different sequence axes") != std::string::npos);
    // An op that makes a new axis (slice) cannot be mixed with its input's axis either.
    msg = user_error([&] { (void)(sequence::slice(q, 0, 1) * q); });
    CHECK(msg.find("different sequence axes") != std::string::npos);
    msg = user_error([&] { (void)sequence::gather(q, sequence::is_first(a)); });
    CHECK(msg.find("sequence::gather") != std::string::npos);
    // ... and the way out: reduce, then broadcast onto the other axis.
    CHECK_NOTHROW((void)(q + sequence::broadcast_as(sequence::reduce_sum(a), q)));
}

TEST_CASE("a sequence op inside a loop that needs whole sequences") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "p");
    Variable h = tanh(x + sequence::softmax(past_value(p), "whole_seq_softmax"));
    h.replace_placeholders({{p, h}});
    const std::string msg = user_error([&] { evaluate({h}, sequences_for(x)); });
    CHECK(msg.find("whole_seq_softmax") != std::string::npos);
    CHECK(msg.find("whole sequences") != std::string::npos);
}

TEST_CASE("inputs bound to different batch sizes") {
    Variable x = sequence::input_variable({2}, "x");
    Variable v = input_variable({2}, "rows");
    Variable y = sequence::broadcast_as(v, x) * x;
    Bindings in = sequences_for(x);  // 3 sequences
    in[v] = Value::batch(random_rows({2}, 2, 3));
    const std::string msg = user_error([&] { evaluate({y}, in); });
    CHECK(msg.find("rows") != std::string::npos);
    CHECK(msg.find('2') != std::string::npos);
    CHECK(msg.find('3') != std::string::npos);
}

TEST_CASE("a delay of time_step 0") {
    Variable x = sequence::input_variable({2}, "x");
    CHECK(user_error([&] { (void)past_value(x, 0.0, 0); }).find("past_value: time_step") != std::string::npos);
    CHECK(user_error([&] { (void)future_value(x, 0.0, 0); }).find("future_value: time_step") != std::string::npos);
}

TEST_CASE("an empty batch or an empty sequence is refused where the data is made") {
    CHECK(user_error([] { (void)Value::sequences(std::vector<xt::xarray<double>>{}); }).find("at least one") !=
          std::string::npos);
    std::vector<xt::xarray<double>> with_empty{xt::zeros<double>({std::size_t{2}, std::size_t{2}}),
                                               xt::zeros<double>({std::size_t{0}, std::size_t{2}})};
    CHECK(user_error([&] { (void)Value::sequences(with_empty); }).find("sequence 1") != std::string::npos);
}

TEST_CASE("a placeholder whose target was destroyed is named as such, not as never bound") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "state");
    Variable delayed = past_value(p);
    {
        // The loop's output is the only owner of what closes the loop (the binding is weak).
        Variable h = tanh(x + delayed, "h");
        h.replace_placeholders({{p, h}});
    }
    const std::string msg = user_error([&] { evaluate({delayed}, sequences_for(x)); });
    CHECK_MESSAGE(msg.find("'state'") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("target was destroyed") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("never bound") == std::string::npos, msg);
}

// Every binding check lives in one place (Execution::bind); each public call that binds names itself
// at the start of the message, so a user reads the call they made, not "evaluate".
TEST_CASE(
    "binding errors start with the call the user made: evaluate, gradients, check_gradients, "
    "Session::forward, check_batch_invariance") {
    Variable x = sequence::input_variable({2}, "x");
    Variable v = input_variable({2}, "rows");
    Parameter w = parameter(xt::xarray<float>{0.5f, -1.0f}, "w");
    Variable loss = sequence::reduce_sum(sequence::broadcast_as(v, x) * x * w);
    const Value three_rows = Value::batch(random_rows({2}, 3, 3));
    struct BadBinding {
        const char* what;  // the check it trips, as its message says it
        Bindings in;
    };
    const std::vector<BadBinding> bad{
        {"is needed but not bound", {{v, three_rows}}},
        {"has sample shape [2] but was bound",
         {{x, Value::sequences(random_sequences({3}, {1, 3, 7}, 1))}, {v, three_rows}}},
        {"is a sequence input but was bound to a batch value", {{x, three_rows}, {v, three_rows}}},
        {"items but", {{x, sequences_for(x).at(x)}, {v, Value::batch(random_rows({2}, 2, 3))}}},
    };
    struct Caller {
        std::string name;
        std::function<void(const Bindings&)> call;
    };
    const std::vector<Caller> callers{
        {"evaluate", [&](const Bindings& in) { evaluate({loss}, in); }},
        {"gradients", [&](const Bindings& in) { gradients(loss, in, {w}); }},
        {"check_gradients", [&](const Bindings& in) { check_gradients(loss, in, {w}); }},
        {"Session::forward", [&](const Bindings& in) { Session({loss}, {w}).forward(in); }},
        {"check_batch_invariance", [&](const Bindings& in) { check_batch_invariance({loss}, in); }},
    };
    for (const Caller& c : callers)
        for (const BadBinding& b : bad) {
            CAPTURE(c.name);
            CAPTURE(b.what);
            const std::string msg = user_error([&] { c.call(b.in); });
            CHECK_MESSAGE(msg.rfind(c.name + ": ", 0) == 0, msg);
            // check_batch_invariance refuses a batch of other sizes itself, before it binds.
            if (c.name != "check_batch_invariance") CHECK_MESSAGE(msg.find(b.what) != std::string::npos, msg);
        }
    // The one binding the checks accept runs under every name.
    const Bindings good{{x, sequences_for(x).at(x)}, {v, three_rows}};
    for (const Caller& c : callers) CHECK_NOTHROW(c.call(good));
}
