// leaves_of: every leaf a graph depends on, through loops and bound placeholders, in creation order;
// parameters_of is its parameters; find_all_with_name the nodes of a name, ops included.
#include <doctest/doctest.h>

#include <loom.hpp>

using namespace loom;

namespace {

std::vector<std::string> names(const std::vector<Variable>& vs) {
    std::vector<std::string> out;
    for (const Variable& v : vs) out.push_back(v.name());
    return out;
}

}  // namespace

TEST_CASE("leaves_of lists inputs, parameters, constants and open placeholders once, in creation order") {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter({2, 1}, glorot_uniform(), "w");
    Variable c = constant(3.0, "c");
    Variable open = placeholder({1}, "open");
    Variable y = times(x, w) * c + times(x, w) + open;  // x and w reached twice
    CHECK(names(leaves_of({y})) == std::vector<std::string>{"x", "w", "c", "open"});
    CHECK(names(leaves_of({x})) == std::vector<std::string>{"x"});  // an output that is a leaf itself
    CHECK(leaves_of({Variable()}).empty());
}

TEST_CASE("leaves_of follows a loop closed by replace_placeholders and leaves the bound placeholder out") {
    Variable x = sequence::input_variable({1}, "x");
    Parameter s0 = parameter({1}, zeros(), "s0");
    Variable p = placeholder({1}, "p");
    Variable h = x + past_value(p, s0);
    CHECK(names(leaves_of({h})) == std::vector<std::string>{"x", "s0", "p"});
    h.replace_placeholders({{p, h}});
    CHECK(names(leaves_of({h})) == std::vector<std::string>{"x", "s0"});
    const auto ps = parameters_of({h});
    REQUIRE(ps.size() == 1);
    CHECK(ps[0] == s0);
}

TEST_CASE("find_all_with_name finds named ops and leaves, through a closed loop, in creation order") {
    Variable x = sequence::input_variable({1}, "x");
    Variable p = placeholder({1}, "p");
    Variable hidden = identity(x * 2.0, "hidden");
    Variable h = plus(hidden, past_value(p), "h");
    h.replace_placeholders({{p, h}});
    Variable out = identity(tanh(h), "hidden");  // a second node of the name
    const auto found = find_all_with_name({out}, "hidden");
    REQUIRE(found.size() == 2);
    CHECK(found[0] == hidden);
    CHECK(found[1] == out);
    REQUIRE(find_all_with_name({out}, "h").size() == 1);
    CHECK(find_all_with_name({out}, "h")[0] == h);
    CHECK(find_all_with_name({h}, "h").size() == 1);  // the loop back to h through p is walked once
    CHECK(find_all_with_name({out}, "x")[0] == x);
    CHECK(find_all_with_name({out}, "nothing").empty());
}
