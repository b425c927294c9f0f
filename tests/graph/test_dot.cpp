// to_dot: a recurrence is drawn as a cluster holding exactly the loop's members, the edge out of
// past_value is dashed and no other edge is, and every node carries its shape.
#include <doctest/doctest.h>

#include <regex>

#include <loom.hpp>

#include "test_support.hpp"

using namespace loom;

namespace {
using loom::testing::occurrences;

// The text of the first cluster, from its opening line to its closing brace.
std::string first_cluster(const std::string& dot) {
    const auto begin = dot.find("subgraph cluster");
    REQUIRE(begin != std::string::npos);
    return dot.substr(begin, dot.find("\n  }", begin) - begin);
}

}  // namespace

TEST_CASE("to_dot: a running sum loop is a cluster with a dashed delay edge and shapes on nodes") {
    // h_t = tanh(x_t W + h_{t-1}): the loop is {plus, tanh, past_value}; times and W stay outside.
    Variable x = sequence::input_variable({3}, "x");
    Parameter w = parameter({3, 4}, glorot_uniform(), "w_in");
    Variable h_prev = placeholder({4}, "h_prev");
    Variable xw = times(x, w, "xw");
    Variable h = tanh(xw + past_value(h_prev), "h");
    h.replace_placeholders({{h_prev, h}});
    Variable out = sequence::last(h, "last_h");

    const std::string dot = to_dot({out});
    CHECK(dot.rfind("digraph", 0) == 0);
    CHECK(dot.back() == '\n');
    CHECK(occurrences(dot, "subgraph cluster") == 1);
    const std::string cluster = first_cluster(dot);
    CHECK(cluster.find("past_value") != std::string::npos);
    CHECK(cluster.find("tanh") != std::string::npos);
    CHECK(cluster.find("w_in") == std::string::npos);  // the weight and the input product are outside
    CHECK(cluster.find("xw") == std::string::npos);
    CHECK(cluster.find("forward (past_value)") != std::string::npos);

    // One dashed edge: tanh -> past_value (the value carried to the next step).
    CHECK(occurrences(dot, "style=dashed") == 1);
    std::smatch m;
    REQUIRE(std::regex_search(dot, m, std::regex("n(\\d+) -> n(\\d+) \\[style=dashed")));
    const std::regex node_of(R"re((n\d+) \[label="([^"]*)")re");
    std::map<std::string, std::string> labels;
    for (auto it = std::sregex_iterator(dot.begin(), dot.end(), node_of); it != std::sregex_iterator(); ++it)
        labels[(*it)[1]] = (*it)[2];
    CHECK(labels["n" + std::string(m[1])].find("tanh") == 0);
    CHECK(labels["n" + std::string(m[2])].find("past_value") == 0);

    // Shapes and axes: the weight [3, 4] without a dynamic axis, the input [3] on a sequence axis, the
    // output [4] on the batch axis and drawn with a double border.
    bool weight_seen = false, input_seen = false;
    for (const auto& [id, label] : labels) {
        if (label.find("w_in") != std::string::npos) {
            weight_seen = true;
            CHECK(label.find("[3, 4]") != std::string::npos);
            CHECK(label.find(" x ") == std::string::npos);
        }
        if (label.rfind("input", 0) == 0) {
            input_seen = true;
            CHECK(label.find("[3] x seq#") != std::string::npos);
        }
    }
    CHECK(weight_seen);
    CHECK(input_seen);
    CHECK(occurrences(dot, "peripheries=2") == 1);
    CHECK(std::regex_search(dot, std::regex(R"(label="sequence[^"]*last_h\\n\[4\] x batch"[^\n]*peripheries=2)")));
}

TEST_CASE("to_dot: a graph without loops has no cluster and no dashed edge -- names are escaped") {
    Variable a = input_variable({2}, "say \"a\"");
    Variable b = a * a;
    const std::string dot = to_dot({b});
    CHECK(occurrences(dot, "subgraph") == 0);
    CHECK(occurrences(dot, "dashed") == 0);
    CHECK(dot.find(R"(say \"a\")") != std::string::npos);
    CHECK(occurrences(dot, " -> ") == 2);  // a feeds the product twice
}

TEST_CASE("to_dot: a future_value loop is labelled as running backward") {
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "next");
    Variable r = x + future_value(p);
    r.replace_placeholders({{p, r}});
    const std::string dot = to_dot({r});
    CHECK(first_cluster(dot).find("backward (future_value)") != std::string::npos);
    CHECK(occurrences(dot, "style=dashed") == 1);
}
