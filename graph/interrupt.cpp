#include "graph/interrupt.hpp"

namespace loom {

namespace {
thread_local const InterruptCheckScope* innermost = nullptr;
}

InterruptCheckScope::InterruptCheckScope(std::function<void()> check, double every_seconds)
    : check_(std::move(check)),
      every_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(every_seconds > 0 ? every_seconds : 0))),
      outer_(innermost) {
    innermost = this;
}

InterruptCheckScope::~InterruptCheckScope() { innermost = outer_; }

const InterruptCheckScope* InterruptCheckScope::current() { return innermost; }

void InterruptCheckScope::check_now() const {
    if (!check_) return;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    auto next = next_.load(std::memory_order_relaxed);
    // One thread at a time claims the check when its time has come; the others go on.
    if (now < next || !next_.compare_exchange_strong(next, now + every_.count(), std::memory_order_relaxed)) return;
    check_();
}

InterruptCheckScope::Adopt::Adopt(const InterruptCheckScope* scope) : before_(innermost) { innermost = scope; }

InterruptCheckScope::Adopt::~Adopt() { innermost = before_; }

}  // namespace loom
