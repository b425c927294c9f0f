#include "graph/compile.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>

#include "core/errors.hpp"
#include "graph/fold_products.hpp"
#include "graph/fuse_scans.hpp"
#include "graph/op.hpp"

namespace loom {

namespace {

std::string list_nodes(const std::vector<Node*>& nodes) {
    std::string s;
    for (std::size_t i = 0; i < nodes.size() && i < 12; ++i) s += (i ? ", " : "") + nodes[i]->label();
    if (nodes.size() > 12) s += ", ...";
    return s;
}

// Why placeholder `p` resolves to nothing (resolve): unbound, or bound to a node since destroyed.
std::string unresolved(const Node* p) {
    for (int hops = 0; p && p->kind == NodeKind::Placeholder && hops <= 1000; ++hops) {
        if (!p->is_bound) return "is a placeholder that was never bound: call replace_placeholders on it";
        const auto target = p->bound.lock();
        if (!target)
            return "is a placeholder whose target was destroyed (a loop is held by its output alone): keep a "
                   "Variable of the output it was bound to";
        p = target.get();
    }
    return "is a chain of more than 1000 placeholders";
}

// The inputs of a node with placeholders resolved; an unbound placeholder is an error.
std::vector<Node*> resolved_inputs(const Node* n) {
    std::vector<Node*> out;
    for (auto& in : n->inputs) {
        Node* r = resolve(in.get());
        if (!r)
            throw UserError("compile: " + in->label() + " (an input of " + n->label() + ") " + unresolved(in.get()));
        out.push_back(r);
    }
    return out;
}

struct Graph {
    std::vector<Node*> nodes;  // discovery order
    std::unordered_map<const Node*, int> id;
    std::vector<std::vector<int>> edges;  // node -> its inputs
};

Graph collect(const std::vector<Variable>& outputs) {
    Graph g;
    std::vector<Node*> stack;
    for (const auto& v : outputs) {
        if (!v) throw UserError("compile: an output is an empty Variable");
        Node* r = resolve(v.node().get());
        if (!r) throw UserError("compile: output " + v.label() + " " + unresolved(v.node().get()));
        stack.push_back(r);
    }
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        if (g.id.count(n)) continue;
        g.id[n] = static_cast<int>(g.nodes.size());
        g.nodes.push_back(n);
        for (Node* in : resolved_inputs(n)) stack.push_back(in);
    }
    g.edges.resize(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
        for (Node* in : resolved_inputs(g.nodes[i])) g.edges[i].push_back(g.id.at(in));
    return g;
}

// Tarjan's strongly connected components, iterative (graphs can be deep). Components come out
// inputs-first, which is an evaluation order.
std::vector<std::vector<int>> tarjan(const Graph& g) {
    const int n = static_cast<int>(g.nodes.size());
    std::vector<int> index(n, -1), low(n, 0);
    std::vector<bool> on_stack(n, false);
    std::vector<int> stack;
    std::vector<std::vector<int>> components;
    int counter = 0;
    struct Frame {
        int v;
        std::size_t next;
    };
    for (int root = 0; root < n; ++root) {
        if (index[root] != -1) continue;
        std::vector<Frame> call{{root, 0}};
        index[root] = low[root] = counter++;
        stack.push_back(root);
        on_stack[root] = true;
        while (!call.empty()) {
            Frame& f = call.back();
            if (f.next < g.edges[f.v].size()) {
                const int w = g.edges[f.v][f.next++];
                if (index[w] == -1) {
                    index[w] = low[w] = counter++;
                    stack.push_back(w);
                    on_stack[w] = true;
                    call.push_back({w, 0});
                } else if (on_stack[w]) {
                    low[f.v] = std::min(low[f.v], index[w]);
                }
                continue;
            }
            const int v = f.v;
            call.pop_back();
            if (!call.empty()) low[call.back().v] = std::min(low[call.back().v], low[v]);
            if (low[v] == index[v]) {
                std::vector<int> comp;
                int w;
                do {
                    w = stack.back();
                    stack.pop_back();
                    on_stack[w] = false;
                    comp.push_back(w);
                } while (w != v);
                components.push_back(std::move(comp));
            }
        }
    }
    return components;
}

bool is_delay(const Node* n) { return n->kind == NodeKind::Op && n->op->traits().delay_direction != 0; }

// Orders a loop's members for one time step: edges out of a delay reach into another time step,
// so without them the component must be acyclic.
std::vector<int> order_loop(const Graph& g, const std::vector<int>& comp) {
    std::unordered_map<int, int> pending;  // member -> number of same-step inputs not yet placed
    std::unordered_map<int, std::vector<int>> users;
    for (int m : comp) pending[m] = 0;
    for (int m : comp) {
        if (is_delay(g.nodes[m])) continue;
        for (int in : g.edges[m])
            if (pending.count(in)) {
                ++pending[m];
                users[in].push_back(m);
            }
    }
    std::vector<int> ready, order;
    for (int m : comp)
        if (pending[m] == 0) ready.push_back(m);
    std::sort(ready.begin(), ready.end(), [&](int a, int b) { return g.nodes[a]->id < g.nodes[b]->id; });
    while (!ready.empty()) {
        const int m = ready.back();
        ready.pop_back();
        order.push_back(m);
        for (int u : users[m])
            if (--pending[u] == 0) ready.push_back(u);
    }
    if (order.size() != comp.size()) {
        std::vector<Node*> stuck;
        for (int m : comp)
            if (pending[m] > 0) stuck.push_back(g.nodes[m]);
        throw UserError("compile: a cycle with no past_value/future_value in it: " + list_nodes(stuck) +
                        ". Every recurrence must pass through a delay.");
    }
    return order;
}

// The type of op node `pn` from its inputs' plan types. With `guess`, an input whose shape is not
// known yet stands in as a scalar (which broadcasts to any shape), so that a loop built on a
// placeholder() can take its shapes from its known inputs; nullopt when that does not work.
std::optional<TypeInfo> infer_type(const Plan& plan, const PlanNode& pn, bool guess) {
    std::vector<TypeInfo> in;
    for (int i : pn.inputs) {
        in.push_back(plan.nodes[i].type);
        if (in.back().shape_known) continue;
        if (!guess) return std::nullopt;
        in.back() = {Shape{}, in.back().axis};
    }
    if (!guess) return pn.node->op->infer(in);
    try {  // a guess, or an input typed from one, may not fit: then later passes tell more
        return pn.node->op->infer(in);
    } catch (const UserError&) {
        return std::nullopt;
    }
}

// Sets the plan types of a step's op nodes. A loop runs twice so that a delay sees its input's
// axis; a loop with unknown shapes is iterated to a fixed point from guesses (infer_type), then
// every member is checked against its inputs' final types.
void resolve_types(Plan& plan, const PlanStep& step) {
    bool unknown = false;
    for (int m : step.members) unknown |= !plan.nodes[m].type.shape_known;
    const std::size_t passes = !step.is_loop ? 1 : unknown ? 2 * step.members.size() + 2 : 2;
    for (std::size_t pass = 0; pass < passes; ++pass) {
        bool changed = false;
        for (int m : step.members) {
            PlanNode& pn = plan.nodes[m];
            if (pn.node->kind != NodeKind::Op) continue;
            const std::optional<TypeInfo> t = infer_type(plan, pn, unknown);
            if (!t) continue;
            changed |= !pn.type.shape_known || pn.type.shape != t->shape || !(pn.type.axis == t->axis);
            pn.type = *t;
        }
        if (unknown && !changed) break;
    }
    for (int m : step.members) {
        PlanNode& pn = plan.nodes[m];
        if (pn.node->kind != NodeKind::Op) continue;
        const std::string cannot = "compile: cannot infer the shape of " + pn.node->label() +
                                   ", which is built on a placeholder() without a shape; give that placeholder a shape";
        std::optional<TypeInfo> t;
        try {
            t = infer_type(plan, pn, false);
        } catch (const UserError& e) {
            if (!unknown) throw;
            throw UserError(cannot + " (" + e.what() + ")");
        }
        if (!t || t->shape != pn.type.shape) throw UserError(cannot);
        if (pn.node->type.shape_known && !(pn.type.shape == pn.node->type.shape))
            throw UserError("compile: " + pn.node->label() + " has shape " + pn.type.shape.str() +
                            " now that its placeholders are bound, but was built with " + pn.node->type.shape.str());
    }
}

// Gives the nodes built on a placeholder() without a shape (and such placeholders themselves) the
// types just inferred, so that shape() answers and layers can be stacked on the loop. A type, not
// traversal state: it is what the node would have had with a shaped placeholder.
void write_back_inferred_types(const Plan& plan, const Graph& g) {
    static std::mutex mutex;  // two threads compiling one graph write the same types
    std::lock_guard lock(mutex);
    for (const auto& pn : plan.nodes)
        if (!pn.node->type.shape_known) pn.node->type = pn.type;
    for (Node* n : g.nodes)
        for (auto& in : n->inputs)
            if (in->kind == NodeKind::Placeholder && !in->type.shape_known)
                in->type.shape = plan.nodes[plan.index.at(resolve(in.get()))].type.shape, in->type.shape_known = true;
}

std::shared_ptr<Plan> build_plan(const std::vector<Variable>& outputs) {
    Graph g = collect(outputs);
    auto comps = tarjan(g);
    auto plan = std::make_shared<Plan>();
    for (auto& comp : comps) {
        const bool self_loop =
            comp.size() == 1 && std::count(g.edges[comp[0]].begin(), g.edges[comp[0]].end(), comp[0]);
        PlanStep step;
        if (comp.size() > 1 || self_loop) {
            step.is_loop = true;
            std::vector<Node*> members;
            int dir = 0;
            for (int m : comp) {
                members.push_back(g.nodes[m]);
                if (const int d = is_delay(g.nodes[m]) ? g.nodes[m]->op->traits().delay_direction : 0) {
                    if (dir != 0 && d != dir)
                        throw UserError("compile: a loop mixes past_value and future_value: " + list_nodes(members) +
                                        ". A recurrence runs in one direction; split it into two loops.");
                    dir = d;
                }
            }
            std::sort(members.begin(), members.end(), [](Node* a, Node* b) { return a->id < b->id; });
            if (dir == 0)
                throw UserError("compile: a cycle with no past_value/future_value in it: " + list_nodes(members) +
                                ". Every recurrence must pass through a delay.");
            for (Node* m : members)
                if (m->kind == NodeKind::Op && !m->op->traits().step_capable)
                    throw UserError("compile: " + m->label() + " is inside a recurrence loop (" + list_nodes(members) +
                                    ") but needs whole sequences; move it out of the loop");
            step.direction = dir;
            comp = order_loop(g, comp);
        }
        const int loop_index = step.is_loop ? static_cast<int>(plan->steps.size()) : -1;
        for (int m : comp) {
            const int pi = static_cast<int>(plan->nodes.size());
            plan->index[g.nodes[m]] = pi;
            plan->nodes.push_back({g.nodes[m], {}, g.nodes[m]->type, loop_index});
            step.members.push_back(pi);
        }
        plan->steps.push_back(std::move(step));
    }
    for (auto& pn : plan->nodes)
        for (int e : g.edges[g.id.at(pn.node)]) pn.inputs.push_back(plan->index.at(g.nodes[e]));
    for (const auto& v : outputs) plan->outputs.push_back(plan->index.at(resolve(v.node().get())));

    // Resolve `Any` axes and unknown shapes (from placeholders) now that the graph is closed.
    for (const auto& step : plan->steps) {
        resolve_types(*plan, step);
        if (step.is_loop) {
            const Axis& axis = plan->nodes[step.members.front()].type.axis;
            for (int m : step.members)
                if (!plan->nodes[m].type.axis.is_sequence() || !(plan->nodes[m].type.axis == axis))
                    throw UserError("compile: recurrence loop member " + plan->nodes[m].node->label() + " is on the " +
                                    plan->nodes[m].type.axis.str() + ", not on the loop's " + axis.str());
        }
    }
    for (auto& pn : plan->nodes)
        if (pn.type.axis.kind == Axis::Kind::Any)
            throw UserError("compile: cannot tell the dynamic axes of " + pn.node->label() +
                            " (it depends only on unbound placeholders)");

    write_back_inferred_types(*plan, g);
    for (Node* n : g.nodes) plan->keep_alive.push_back(n->shared_from_this());
    fold_embedding_products(*plan);
    fold_attention_rows(*plan);
    fuse_scans(*plan);
    return plan;
}

}  // namespace

std::shared_ptr<const Plan> compile(const std::vector<Variable>& outputs) { return build_plan(outputs); }

void renumber_plan(Plan& plan, std::vector<PlanNode> nodes, const std::vector<int>& moved,
                   const std::vector<Node*>& replaced) {
    for (auto& pn : nodes)
        for (int& i : pn.inputs) i = moved[static_cast<std::size_t>(i)];
    for (int& o : plan.outputs) o = moved[static_cast<std::size_t>(o)];
    // Every node found before keeps its answer where its plan node stays: an earlier pass's
    // replaced nodes too, which a later pass renumbering the plan must not forget.
    std::unordered_map<const Node*, int> index;
    for (const auto& [node, i] : plan.index)
        if (const int to = moved[static_cast<std::size_t>(i)]; to >= 0) index[node] = to;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        index[nodes[i].node] = static_cast<int>(i);
        if (replaced[i]) index[replaced[i]] = static_cast<int>(i);
    }
    plan.index = std::move(index);
    plan.nodes = std::move(nodes);
}

}  // namespace loom
