#pragma once
// The one scan for values that may not be NaN or infinite (what is saved or read back: parameters,
// learner state), the one for doubles a float cannot hold, and how their findings are told in an
// error message.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <limits>
#include <span>
#include <sstream>
#include <string>

namespace loom {

/// Where `values` first holds NaN or an infinity, as "nan at element 3"; empty when every value is
/// finite. Callers put it after "holds " in a message that names the file and the parameter.
template <class T>
std::string first_non_finite(std::span<const T> values) {
    const auto bad = std::find_if(values.begin(), values.end(), [](T v) { return !std::isfinite(v); });
    if (bad == values.end()) return {};
    return std::to_string(*bad) + " at element " + std::to_string(bad - values.begin());
}

/// Where `values`, doubles bound for float, first holds a finite value beyond float's range (its
/// magnitude above 3.40282347e+38), as "1e+39 at element 3"; empty when there is none. Converting
/// such a double to float is undefined behaviour (in practice an infinity); callers refuse it,
/// naming the file and the parameter. NaN and infinities are first_non_finite's to find.
inline std::string first_beyond_float(std::span<const double> values) {
    constexpr double largest = std::numeric_limits<float>::max();
    const auto bad =
        std::find_if(values.begin(), values.end(), [](double v) { return std::isfinite(v) && std::abs(v) > largest; });
    if (bad == values.end()) return {};
    std::ostringstream text;
    text << std::setprecision(9) << *bad << " at element " << (bad - values.begin());
    return text.str();
}

/// How a message goes on after first_beyond_float's finding.
inline constexpr const char* beyond_float_reason =
    ", beyond float's range (largest 3.40282347e+38), so a float parameter cannot hold it";

}  // namespace loom
