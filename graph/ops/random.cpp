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

namespace loom {

namespace {

// xoshiro256** (Blackman and Vigna 2018), its state filled from one seed by splitmix64.
class Xoshiro256 {
public:
    explicit Xoshiro256(std::uint64_t seed) {
        for (std::uint64_t& word : s_) {
            seed += 0x9e3779b97f4a7c15ull;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            word = z ^ (z >> 31);
        }
    }
    std::uint64_t operator()() {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t s_[4];
};

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
        // One draw of the op's generator seeds a xoshiro256** stream for this mask (the op's
        // generator, which checkpoints keep, advances by one per forward); each 64-bit number of the
        // stream decides four elements by its 16-bit quarters: dropped when a quarter is below
        // rate * 2^16 (the rate rounded to 1/65536). A Bernoulli draw of mt19937_64 per element took
        // an eighth of a Transformer's training step.
        const T keep = static_cast<T>(1.0 / (1.0 - rate_));
        const auto threshold = static_cast<std::uint64_t>(std::llround(rate_ * 65536.0));
        std::uint64_t seed;
        {
            std::lock_guard lock(mutex_);  // one op may be shared by graphs evaluated on several threads
            seed = rng_();
        }
        Xoshiro256 stream(seed);
        const auto decide = [&](std::uint64_t bits, std::size_t j) {
            return ((bits >> (16 * j)) & 0xffffu) < threshold ? T(0) : keep;
        };
        std::size_t i = 0;
        for (; i + 4 <= n; i += 4) {  // whole groups: no bound to check per element
            const std::uint64_t bits = stream();
            m[i] = decide(bits, 0), m[i + 1] = decide(bits, 1), m[i + 2] = decide(bits, 2), m[i + 3] = decide(bits, 3);
        }
        if (i < n) {
            const std::uint64_t bits = stream();
            for (std::size_t j = 0; i + j < n; ++j) m[i + j] = decide(bits, j);
        }
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}  // the mask does not depend on the operand's values

private:
    double rate_;
    mutable Rng rng_;
    mutable std::mutex mutex_;
};

}  // namespace

Variable dropout(const Variable& a, double rate, std::uint64_t seed, const std::string& name) {
    if (!(rate >= 0.0 && rate < 1.0))
        throw UserError("dropout: rate " + std::to_string(rate) + " on " + a.label() + " must be in [0, 1)");
    if (rate == 0.0) return a;
    // Seed 0: draw the op's seed from the library generator, so set_seed() makes a run reproducible.
    const std::uint64_t s = seed != 0 ? seed : global_rng()();
    auto mask =
        Variable(apply_op(std::make_shared<const RandomMask>(rate, s), {a.node()}, name.empty() ? "" : name + ".mask"));
    return element_times(a, mask, name);
}

}  // namespace loom
