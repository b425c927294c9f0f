#include "graph/generators.hpp"

#include <algorithm>
#include <unordered_set>

#include "graph/op.hpp"

namespace loom {

std::vector<Rng*> random_generators(const std::vector<Variable>& outputs) {
    std::vector<Node*> stack;
    for (const auto& v : outputs) stack.push_back(v.node().get());
    std::unordered_set<Node*> seen;
    std::vector<Node*> random;
    while (!stack.empty()) {
        Node* n = resolve(stack.back());
        stack.pop_back();
        if (!n || !seen.insert(n).second) continue;
        if (n->op && n->op->traits().generator) random.push_back(n);
        for (const auto& in : n->inputs) stack.push_back(in.get());
    }
    std::sort(random.begin(), random.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
    std::vector<Rng*> found;
    for (Node* n : random)
        if (Rng* g = n->op->traits().generator; std::find(found.begin(), found.end(), g) == found.end())
            found.push_back(g);
    return found;
}

}  // namespace loom
