// Random ops. dropout(a, rate) = a * mask, where the mask is the output of its own node: drawn
// afresh at every forward in training mode (a Bernoulli(1 - rate) draw scaled by 1 / (1 - rate), so
// the expectation is a), all ones in inference mode. Keeping the mask as a node's output lets the
// backward of element_times reuse it instead of drawing or storing anything itself.
#include <cmath>
#include <mutex>
#include <random>

#include "core/errors.hpp"
#include "core/random.hpp"
#include "graph/mode.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

class RandomMask final : public OpBase<RandomMask> {
public:
    RandomMask(double rate, std::uint64_t seed) : rate_(rate), rng_(seed) {}
    std::string name() const override { return "dropout_mask"; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    OpTraits traits() const override { return {.generator = &rng_}; }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t n = c.out.size();
        T* m = c.out.data;
        if (!is_training()) {
            std::fill_n(m, n, T(1));
            return;
        }
        // One draw of the op's generator (which checkpoints keep, advancing by one per forward)
        // seeds the stream this mask's decisions come from (for_each_dropout).
        std::uint64_t seed;
        {
            std::lock_guard lock(mutex_);  // one op may be shared by graphs evaluated on several threads
            seed = rng_();
        }
        const T keep = static_cast<T>(1.0 / (1.0 - rate_));
        for_each_dropout(seed, n, dropout_threshold(rate_),
                         [&](std::size_t i, bool kept) { m[i] = kept ? keep : T(0); });
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}  // the mask does not depend on the operand's values

private:
    double rate_;
    mutable Rng rng_;
    mutable std::mutex mutex_;
};

// dropout_seed's op (graph/ops/kinds.hpp): each forward in training mode, one draw of its
// generator written into every row as four 16-bit parts and a 1; zeros in inference mode.
class DropoutSeed final : public OpBase<DropoutSeed> {
public:
    explicit DropoutSeed(std::uint64_t seed) : rng_(seed) {}
    std::string name() const override { return "dropout_seed"; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return {Shape{dropout_seed_size}, in[0].axis}; }
    OpTraits traits() const override { return {.step_capable = false, .generator = &rng_}; }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        T parts[dropout_seed_size] = {};
        if (is_training()) {
            std::uint64_t seed;
            {
                std::lock_guard lock(mutex_);
                seed = rng_();
            }
            for (std::size_t i = 0; i < 4; ++i) parts[i] = static_cast<T>((seed >> (16 * i)) & 0xffffu);
            parts[4] = T(1);
        }
        for (std::size_t r = 0; r + dropout_seed_size <= c.out.size(); r += dropout_seed_size)
            std::copy_n(parts, dropout_seed_size, c.out.data + r);
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}

private:
    mutable Rng rng_;
    mutable std::mutex mutex_;
};

}  // namespace

Variable dropout_seed(const Variable& like, std::uint64_t seed) {
    return Variable(
        apply_op(std::make_shared<const DropoutSeed>(seed != 0 ? seed : global_rng()()), {like.node()}, ""));
}

Variable dropout(const Variable& a, double rate, std::uint64_t seed, const std::string& name) {
    if (!(rate >= 0.0 && rate < 1.0))
        throw UserError("dropout: rate " + std::to_string(rate) + " on " + a.label() + " must be in [0, 1)");
    if (rate == 0.0) return a;
    // Seed 0: draw the op's seed from the library generator, so set_seed() makes a run reproducible.
    const std::uint64_t s = seed != 0 ? seed : global_rng()();
    if (InferenceGraphScope::active()) return a;
    auto mask =
        Variable(apply_op(std::make_shared<const RandomMask>(rate, s), {a.node()}, name.empty() ? "" : name + ".mask"));
    return element_times(a, mask, name);
}

}  // namespace loom
