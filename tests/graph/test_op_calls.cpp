// An op's call is built in lists sized once per plan (graph/op_calls.hpp) and refreshed in place:
// once a pass has run, another pass allocates nothing per node for its calls, so a model with more
// nodes allocates no more per pass. Counted with a replaced global operator new, on for one pass.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;

namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
}  // namespace

// Every unaligned form of operator new and delete is replaced, so that each allocation and its
// release meet in malloc and free whichever forms the standard library pairs (std::stable_sort
// takes a buffer with the nothrow new and gives it back with the sized delete); the aligned forms
// stay the runtime's, new and delete alike. GCC, inlining a standard allocator's new and delete
// into one function, sees only the declared operator new beside free and warns
// (-Wmismatched-new-delete, under -O2 -g); the pairing is right, so the warning is off here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n) {
    if (void* p = ::operator new(n, std::nothrow)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return ::operator new(n, std::nothrow); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

struct Deep {
    Variable x, out;
    Parameter w;
};

// `depth` element-wise nodes outside loops, then a recurrence loop of `depth` + 1 members
// (r = tanh^depth(h + past_value(r))), over sequences of unequal lengths (padded rows).
Deep deep_model(std::size_t depth) {
    Deep m;
    m.x = sequence::input_variable({4}, "x");
    m.w = parameter(xt::xarray<float>{0.5f, -1.0f, 0.25f, 2.0f}, "w");
    Variable h = m.x * m.w;
    for (std::size_t k = 0; k < depth; ++k) h = tanh(h);
    Variable p = placeholder({4}, "p");
    Variable r = h + past_value(p);
    for (std::size_t k = 0; k < depth; ++k) r = tanh(r);
    r.replace_placeholders({{p, r}});
    m.out = r;
    return m;
}

struct PassCount {
    std::size_t allocations = 0, nodes = 0, loop_members = 0;
};

// Allocations of the third forward and backward (the first two size the pool and the lists).
PassCount count_one_pass(std::size_t depth) {
    Deep m = deep_model(depth);
    auto plan = compile({m.out});
    PassCount count;
    count.nodes = plan->nodes.size();
    for (const PlanStep& step : plan->steps)
        if (step.is_loop) count.loop_members += step.members.size();
    const std::vector<int> wrt{plan->find(m.w.node().get())};
    Execution<float> ex(plan);
    ex.plan_backward(wrt);
    const Bindings in{{m.x, Value::sequences(testing::random_sequences({4}, {3, 5, 2}, 11))}};
    ex.bind(in);
    for (int pass = 0; pass < 3; ++pass) {
        if (pass == 2) {
            allocations = 0;
            counting = true;
        }
        ex.forward();
        ex.backward(wrt);
        counting = false;
    }
    count.allocations = allocations.load();
    return count;
}

}  // namespace

TEST_CASE("a pass allocates nothing per node for its op calls") {
    const PassCount shallow = count_one_pass(2), deep = count_one_pass(12);
    INFO("allocations per pass: " << shallow.allocations << " for " << shallow.nodes << " nodes, " << deep.allocations
                                  << " for " << deep.nodes << " nodes");
    // The deep model has more nodes outside loops and more loop members, whose calls a pass makes
    // forward, at every step and backward.
    REQUIRE(deep.nodes >= shallow.nodes + 20);
    REQUIRE(deep.loop_members >= shallow.loop_members + 10);
    CHECK(deep.allocations == shallow.allocations);
}
