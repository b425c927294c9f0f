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

}  // namespace loom
