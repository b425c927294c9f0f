#pragma once
/// \file
/// Graphviz DOT for a graph, for looking at a model rather than reading its code. Each node shows
/// what it is (op, input, parameter, constant), its name and its sample shape and dynamic axis; a
/// recurrence loop (as compile() finds it) is drawn as one cluster, and the edge out of each
/// past_value/future_value is dashed: that is where a value crosses from one time step to the next.
/// Render with `dot -Tsvg graph.dot -o graph.svg`.
#include <string>
#include <vector>

#include "graph/variable.hpp"

namespace loom {

/// The graph that computes `outputs` (drawn with a double border). Throws what compile() throws for
/// a graph that cannot run (e.g. a placeholder left unbound).
std::string to_dot(const std::vector<Variable>& outputs);

}  // namespace loom
