// core/finite.hpp: the scan for NaN and infinities every saved, loaded or generating parameter goes
// through, in blocks: the first one found wherever it lies, a block's edges included.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "core/finite.hpp"

using namespace loom;

TEST_CASE_TEMPLATE("first_non_finite names the first NaN or infinity, at any element of any block", T, float, double) {
    std::vector<T> v(3000, T(1.5));
    CHECK(first_non_finite<T>(v).empty());
    CHECK(first_non_finite<T>({}).empty());
    v[2999] = std::numeric_limits<T>::max();  // the largest finite value is finite
    v[0] = std::numeric_limits<T>::lowest();
    CHECK(first_non_finite<T>(v).empty());
    for (const std::size_t at :
         {std::size_t{0}, std::size_t{1023}, std::size_t{1024}, std::size_t{2047}, std::size_t{2999}}) {
        CAPTURE(at);
        std::vector<T> w = v;
        w[at] = std::numeric_limits<T>::quiet_NaN();
        CHECK(first_non_finite<T>(w) == "nan at element " + std::to_string(at));
        w[at] = -std::numeric_limits<T>::infinity();
        CHECK(first_non_finite<T>(w) == "-inf at element " + std::to_string(at));
        if (at + 5 < w.size()) {  // two in one block: the first is named
            w[at + 5] = std::numeric_limits<T>::quiet_NaN();
            CHECK(first_non_finite<T>(w) == "-inf at element " + std::to_string(at));
        }
    }
}
