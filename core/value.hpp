#pragma once
/// \file
/// Value: data bound to or produced by a graph. A tensor plus what its leading axes mean:
///   Static    [sample...]                 no dynamic axis (constants, parameters)
///   Batch     [N, sample...]              one item per batch entry
///   Sequence  [T_max, N, sample...]       time-major and padded, with a SequenceLayout
/// Storage is float or double; accessors convert on request. Copies of a Value share its storage (a
/// reference count, not a copy of the elements) until one of them is changed through data().
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/sequence_layout.hpp"
#include "core/shape.hpp"

namespace loom {

/// loom's one element type: float or double. A Value's storage, a parameter's value (and so a
/// Session's computation and a learner's state) are one or the other; where a caller may leave the
/// choice to loom (evaluate, gradients), it passes a std::optional<DType>.
enum class DType { f32, f64 };

/// F<float> or F<double>, whichever the element type chosen at run time is: how loom keeps a
/// parameter's value, a session's execution or a learner's state, read with std::visit (one code
/// path, a template on the element type).
template <template <class> class F>
using ByDType = std::variant<F<float>, F<double>>;

/// An xt::xarray of T (a ByDType takes a template of one parameter).
template <class T>
using Array = xt::xarray<T>;

/// A std::vector of T, for the same reason: std::vector's defaulted allocator parameter does not
/// match a template of one parameter under every compiler (clang 14 refuses it).
template <class T>
using VectorOf = std::vector<T>;

/// \return f(T()) for T the element type `dtype` names (float or double): one call for both, as
/// std::visit for a ByDType.
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
    return dtype == DType::f64 ? f(0.0) : f(0.0f);
}

/// \return the DType of the alternative a ByDType holds.
template <class V>
DType dtype_held(const V& v) {
    return v.index() == 0 ? DType::f32 : DType::f64;
}

/// \return the DType of element type T (float or double only).
template <class T>
constexpr DType dtype_of() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "loom runs in float or double");
    return std::is_same_v<T, float> ? DType::f32 : DType::f64;
}

/// A tensor bound to a graph's input or produced by it, with what its leading axes mean (above):
/// a static tensor, a batch of rows, or a padded batch of sequences with its SequenceLayout.
class Value {
    template <class E>
    using element_of = std::conditional_t<std::is_same_v<typename E::value_type, double>, double, float>;

public:
    /// Which dynamic axes the storage has: none, [N, ...] or [T_max, N, ...].
    enum class Kind { Static, Batch, Sequence };

    Value() = default;

    /// @{
    /// Each element is one sequence [T_i, sample...]; all share the sample shape.
    static Value sequences(const std::vector<xt::xarray<float>>& seqs);
    static Value sequences(const std::vector<xt::xarray<double>>& seqs);
    /// @}
    /// The largest token id index_sequences takes: ids are stored as float, exact up to 2^24.
    static constexpr std::size_t max_exact_float_id = std::size_t{1} << 24;
    /// Token ids, one sequence each (sample shape [1]); a UserError for an id above max_exact_float_id.
    static Value index_sequences(const std::vector<std::vector<std::size_t>>& ids);
    /// @{
    /// Rows [N, sample...].
    static Value batch(const xt::xarray<float>& rows);
    static Value batch(const xt::xarray<double>& rows);
    /// @}
    /// @{
    /// The same, taking the array's storage instead of copying it.
    static Value batch(xt::xarray<float>&& rows);
    static Value batch(xt::xarray<double>&& rows);
    /// @}
    /// @{
    /// A tensor with no dynamic axis.
    static Value tensor(xt::xarray<float> data);
    static Value tensor(xt::xarray<double> data);
    /// @}
    /// @{
    /// The same calls with braced lists and other xtensor arrays, as the contract writes them
    /// (Value::sequences({seq0, seq1}), Value::batch({{1, 2}, {3, 4}})): arrays of double stay double,
    /// any other element type becomes float; braced numbers are float, loom's default.
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
    /// @}
    /// Sequences from padded data already in loom's own layout, time-major [T_max, N, sample...]
    /// (step t of item n at [t, n]), with their layout; whatever is in the padding is ignored. The
    /// array becomes the Value's storage: move it in to spare a copy.
    template <class T>
    static Value time_major_sequences(xt::xarray<T> data, LayoutPtr layout);
    /// Sequences from padded item-major data [N, T, sample...] (item n's step t at [n, t], as
    /// sequence::unpack's data) plus each item's length: item n's first lengths[n] steps become
    /// sequence n (the inverse of unpack). A length of 0 or above T, or a count of lengths other than
    /// N, is a UserError.
    template <class T>
    static Value item_major_sequences(const xt::xarray<T>& data, const std::vector<std::size_t>& lengths);
    /// \deprecated The name said "padded" but not which layout: use time_major_sequences (the same
    /// call; its errors name time_major_sequences).
    template <class T>
    [[deprecated("use Value::time_major_sequences")]] static Value padded(xt::xarray<T> data, LayoutPtr layout) {
        return time_major_sequences(std::move(data), std::move(layout));
    }
    /// \deprecated The name said "padded" but not which layout: use item_major_sequences (the same
    /// call; its errors name item_major_sequences).
    template <class T>
    [[deprecated("use Value::item_major_sequences")]] static Value from_padded(
        const xt::xarray<T>& data, const std::vector<std::size_t>& lengths) {
        return item_major_sequences(data, lengths);
    }

    /// \return whether the storage is static, a batch or sequences.
    Kind kind() const { return kind_; }
    /// \return the element type of the storage.
    DType dtype() const { return dtype_held(storage()); }
    /// \return whether the Value holds nothing: default-made, moved from, or a static Value of no element.
    bool empty() const {
        return !data_ || (kind_ == Kind::Static && std::visit([](auto& d) { return d.size() == 0; }, storage()));
    }
    /// \return the shape of one sample (without the dynamic axes).
    const Shape& sample_shape() const { return sample_; }
    std::size_t num_items() const;         ///< N for Batch and Sequence, 1 for Static
    const SequenceLayout& layout() const;  ///< throws unless Kind::Sequence
    /// \return the layout shared with other values (null unless Kind::Sequence).
    const LayoutPtr& layout_ptr() const { return layout_; }

    /// One sequence [L_i, sample...] (Sequence only).
    template <class T = float>
    xt::xarray<T> sequence(std::size_t i) const;
    /// All rows [N, sample...] (Batch only): what Value::batch(rows) was made from.
    template <class T = float>
    xt::xarray<T> rows() const;
    /// \deprecated Read like the maker Value::batch(rows): use rows() (the same rows; its error
    /// names rows).
    template <class T = float>
    [[deprecated("use Value::rows")]] xt::xarray<T> batch() const {
        return rows<T>();
    }
    /// The whole storage: the static tensor, [N, ...] rows, or padded [T_max, N, ...].
    template <class T = float>
    xt::xarray<T> tensor() const;
    /// @{
    /// The storage itself, without conversion; throws if the element type differs. The non-const
    /// one first gives this Value a storage of its own if copies share it, so that a change made
    /// through it is seen by this Value only; a reference it returned before the Value was copied
    /// (bound included) reaches the copies too, so ask again after copying.
    template <class T>
    const xt::xarray<T>& data() const;
    template <class T>
    xt::xarray<T>& data();
    /// @}

    std::string describe() const;  ///< "sequence value, 3 sequences of lengths [...], sample [2]"

private:
    template <class T>
    static Value make_sequences(const std::vector<xt::xarray<T>>& seqs);
    template <class T>
    static Value make_batch(xt::xarray<T> rows);

    using Storage = std::variant<xt::xarray<float>, xt::xarray<double>>;
    const Storage& storage() const;
    Storage& own_storage();  // not shared with another Value
    template <class T>
    void set_storage(xt::xarray<T>&& data) {
        data_ = std::make_shared<Storage>(std::move(data));
    }

    Kind kind_ = Kind::Static;
    Shape sample_;
    LayoutPtr layout_;
    std::shared_ptr<Storage> data_;  // null: the default, empty storage
};

}  // namespace loom
