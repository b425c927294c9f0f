#pragma once
// The one scan for values that may not be NaN or infinite (what is saved or read back: parameters,
// learner state), and how its finding is told in an error message.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
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

}  // namespace loom
