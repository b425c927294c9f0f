#pragma once
// Value: data bound to or produced by a graph. A tensor plus what its leading axes mean:
//   Static    [sample...]                 no dynamic axis (constants, parameters)
//   Batch     [N, sample...]              one item per batch entry
//   Sequence  [T_max, N, sample...]       time-major and padded, with a SequenceLayout
// Storage is float or double; accessors convert on request.
#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/sequence_layout.hpp"
#include "core/shape.hpp"

namespace loom {

enum class DType { f32, f64 };

template <class T>
constexpr DType dtype_of() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "loom runs in float or double");
    return std::is_same_v<T, float> ? DType::f32 : DType::f64;
}

class Value {
    template <class E>
    using element_of = std::conditional_t<std::is_same_v<typename E::value_type, double>, double, float>;

public:
    enum class Kind { Static, Batch, Sequence };

    Value() = default;

    // Each element is one sequence [T_i, sample...]; all share the sample shape.
    static Value sequences(const std::vector<xt::xarray<float>>& seqs);
    static Value sequences(const std::vector<xt::xarray<double>>& seqs);
    // Token ids, one sequence each: sample shape [1]. Ids are stored as float, exact up to
    // max_exact_float_id; a larger id is a UserError.
    static constexpr std::size_t max_exact_float_id = std::size_t{1} << 24;
    static Value index_sequences(const std::vector<std::vector<std::size_t>>& ids);
    // Rows [N, sample...].
    static Value batch(const xt::xarray<float>& rows);
    static Value batch(const xt::xarray<double>& rows);
    // The same, taking the array's storage instead of copying it.
    static Value batch(xt::xarray<float>&& rows);
    static Value batch(xt::xarray<double>&& rows);
    // A tensor with no dynamic axis.
    static Value tensor(xt::xarray<float> data);
    static Value tensor(xt::xarray<double> data);
    // The same calls with braced lists and other xtensor arrays, as the contract writes them
    // (Value::sequences({seq0, seq1}), Value::batch({{1, 2}, {3, 4}})): arrays of double stay double,
    // any other element type becomes float; braced numbers are float, loom's default.
    template <class E>
    static Value sequences(std::initializer_list<E> seqs) {
        return sequences(std::vector<xt::xarray<element_of<E>>>(seqs.begin(), seqs.end()));
    }
    template <class E>
    requires xt::is_xexpression<E>::value static Value batch(const E& rows) {
        return batch(xt::xarray<element_of<E>>(rows));
    }
    static Value batch(xt::nested_initializer_list_t<float, 1> rows) { return batch(xt::xarray<float>(rows)); }
    static Value batch(xt::nested_initializer_list_t<float, 2> rows) { return batch(xt::xarray<float>(rows)); }
    static Value batch(xt::nested_initializer_list_t<float, 3> rows) { return batch(xt::xarray<float>(rows)); }
    template <class E>
    requires xt::is_xexpression<E>::value static Value tensor(const E& data) {
        return tensor(xt::xarray<element_of<E>>(data));
    }
    static Value tensor(xt::nested_initializer_list_t<float, 1> data) { return tensor(xt::xarray<float>(data)); }
    static Value tensor(xt::nested_initializer_list_t<float, 2> data) { return tensor(xt::xarray<float>(data)); }
    static Value tensor(xt::nested_initializer_list_t<float, 3> data) { return tensor(xt::xarray<float>(data)); }
    // Already padded, time-major data [T_max, N, sample...]; whatever is in the padding is ignored.
    template <class T>
    static Value padded(xt::xarray<T> data, LayoutPtr layout);
    // Item-major padded data [N, T, sample...] plus each item's length: item n's first lengths[n]
    // steps become sequence n (the inverse of sequence::unpack's data). A length of 0 or above T,
    // or a count of lengths other than N, is a UserError.
    template <class T>
    static Value from_padded(const xt::xarray<T>& data, const std::vector<std::size_t>& lengths);

    Kind kind() const { return kind_; }
    DType dtype() const { return data_.index() == 0 ? DType::f32 : DType::f64; }
    bool empty() const {
        return kind_ == Kind::Static && std::visit([](auto& d) { return d.size() == 0; }, data_);
    }
    const Shape& sample_shape() const { return sample_; }
    std::size_t num_items() const;         // N for Batch and Sequence, 1 for Static
    const SequenceLayout& layout() const;  // throws unless Kind::Sequence
    const LayoutPtr& layout_ptr() const { return layout_; }

    // One sequence [L_i, sample...] (Sequence only).
    template <class T = float>
    xt::xarray<T> sequence(std::size_t i) const;
    // All rows [N, sample...] (Batch only).
    template <class T = float>
    xt::xarray<T> batch() const;
    // The whole storage: the static tensor, [N, ...] rows, or padded [T_max, N, ...].
    template <class T = float>
    xt::xarray<T> tensor() const;
    // The storage itself, without conversion; throws if the element type differs.
    template <class T>
    const xt::xarray<T>& data() const;
    template <class T>
    xt::xarray<T>& data();

    std::string describe() const;  // "sequence value, 3 sequences of lengths [...], sample [2]"

private:
    template <class T>
    static Value make_sequences(const std::vector<xt::xarray<T>>& seqs);
    template <class T>
    static Value make_batch(xt::xarray<T> rows);

    Kind kind_ = Kind::Static;
    Shape sample_;
    LayoutPtr layout_;
    std::variant<xt::xarray<float>, xt::xarray<double>> data_;
};

}  // namespace loom
