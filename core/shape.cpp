#include "core/shape.hpp"

#include "core/errors.hpp"

namespace loom {

namespace {
template <class It>
std::string join_dims(It first, It last) {
    std::string s = "[";
    for (It it = first; it != last; ++it) {
        if (it != first) s += ", ";
        // The largest size is no size but a placeholder for any (graph/variable.hpp's any_size).
        s += *it == static_cast<std::size_t>(-1) ? std::string("any") : std::to_string(*it);
    }
    return s + "]";
}
}  // namespace

std::size_t Shape::size() const {
    std::size_t n = 1;
    for (auto v : dims_) n *= v;
    return n;
}

void check_shape(const Shape& shape, const std::string& where, bool zero_allowed) {
    std::size_t n = 1;
    for (auto v : shape) {
        if (v == 0 && zero_allowed) continue;
        if (v == 0)
            throw UserError(where + ": shape " + shape.str() +
                            " has a zero-size dimension; every dimension must be at least 1");
        if (__builtin_mul_overflow(n, v, &n) || n > max_elements)
            throw UserError(where + ": shape " + shape.str() +
                            " has more elements than any tensor can hold (over 2^48)");
    }
}

std::string Shape::str() const { return join_dims(dims_.begin(), dims_.end()); }

Dims::Dims(std::initializer_list<std::size_t> list) {
    for (auto v : list) push_back(v);
}

std::size_t Dims::size() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank; ++i) n *= d[i];
    return n;
}

void Dims::push_back(std::size_t v) {
    if (rank == max_rank)
        throw UserError("tensor rank exceeds loom's maximum of " + std::to_string(max_rank) +
                        " (dynamic axes included)");
    d[rank++] = v;
}

std::string Dims::str() const { return join_dims(begin(), end()); }

Dims make_dims(std::initializer_list<std::size_t> dynamic, const Shape& sample) {
    Dims out(dynamic);
    for (auto v : sample) out.push_back(v);
    return out;
}

}  // namespace loom
