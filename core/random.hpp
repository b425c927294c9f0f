#pragma once
/// \file
/// Seedable random numbers and parameter initializers. An Initializer turns a shape into values;
/// it draws from the generator it is given, so a seeded run is reproducible.
#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include <xtensor/xarray.hpp>

#include "core/shape.hpp"

namespace loom {

/// The random generator of loom: 64-bit Mersenne Twister, the same sequence on every platform.
using Rng = std::mt19937_64;

/// The library-wide generator used by initializers and dropout unless one is passed explicitly.
Rng& global_rng();
/// Reseeds global_rng().
void set_seed(std::uint64_t seed);

/// A generator's whole state as text (the standard's stream form of the engine, the same on every
/// platform), and back: what a checkpoint keeps of a generator that training draws from. A state
/// that is not one throws DataError naming `where`.
std::string rng_state(const Rng& rng);
/// \param state  what rng_state() returned
/// \param where  names the source in the DataError (a checkpoint's file, say)
Rng rng_from_state(const std::string& state, const std::string& where);

/// Values for a parameter of the given shape, drawn from the given generator.
using Initializer = std::function<xt::xarray<double>(const Shape&, Rng&)>;

/// U(-limit, limit) with limit = scale * sqrt(6 / (fan_in + fan_out)). Fan-in is the product of all
/// but the last dimension, fan-out the last dimension, matching a
/// weight [in..., out] used as times(x, W).
Initializer glorot_uniform(double scale = 1.0);
/// Glorot (Xavier) normal: N(0, scale^2 * 2 / (fan_in + fan_out)), fans as for glorot_uniform.
Initializer glorot_normal(double scale = 1.0);
Initializer uniform(double scale);  ///< U(-scale, scale)
/// N(mean, stddev^2) for every element.
Initializer normal(double stddev, double mean = 0.0);
/// All zeros.
Initializer zeros();
/// Every element `value`.
Initializer constant_initializer(double value);

/// splitmix64's finalizer (Steele, Lea and Flood 2014): 64 bits mixed so that nearby inputs give
/// unrelated outputs.
inline std::uint64_t splitmix64_mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/// xoshiro256** (Blackman and Vigna 2018), its state filled from one seed by splitmix64: the fast
/// stream a dropout mask is drawn from, seeded by one draw of an op's Rng (which checkpoints keep).
class Xoshiro256 {
public:
    /// \param seed  any 64-bit number; nearby seeds give unrelated streams
    explicit Xoshiro256(std::uint64_t seed) {
        for (std::uint64_t& word : s_) {
            seed += 0x9e3779b97f4a7c15ull;
            word = splitmix64_mix(seed);
        }
    }
    /// \return the next 64 bits of the stream.
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

/// Dropout's decisions for `count` elements from one seed: kept(i, bool) for each element in turn.
/// Each 64-bit number of the seed's Xoshiro256 stream decides four elements by its 16-bit quarters,
/// an element dropped when its quarter is below `threshold` (dropout_threshold: the rate rounded to
/// 1/65536); a Bernoulli draw of mt19937_64 per element took an eighth of a Transformer's step.
template <class Kept>
void for_each_dropout(std::uint64_t seed, std::size_t count, std::uint64_t threshold, Kept&& kept) {
    Xoshiro256 stream(seed);
    std::size_t i = 0;
    for (; i + 4 <= count; i += 4) {  // whole groups: no bound to check per element
        const std::uint64_t bits = stream();
        for (std::size_t j = 0; j < 4; ++j) kept(i + j, ((bits >> (16 * j)) & 0xffffu) >= threshold);
    }
    if (i < count) {
        const std::uint64_t bits = stream();
        for (std::size_t j = 0; i + j < count; ++j) kept(i + j, ((bits >> (16 * j)) & 0xffffu) >= threshold);
    }
}

/// The threshold for_each_dropout compares each 16-bit draw with: `rate` (in [0, 1)) times 2^16, rounded.
std::uint64_t dropout_threshold(double rate);

}  // namespace loom
