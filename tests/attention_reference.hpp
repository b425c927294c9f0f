#pragma once
// Multi-head scaled dot-product attention written with plain loops in double, the reference the
// attention op's tests (tests/graph/test_attention_*.cpp) check values against.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <xtensor/xarray.hpp>

namespace loom::testing {

// Head h's weights of query row i over the first `visible` key rows: softmax of q_h . k_h / sqrt(dk),
// dk = q's width / heads.
inline std::vector<double> head_softmax(const xt::xarray<double>& q, const xt::xarray<double>& k, std::size_t i,
                                        std::size_t h, std::size_t heads, std::size_t visible) {
    const std::size_t dk = q.shape()[1] / heads;
    std::vector<double> s(visible);
    double top = -1e300, sum = 0;
    for (std::size_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (std::size_t c = 0; c < dk; ++c) dot += q(i, h * dk + c) * k(j, h * dk + c);
        s[j] = dot / std::sqrt(static_cast<double>(dk));
        top = std::max(top, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - top));
    for (double& x : s) x /= sum;
    return s;
}

}  // namespace loom::testing
