#include "core/value.hpp"

#include <cstring>

#include <xtensor/xview.hpp>

#include "core/errors.hpp"

namespace loom {

namespace {
Shape shape_after(const std::vector<std::size_t>& shape, std::size_t skip) {
    return Shape(std::vector<std::size_t>(shape.begin() + static_cast<std::ptrdiff_t>(skip), shape.end()));
}

template <class To, class From>
xt::xarray<To> converted(const xt::xarray<From>& a) {
    if constexpr (std::is_same_v<To, From>)
        return a;
    else
        return xt::cast<To>(a);
}
}  // namespace

static_assert(xt::xarray<float>::static_layout == xt::layout_type::row_major &&
              xt::xarray<double>::static_layout == xt::layout_type::row_major);

template <class T>
Value Value::make_sequences(const std::vector<xt::xarray<T>>& seqs) {
    if (seqs.empty()) throw UserError("Value::sequences: a batch needs at least one sequence");
    std::vector<std::size_t> lengths;
    const auto& first = seqs.front();
    if (first.dimension() < 1)
        throw UserError("Value::sequences: each sequence must be an array [T, sample...], got a scalar");
    Shape sample = shape_after(std::vector<std::size_t>(first.shape().begin(), first.shape().end()), 1);
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        const auto& s = seqs[i];
        std::vector<std::size_t> sh(s.shape().begin(), s.shape().end());
        if (sh.empty() || shape_after(sh, 1) != sample)
            throw UserError("Value::sequences: sequence " + std::to_string(i) + " has shape " + Shape(sh).str() +
                            " but sequence 0 has sample shape " + sample.str());
        if (sh[0] == 0)
            throw UserError("Value::sequences: sequence " + std::to_string(i) +
                            " is empty; every sequence needs at least one step");
        lengths.push_back(sh[0]);
    }
    auto layout = std::make_shared<const SequenceLayout>(lengths);
    const std::size_t n = seqs.size(), row = sample.size();
    std::vector<std::size_t> shape{layout->max_length(), n};
    shape.insert(shape.end(), sample.begin(), sample.end());
    xt::xarray<T> data = xt::zeros<T>(shape);
    for (std::size_t i = 0; i < n; ++i) {
        const xt::xarray<T>& s = seqs[i];  // an xarray is contiguous and row-major: read in place
        for (std::size_t t = 0; t < lengths[i]; ++t)
            std::memcpy(data.data() + (t * n + i) * row, s.data() + t * row, row * sizeof(T));
    }
    Value v;
    v.kind_ = Kind::Sequence;
    v.sample_ = sample;
    v.layout_ = std::move(layout);
    v.set_storage(std::move(data));
    return v;
}

Value Value::sequences(const std::vector<xt::xarray<float>>& seqs) { return make_sequences(seqs); }
Value Value::sequences(const std::vector<xt::xarray<double>>& seqs) { return make_sequences(seqs); }

Value Value::index_sequences(const std::vector<std::vector<std::size_t>>& ids) {
    std::vector<xt::xarray<float>> seqs;
    seqs.reserve(ids.size());
    for (const auto& s : ids) {
        xt::xarray<float> a = xt::zeros<float>({s.size(), std::size_t{1}});
        for (std::size_t t = 0; t < s.size(); ++t) {
            // Ids are stored as float, which holds every integer up to 2^24 exactly and rounds
            // above it (16,777,217 would read row 16,777,216): refuse rather than pick a wrong row.
            if (s[t] > max_exact_float_id)
                throw UserError("Value::index_sequences: id " + std::to_string(s[t]) + " (sequence " +
                                std::to_string(seqs.size()) + ", step " + std::to_string(t) + ") is above " +
                                std::to_string(max_exact_float_id) +
                                " = 2^24, the largest id that loom's float storage holds exactly");
            a(t, 0) = static_cast<float>(s[t]);
        }
        seqs.push_back(std::move(a));
    }
    return make_sequences(seqs);
}

template <class T>
Value Value::make_batch(xt::xarray<T> rows) {
    if (rows.dimension() < 1) throw UserError("Value::batch: rows must be an array [N, sample...], got a scalar");
    if (rows.shape()[0] == 0) throw UserError("Value::batch: a batch needs at least one row");
    Value v;
    v.kind_ = Kind::Batch;
    v.sample_ = shape_after(std::vector<std::size_t>(rows.shape().begin(), rows.shape().end()), 1);
    v.set_storage(std::move(rows));
    return v;
}

Value Value::batch(const xt::xarray<float>& rows) { return make_batch(rows); }
Value Value::batch(const xt::xarray<double>& rows) { return make_batch(rows); }
Value Value::batch(xt::xarray<float>&& rows) { return make_batch(std::move(rows)); }
Value Value::batch(xt::xarray<double>&& rows) { return make_batch(std::move(rows)); }

Value Value::tensor(xt::xarray<float> data) {
    Value v;
    v.sample_ = Shape(std::vector<std::size_t>(data.shape().begin(), data.shape().end()));
    v.set_storage(std::move(data));
    return v;
}

Value Value::tensor(xt::xarray<double> data) {
    Value v;
    v.sample_ = Shape(std::vector<std::size_t>(data.shape().begin(), data.shape().end()));
    v.set_storage(std::move(data));
    return v;
}

template <class T>
Value Value::time_major_sequences(xt::xarray<T> data, LayoutPtr layout) {
    if (!layout) throw UserError("Value::time_major_sequences: a layout is required");
    std::vector<std::size_t> sh(data.shape().begin(), data.shape().end());
    if (sh.size() < 2 || sh[0] != layout->max_length() || sh[1] != layout->num_sequences())
        throw UserError("Value::time_major_sequences: data of shape " + Shape(sh).str() + " does not fit " +
                        layout->str() + " (expected [T_max, N, sample...])");
    Value v;
    v.kind_ = Kind::Sequence;
    v.sample_ = shape_after(sh, 2);
    v.layout_ = std::move(layout);
    v.set_storage(std::move(data));
    return v;
}
template Value Value::time_major_sequences<float>(xt::xarray<float>, LayoutPtr);
template Value Value::time_major_sequences<double>(xt::xarray<double>, LayoutPtr);

template <class T>
Value Value::item_major_sequences(const xt::xarray<T>& data, const std::vector<std::size_t>& lengths) {
    std::vector<std::size_t> sh(data.shape().begin(), data.shape().end());
    if (sh.size() < 2)
        throw UserError("Value::item_major_sequences: data must be [N, T, sample...], got shape " + Shape(sh).str());
    if (lengths.size() != sh[0])
        throw UserError("Value::item_major_sequences: " + std::to_string(lengths.size()) + " lengths for " +
                        std::to_string(sh[0]) + " items (data of shape " + Shape(sh).str() + ")");
    std::vector<xt::xarray<T>> seqs;
    seqs.reserve(lengths.size());
    for (std::size_t n = 0; n < lengths.size(); ++n) {
        if (lengths[n] == 0 || lengths[n] > sh[1])
            throw UserError("Value::item_major_sequences: item " + std::to_string(n) + " has length " +
                            std::to_string(lengths[n]) + " but the data holds " + std::to_string(sh[1]) +
                            " steps (shape " + Shape(sh).str() + "); a length must be in 1.." + std::to_string(sh[1]));
        seqs.emplace_back(xt::view(data, n, xt::range(0, lengths[n])));
    }
    if (sh.size() == 2)  // a [T] per item: steps of shape [1], as to_sequence makes them
        for (auto& s : seqs) s.reshape({s.size(), std::size_t{1}});
    return make_sequences(seqs);
}

template Value Value::item_major_sequences<float>(const xt::xarray<float>&, const std::vector<std::size_t>&);
template Value Value::item_major_sequences<double>(const xt::xarray<double>&, const std::vector<std::size_t>&);

std::size_t Value::num_items() const {
    if (kind_ == Kind::Static) return 1;
    if (kind_ == Kind::Sequence) return layout_->num_sequences();
    return std::visit([](auto& d) { return d.shape()[0]; }, storage());
}

const SequenceLayout& Value::layout() const {
    if (kind_ != Kind::Sequence) throw UserError("Value::layout: " + describe() + " has no sequence axis");
    return *layout_;
}

template <class T>
xt::xarray<T> Value::sequence(std::size_t i) const {
    if (kind_ != Kind::Sequence) throw UserError("Value::sequence: " + describe() + " has no sequence axis");
    if (i >= layout_->num_sequences())
        throw UserError("Value::sequence: index " + std::to_string(i) + " out of range for " + layout_->str());
    return std::visit(
        [&](auto& d) {
            const std::size_t len = layout_->length(i), n = layout_->num_sequences(), row = sample_.size();
            std::vector<std::size_t> shape{len};
            shape.insert(shape.end(), sample_.begin(), sample_.end());
            xt::xarray<T> out = xt::zeros<T>(shape);
            for (std::size_t t = 0; t < len; ++t)
                for (std::size_t k = 0; k < row; ++k)
                    out.data()[t * row + k] = static_cast<T>(d.data()[(t * n + i) * row + k]);
            return out;
        },
        storage());
}

template <class T>
xt::xarray<T> Value::rows() const {
    if (kind_ != Kind::Batch) throw UserError("Value::rows: " + describe() + " has no plain batch axis");
    return tensor<T>();
}

template <class T>
xt::xarray<T> Value::tensor() const {
    return std::visit([](auto& d) { return converted<T>(d); }, storage());
}

const Value::Storage& Value::storage() const {
    static const Storage empty_storage;
    return data_ ? *data_ : empty_storage;
}

Value::Storage& Value::own_storage() {
    if (!data_)
        data_ = std::make_shared<Storage>();
    else if (data_.use_count() > 1)
        data_ = std::make_shared<Storage>(*data_);
    return *data_;
}

template <class T>
const xt::xarray<T>& Value::data() const {
    if (auto* p = std::get_if<xt::xarray<T>>(&storage())) return *p;
    throw UserError("Value::data: stored element type differs from the one requested");
}

template <class T>
xt::xarray<T>& Value::data() {
    if (!std::holds_alternative<xt::xarray<T>>(storage()))
        throw UserError("Value::data: stored element type differs from the one requested");
    return std::get<xt::xarray<T>>(own_storage());
}

std::string Value::describe() const {
    std::string s = kind_ == Kind::Static ? "static value" : kind_ == Kind::Batch ? "batch value" : "sequence value";
    if (kind_ == Kind::Sequence) s += " (" + layout_->str() + ")";
    if (kind_ == Kind::Batch) s += " (" + std::to_string(num_items()) + " rows)";
    return s + " of sample shape " + sample_.str();
}

#define LOOM_VALUE_INSTANTIATE(T)                                 \
    template xt::xarray<T> Value::sequence<T>(std::size_t) const; \
    template xt::xarray<T> Value::rows<T>() const;                \
    template xt::xarray<T> Value::tensor<T>() const;              \
    template const xt::xarray<T>& Value::data<T>() const;         \
    template xt::xarray<T>& Value::data<T>();
LOOM_VALUE_INSTANTIATE(float)
LOOM_VALUE_INSTANTIATE(double)
#undef LOOM_VALUE_INSTANTIATE

}  // namespace loom
