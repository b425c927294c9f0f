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
    // Blocks of 1,024 summed up without a branch (a loop that stops at the first find does not run
    // in vector lanes: it was 8 ms of each generating call of a 43 MB model), then the one found
    // looked for in its block.
    constexpr std::size_t block = 1024;
    for (std::size_t at = 0; at < values.size(); at += block) {
        const std::size_t end = std::min(values.size(), at + block);
        int bad = 0;
        for (std::size_t i = at; i < end; ++i) bad |= !(std::fabs(values[i]) <= std::numeric_limits<T>::max());
        if (!bad) continue;
        const auto first = std::find_if(values.begin() + static_cast<std::ptrdiff_t>(at), values.end(),
                                        [](T v) { return !std::isfinite(v); });
        return std::to_string(*first) + " at element " + std::to_string(first - values.begin());
    }
    return {};
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
