#include "graph/dot.hpp"

#include <algorithm>
#include <sstream>

#include "graph/compile.hpp"
#include "graph/op.hpp"

namespace loom {

namespace {

// Escapes for a double-quoted DOT string; names are user text.
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out + '"';
}

std::string axis_suffix(const Axis& axis) {
    switch (axis.kind) {
        case Axis::Kind::None:
            return "";
        case Axis::Kind::Batch:
            return " x batch";
        case Axis::Kind::Sequence:
            return " x seq#" + std::to_string(axis.id);
        case Axis::Kind::Any:
            return " x ?";
    }
    return "";
}

std::string node_line(const PlanNode& pn, int index, bool is_output) {
    const Node& n = *pn.node;
    std::string what, style;
    switch (n.kind) {
        case NodeKind::Input:
            what = "input", style = "shape=invhouse, style=filled, fillcolor=\"#dbe9f6\"";
            break;
        case NodeKind::Parameter:
            what = "parameter", style = "shape=ellipse, style=filled, fillcolor=\"#fdebc8\"";
            break;
        case NodeKind::Constant:
            what = "constant", style = "shape=plaintext";
            break;
        case NodeKind::Placeholder:
            what = "placeholder", style = "shape=box, style=dotted";
            break;
        case NodeKind::Op:
            what = n.op ? n.op->name() : "op";
            style = n.op && n.op->traits().delay_direction != 0
                        ? "shape=box, style=\"rounded,filled\", fillcolor=\"#e8e8e8\""
                        : "shape=box, style=rounded";
            break;
    }
    std::string label = what;
    if (!n.name.empty() && n.name != what) label += "\n" + n.name;
    label += "\n" + pn.type.shape.str() + axis_suffix(pn.type.axis);
    std::ostringstream line;
    line << "n" << index << " [label=" << quoted(label) << ", " << style << (is_output ? ", peripheries=2" : "")
         << "];\n";
    return line.str();
}

}  // namespace

std::string to_dot(const std::vector<Variable>& outputs) {
    const auto plan = compile(outputs);
    std::ostringstream out;
    out << "digraph loom {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
        << "  edge [arrowsize=0.6];\n";
    const auto is_output = [&](int i) {
        return std::find(plan->outputs.begin(), plan->outputs.end(), i) != plan->outputs.end();
    };
    for (std::size_t s = 0; s < plan->steps.size(); ++s) {
        const PlanStep& step = plan->steps[s];
        const char* indent = step.is_loop ? "    " : "  ";
        if (step.is_loop)
            out << "  subgraph cluster_loop" << s << " {\n    label="
                << quoted(step.direction > 0 ? "loop over time, forward (past_value)"
                                             : "loop over time, backward (future_value)")
                << ";\n    style=\"rounded,dashed\";\n    color=\"#8a5a00\";\n    fontname=\"Helvetica\";\n";
        for (int m : step.members) out << indent << node_line(plan->nodes[m], m, is_output(m));
        if (step.is_loop) out << "  }\n";
    }
    for (std::size_t i = 0; i < plan->nodes.size(); ++i) {
        const Node& n = *plan->nodes[i].node;
        // A delay's first input is the value of the previous (or next) time step: the loop's back
        // edge. Its second is the initial state, an ordinary edge.
        const bool delay = n.kind == NodeKind::Op && n.op && n.op->traits().delay_direction != 0;
        const auto& inputs = plan->nodes[i].inputs;
        for (std::size_t k = 0; k < inputs.size(); ++k)
            out << "  n" << inputs[k] << " -> n" << i << (delay && k == 0 ? " [style=dashed, color=\"#8a5a00\"]" : "")
                << ";\n";
    }
    out << "}\n";
    return out.str();
}

}  // namespace loom
