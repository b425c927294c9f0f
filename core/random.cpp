#include "core/random.hpp"

#include <cmath>
#include <sstream>

#include "core/errors.hpp"

namespace loom {

Rng& global_rng() {
    static Rng rng(20161231);
    return rng;
}

void set_seed(std::uint64_t seed) { global_rng().seed(seed); }

std::string rng_state(const Rng& rng) {
    std::ostringstream out;
    out << rng;
    return out.str();
}

Rng rng_from_state(const std::string& state, const std::string& where) {
    std::istringstream in(state);
    Rng rng;
    in >> rng;
    if (in.fail() || !(in >> std::ws).eof())
        throw DataError(where + ": not the state of a random generator (" + std::to_string(state.size()) + " bytes)");
    return rng;
}

namespace {
std::pair<double, double> fans(const Shape& s) {
    if (s.rank() == 0) return {1.0, 1.0};
    if (s.rank() == 1) return {static_cast<double>(s[0]), 1.0};
    const double out = static_cast<double>(s[s.rank() - 1]);
    return {static_cast<double>(s.size()) / out, out};
}

template <class Dist>
xt::xarray<double> draw(const Shape& s, Rng& rng, Dist dist) {
    xt::xarray<double> a = xt::zeros<double>(s.dims());
    for (auto& v : a) v = dist(rng);
    return a;
}
}  // namespace

Initializer glorot_uniform(double scale) {
    return [scale](const Shape& s, Rng& rng) {
        auto [in, out] = fans(s);
        const double limit = scale * std::sqrt(6.0 / (in + out));
        return draw(s, rng, std::uniform_real_distribution<double>(-limit, limit));
    };
}

Initializer glorot_normal(double scale) {
    return [scale](const Shape& s, Rng& rng) {
        auto [in, out] = fans(s);
        return draw(s, rng, std::normal_distribution<double>(0.0, scale * std::sqrt(2.0 / (in + out))));
    };
}

Initializer uniform(double scale) {
    if (!(scale >= 0)) throw UserError("uniform initializer: scale must be >= 0, got " + std::to_string(scale));
    return [scale](const Shape& s, Rng& rng) {
        return draw(s, rng, std::uniform_real_distribution<double>(-scale, scale));
    };
}

Initializer normal(double stddev, double mean) {
    if (!(stddev >= 0)) throw UserError("normal initializer: stddev must be >= 0, got " + std::to_string(stddev));
    return [stddev, mean](const Shape& s, Rng& rng) {
        return draw(s, rng, std::normal_distribution<double>(mean, stddev));
    };
}

Initializer zeros() {
    return [](const Shape& s, Rng&) { return xt::xarray<double>(xt::zeros<double>(s.dims())); };
}

Initializer constant_initializer(double value) {
    return [value](const Shape& s, Rng&) {
        xt::xarray<double> a = xt::zeros<double>(s.dims());
        a.fill(value);
        return a;
    };
}

std::uint64_t dropout_threshold(double rate) { return static_cast<std::uint64_t>(std::llround(rate * 65536.0)); }

}  // namespace loom
