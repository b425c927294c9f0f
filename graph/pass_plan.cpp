#include "graph/pass_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "graph/op.hpp"

namespace loom {

namespace {

void add_once(std::vector<int>& list, int x) {
    if (std::find(list.begin(), list.end(), x) == list.end()) list.push_back(x);
}

// Nodes that depend on a wrt node and so lie on a path from one to an output.
std::vector<char> depends_on(const Plan& plan, const std::vector<char>& is_wrt) {
    std::vector<char> needs = is_wrt;
    for (bool changed = true; changed;) {  // loops' back edges settle in a second pass
        changed = false;
        for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
            if (needs[i]) continue;
            for (int j : plan.nodes[i].inputs)
                if (needs[static_cast<std::size_t>(j)]) {
                    needs[i] = 1;
                    changed = true;
                    break;
                }
        }
    }
    return needs;
}

// A parameter matrix that gets a gradient, whose every consumer is an op outside loops (loop ops
// get their outside gradients in bulk, densely) that adds into it by rows.
bool rows_only(const Plan& plan, std::size_t i, const std::vector<char>& needs) {
    const PlanNode& p = plan.nodes[i];
    if (!needs[i] || p.node->kind != NodeKind::Parameter || p.type.shape.rank() < 2) return false;
    bool any = false;
    for (const auto& pn : plan.nodes)
        for (std::size_t j = 0; j < pn.inputs.size(); ++j) {
            if (pn.inputs[j] != static_cast<int>(i)) continue;
            if (pn.node->kind != NodeKind::Op || pn.loop >= 0 || !pn.node->op->traits().writes_gradient_rows(j))
                return false;
            any = true;
        }
    return any;
}

// alias_of (see PassSchedule): both must be pooled gradients of ops outside loops, with equal
// shapes, and the consumer not itself an alias.
std::vector<int> gradient_aliases(const Plan& plan, const PassSchedule& bp) {
    const std::size_t n = plan.nodes.size();
    std::vector<int> uses(n, 0), consumer(n, -1);
    std::vector<std::size_t> position(n, 0);
    for (std::size_t k = 0; k < n; ++k)
        for (std::size_t p = 0; p < plan.nodes[k].inputs.size(); ++p) {
            const auto j = static_cast<std::size_t>(plan.nodes[k].inputs[p]);
            ++uses[j];
            consumer[j] = static_cast<int>(k);
            position[j] = p;
        }
    auto pooled = [&](std::size_t i) {
        return bp.needs_grad[i] && !bp.keep_grad[i] && plan.nodes[i].node->kind == NodeKind::Op;
    };
    std::vector<char> candidate(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
        if (uses[j] != 1 || !pooled(j) || plan.nodes[j].loop >= 0) continue;
        const auto k = static_cast<std::size_t>(consumer[j]);
        candidate[j] = pooled(k) && plan.nodes[k].node->op->traits().passes_gradient_through(position[j]) &&
                       plan.nodes[j].type.shape == plan.nodes[k].type.shape;
    }
    std::vector<int> alias_of(n, -1);
    for (std::size_t j = 0; j < n; ++j)
        if (candidate[j] && !candidate[static_cast<std::size_t>(consumer[j])]) alias_of[j] = consumer[j];
    return alias_of;
}

// A loop's roles when it runs in segments (LoopRoles), from what the pass reads of its members.
LoopRoles loop_roles(const Plan& plan, const PlanStep& step, const PassSchedule& ps) {
    const std::size_t k = step.members.size();
    const int loop = plan.nodes[static_cast<std::size_t>(step.members.front())].loop;
    LoopRoles roles;
    roles.full_value.assign(k, 0);
    roles.full_grad.assign(k, 0);
    roles.carried.assign(k, 0);
    auto member_of = [&](int j) {
        const auto at = std::find(step.members.begin(), step.members.end(), j);
        return at == step.members.end() ? -1 : static_cast<int>(at - step.members.begin());
    };
    for (std::size_t mi = 0; mi < k; ++mi) {
        const auto m = static_cast<std::size_t>(step.members[mi]);
        const PlanNode& pn = plan.nodes[m];
        const Op& op = *pn.node->op;
        const OpTraits traits = op.traits();
        if (traits.reads_time && traits.delay_steps == 0 && roles.reads_time < 0)
            roles.reads_time = static_cast<int>(m);
        if (traits.delay_direction != 0)
            roles.zero_reach = std::max(roles.zero_reach, traits.delay_steps);
        else if (traits.reads_time)
            roles.zero_reach = SIZE_MAX;
        if (traits.delay_steps > 0) {
            roles.history = std::max(roles.history, traits.delay_steps);
            if (const int source = member_of(pn.inputs[0]); source >= 0)
                roles.carried[static_cast<std::size_t>(source)] = 1;
        }
        // Read whole after the loop, or drawn at random (recomputing would draw anew): kept whole.
        roles.full_value[mi] |= ps.readers[m] > 0 || ps.keep_value[m] || traits.generator != nullptr;
        if (ps.needs_grad[m] && (ps.readers[m] > 0 || ps.keep_grad[m])) roles.full_grad[mi] = 1;
        // The bulk backward to inputs from outside the loop reads this member's gradient whole and
        // whichever of its values and its inputs' values its backward declares.
        bool bulk = false;
        for (int j : pn.inputs)
            bulk |= plan.nodes[static_cast<std::size_t>(j)].loop != loop && ps.needs_grad[static_cast<std::size_t>(j)];
        if (!bulk || !ps.needs_grad[m]) continue;
        roles.full_grad[mi] = 1;
        if (op.backward_reads_output()) roles.full_value[mi] = 1;
        for (std::size_t p = 0; p < pn.inputs.size(); ++p)
            if (const int in = member_of(pn.inputs[p]); in >= 0 && op.backward_reads_input(p))
                roles.full_value[static_cast<std::size_t>(in)] = 1;
    }
    return roles;
}

// What forward frees and holds after each step (PassSchedule).
void plan_forward_frees(const Plan& plan, const StepGraph& steps, PassSchedule& ps) {
    const std::size_t n = plan.nodes.size(), n_steps = plan.steps.size();
    ps.free_when_read.assign(n, 0);
    ps.hold_if_segmented.assign(n_steps, {});
    ps.free_own.assign(n_steps, {});
    using Kind = PassSchedule::Kind;
    for (std::size_t i = 0; i < n; ++i)
        ps.free_when_read[i] = ps.kind == Kind::training       ? !ps.value_needed[i]
                               : ps.kind == Kind::forward_only ? !ps.is_output[i]
                                                               : 0;
    for (std::size_t s = 0; s < n_steps; ++s) {
        if (ps.kind == Kind::training)  // loops run in segments only when backward follows
            for (int j : steps.step_inputs[s]) {
                const auto ju = static_cast<std::size_t>(j);
                const int producer = steps.step_of[ju];
                const PlanNode& pn = plan.nodes[ju];
                if (plan.steps[s].is_loop) ps.hold_if_segmented[s].emplace_back(j, static_cast<int>(s));
                if (plan.steps[static_cast<std::size_t>(producer)].is_loop && pn.node->kind == NodeKind::Op &&
                    pn.node->op->traits().generator)
                    ps.hold_if_segmented[s].emplace_back(j, producer);
            }
        // Scoring: what no other step reads (a loop's inner values) is done with once its step ran.
        if (ps.kind == Kind::forward_only)
            for (int m : plan.steps[s].members)
                if (ps.readers[static_cast<std::size_t>(m)] == 0 && !ps.is_output[static_cast<std::size_t>(m)])
                    ps.free_own[s].push_back(m);
    }
}

// Which step takes each gradient's memory, and whether zeroed or written whole by its op: the
// first step in backward's order to add into it (backward runs the steps from the last to the
// first, and those adding into one gradient in that order whatever the schedule), in the lists
// built below, which name every gradient a step adds into. An output's gradient is taken when its
// seed goes in, one kept by rows is never dense. A node whose op writes an input's gradient whole
// (OpTraits::assigns_gradient), first to take it and reading that input once, gets it unzeroed
// (`write`, `assign`), unless the gradient may share its consumer's buffer (alias_of: whether it
// does is known from the run-time shapes): zeroing it would be wasted work.
void plan_gradient_takes(const Plan& plan, PassSchedule& ps) {
    std::vector<char> taken(plan.nodes.size(), 0);
    for (std::size_t i = 0; i < taken.size(); ++i) taken[i] = (ps.needs_grad[i] && ps.is_output[i]) || ps.by_rows[i];
    auto untaken = [&](std::vector<int>& list) {
        std::erase_if(list, [&](int j) { return taken[static_cast<std::size_t>(j)] != 0; });
    };
    auto mark = [&](const std::vector<int>& list) {
        for (int j : list) taken[static_cast<std::size_t>(j)] = 1;
    };
    for (std::size_t s = plan.steps.size(); s-- > 0;) {
        PassSchedule::Backward& b = ps.backward[s];
        if (plan.steps[s].is_loop) {  // `take` (in segments) and `take_unzeroed` (plain) are alternatives
            untaken(b.take), untaken(b.take_unzeroed);
            mark(b.take), mark(b.take_unzeroed);
            untaken(b.take_after), mark(b.take_after);
            continue;
        }
        untaken(b.take), mark(b.take);
        const int i = plan.steps[s].members.front();
        const PlanNode& pn = plan.nodes[static_cast<std::size_t>(i)];
        if (pn.node->kind != NodeKind::Op || !ps.needs_grad[static_cast<std::size_t>(i)]) continue;
        const std::uint32_t can_assign = pn.node->op->traits().assigns_gradient;
        std::erase_if(b.take, [&](int m) {
            std::uint32_t bits = 0;
            for (std::size_t j = 0; j < pn.inputs.size() && can_assign; ++j)
                if (pn.inputs[j] == m) bits |= j < 32 ? 1u << j : ~0u;
            const bool once = bits != 0 && (bits & (bits - 1)) == 0;
            if (!once || !(bits & can_assign) || ps.alias_of[static_cast<std::size_t>(m)] >= 0) return false;
            b.write.push_back(m);
            b.assign |= bits;
            return true;
        });
    }
}

// What each step's backward takes, hands over, frees and finishes (PassSchedule::Backward).
void plan_backward_steps(const Plan& plan, PassSchedule& ps) {
    const std::size_t n = plan.nodes.size();
    std::vector<std::vector<int>> addends(n);  // per consumer: the inputs lent its gradient buffer
    for (std::size_t j = 0; j < n; ++j)
        if (ps.alias_of[j] >= 0) addends[static_cast<std::size_t>(ps.alias_of[j])].push_back(static_cast<int>(j));
    ps.backward.assign(plan.steps.size(), {});
    ps.loops.assign(plan.steps.size(), {});
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const PlanStep& step = plan.steps[s];
        PassSchedule::Backward& b = ps.backward[s];
        const int loop = plan.nodes[static_cast<std::size_t>(step.members.front())].loop;
        auto grad = [&](int j) { return ps.needs_grad[static_cast<std::size_t>(j)] != 0; };
        if (step.is_loop) ps.loops[s] = loop_roles(plan, step, ps);
        for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
            const int m = step.members[mi];
            const auto mu = static_cast<std::size_t>(m);
            if (!step.is_loop) {
                if (grad(m)) add_once(b.take, m);
                for (int j : plan.nodes[mu].inputs)
                    if (grad(j)) add_once(b.take, j);
            } else {
                if (grad(m)) b.take_unzeroed.push_back(m);
                if (ps.loops[s].full_grad[mi]) b.take.push_back(m);
                for (int j : plan.nodes[mu].inputs)
                    if (plan.nodes[static_cast<std::size_t>(j)].loop != loop && grad(j)) add_once(b.take_after, j);
            }
            for (int j : addends[mu]) b.hand_over.emplace_back(m, j);
            if (grad(m) && !ps.keep_grad[mu]) b.free_grad.push_back(m);
            if (!ps.keep_value[mu]) b.free_value.push_back(m);
            if (ps.is_wrt[mu]) b.final.push_back(m);
        }
    }
    plan_gradient_takes(plan, ps);
}

// Values a backward step reads: the outputs and leaves always; an op's output and inputs as its
// backward declares, when that backward runs at all.
std::vector<char> values_needed(const Plan& plan, const std::vector<char>& needs) {
    const std::size_t n = plan.nodes.size();
    std::vector<char> needed(n, 0);
    for (int o : plan.outputs) needed[static_cast<std::size_t>(o)] = 1;
    for (std::size_t i = 0; i < n; ++i) {
        const PlanNode& pn = plan.nodes[i];
        if (pn.node->kind != NodeKind::Op) {
            needed[i] = 1;
            continue;
        }
        if (!needs[i]) continue;
        if (pn.node->op->backward_reads_output()) needed[i] = 1;
        for (std::size_t j = 0; j < pn.inputs.size(); ++j)
            if (pn.node->op->backward_reads_input(j)) needed[static_cast<std::size_t>(pn.inputs[j])] = 1;
    }
    return needed;
}

}  // namespace

StepGraph plan_steps(const Plan& plan) {
    const std::size_t n_steps = plan.steps.size();
    StepGraph g;
    g.step_of.assign(plan.nodes.size(), -1);
    for (std::size_t s = 0; s < n_steps; ++s)
        for (int m : plan.steps[s].members) g.step_of[static_cast<std::size_t>(m)] = static_cast<int>(s);
    g.step_inputs.assign(n_steps, {});
    g.forward.after.assign(n_steps, {});
    g.backward.after.assign(n_steps, {});
    const int last = static_cast<int>(n_steps) - 1;
    std::vector<int> last_consumer(plan.nodes.size(), -1);  // in the backward sweep so far
    for (int s = last; s >= 0; --s) {
        const auto su = static_cast<std::size_t>(s);
        const int task = last - s;
        for (int m : plan.steps[su].members)
            for (int j : plan.nodes[static_cast<std::size_t>(m)].inputs) {
                const int producer = g.step_of[static_cast<std::size_t>(j)];
                if (producer == s) continue;
                add_once(g.step_inputs[su], j);
                add_once(g.forward.after[su], producer);
                // Backward: the producer waits for this step (it adds into j's gradient), and this
                // step waits for the later step that added into j's gradient before it.
                add_once(g.backward.after[static_cast<std::size_t>(last - producer)], task);
                int& prev = last_consumer[static_cast<std::size_t>(j)];
                if (prev >= 0 && prev != task) add_once(g.backward.after[static_cast<std::size_t>(task)], prev);
                prev = task;
            }
    }
    return g;
}

PassSchedule plan_pass(const Plan& plan, const StepGraph& steps, PassSchedule::Kind kind, const std::vector<int>& wrt) {
    const std::size_t n = plan.nodes.size();
    PassSchedule ps;
    ps.kind = kind;
    ps.wrt = wrt;
    ps.is_output.assign(n, 0);
    ps.is_wrt.assign(n, 0);
    for (int o : plan.outputs) ps.is_output[static_cast<std::size_t>(o)] = 1;
    for (int w : wrt) ps.is_wrt[static_cast<std::size_t>(w)] = 1;
    ps.needs_grad = depends_on(plan, ps.is_wrt);
    ps.keep_grad.assign(n, 0);
    ps.keep_value.assign(n, 0);
    ps.by_rows.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        ps.keep_grad[i] = ps.is_output[i] || ps.is_wrt[i];
        ps.keep_value[i] = ps.keep_grad[i] || plan.nodes[i].node->kind != NodeKind::Op;
        ps.by_rows[i] = ps.is_wrt[i] && !ps.is_output[i] && rows_only(plan, i, ps.needs_grad);
    }
    ps.alias_of = gradient_aliases(plan, ps);
    ps.value_needed = values_needed(plan, ps.needs_grad);
    ps.readers.assign(n, 0);
    for (const auto& ins : steps.step_inputs)
        for (int j : ins) ++ps.readers[static_cast<std::size_t>(j)];
    plan_forward_frees(plan, steps, ps);
    plan_backward_steps(plan, ps);
    return ps;
}

namespace {
std::size_t segment_count(std::size_t steps, std::size_t length) { return (steps + length - 1) / length; }
}  // namespace

SegmentSizes size_segments(const LoopRoles& roles, const std::vector<std::size_t>& row, const std::vector<char>& grad,
                           std::size_t steps, std::size_t budget, std::size_t element_bytes) {
    SegmentSizes z;
    const std::size_t k = row.size();
    for (std::size_t mi = 0; mi < k; ++mi) z.plain_bytes += steps * row[mi] * (grad[mi] ? 2 : 1) * element_bytes;
    if (budget == 0 || steps < 2 || z.plain_bytes <= budget) return z;
    z.segmented = true;
    // Memory with segments of `len` steps: the whole members, value windows and gradient windows
    // of history + len rows, the history rows of the gradient carried to the next segment, and
    // the saved states at each segment's start.
    std::size_t whole = 0, window_row = 0, carry_row = 0, saved_row = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        whole += steps * row[mi] * (roles.full_value[mi] + roles.full_grad[mi]);
        window_row += row[mi] * (grad[mi] ? 2 : 1);
        carry_row += grad[mi] ? row[mi] : 0;
        saved_row += roles.carried[mi] ? row[mi] : 0;
    }
    const std::size_t d = roles.history;
    auto bytes = [&](std::size_t len) {
        return element_bytes *
               (whole + window_row * (len + d) + carry_row * d + saved_row * d * (segment_count(steps, len) - 1));
    };
    // The least memory: len near sqrt(saved * steps / window) balances the windows and the saves.
    const double best = std::sqrt(double(saved_row) * double(steps) / double(std::max<std::size_t>(window_row, 1)));
    std::size_t len = std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(best)), 1, steps);
    for (std::size_t c : {len > 1 ? len - 1 : len, len + 1})
        if (c <= steps && bytes(c) < bytes(len)) len = c;
    z.length = len;
    z.count = segment_count(steps, len);
    z.least_bytes = bytes(len);
    z.whole_bytes = whole * element_bytes;
    return z;
}

}  // namespace loom
