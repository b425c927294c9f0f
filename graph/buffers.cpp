#include "graph/buffers.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace loom {

LayoutPtr AxisLayouts::find(std::uint64_t axis) const {
    std::lock_guard lock(mutex_);
    auto it = layouts_.find(axis);
    return it == layouts_.end() ? nullptr : it->second;
}

LayoutPtr AxisLayouts::insert(std::uint64_t axis, LayoutPtr layout) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = layouts_.emplace(axis, std::move(layout));
    return fresh ? nullptr : it->second;
}

void AxisLayouts::set(std::uint64_t axis, LayoutPtr layout) {
    std::lock_guard lock(mutex_);
    layouts_[axis] = std::move(layout);
}

void AxisLayouts::clear() {
    std::lock_guard lock(mutex_);
    layouts_.clear();
}

template <class T>
void Buffers<T>::allocate(int i, LayoutPtr layout, const Shape& sample, bool own) {
    Slot& s = (*this)[i];
    const Axis& axis = plan_.nodes[static_cast<std::size_t>(i)].type.axis;
    s.sample = sample;
    s.layout = std::move(layout);
    if (axis.is_sequence()) {
        if (!s.layout)
            throw InternalError("executor: no layout for " + plan_.nodes[static_cast<std::size_t>(i)].node->label());
        s.dims = make_dims({s.layout->max_length(), s.layout->num_sequences()}, sample);
        s.dyn = 2;
    } else if (axis.kind == Axis::Kind::Batch) {
        s.dims = make_dims({batch_size}, sample);
        s.dyn = 1;
    } else {
        s.dims = make_dims({}, sample);
        s.dyn = 0;
    }
    s.external = nullptr;
    if (own)
        pool_.resize(s.value, s.dims.size());
    else
        pool_.give(std::move(s.value));
}

template <class T>
template <class S>
void Buffers<T>::fill(int i, std::span<const S> from) {
    Buffer<T>& dst = (*this)[i].value;
    dst.resize(from.size());
    if constexpr (std::is_same_v<S, T>)
        std::copy(from.begin(), from.end(), dst.begin());
    else
        for (std::size_t e = 0; e < from.size(); ++e) dst[e] = static_cast<T>(from[e]);
    elements_copied_ += from.size();
}

template <class T>
void Buffers<T>::place_constant(int i, const xt::xarray<double>& value) {
    Slot& s = (*this)[i];
    if constexpr (std::is_same_v<T, double>) {
        s.external = value.data();
    } else {
        if (s.converted.size() != value.size()) {
            s.converted.resize(value.size());
            std::transform(value.data(), value.data() + value.size(), s.converted.begin(),
                           [](double x) { return static_cast<T>(x); });
            elements_copied_ += value.size();
        }
        s.external = s.converted.data();
    }
}

template <class T>
const T* Buffers<T>::data(int i) const {
    const Slot& s = (*this)[i];
    return s.external ? s.external : s.value.data();
}

template <class T>
View<const T> Buffers<T>::value(int i) const {
    const Slot& s = (*this)[i];
    return {data(i), s.dims, s.dyn};
}

template <class T>
View<T> Buffers<T>::gradient(int i) {
    if (!needs_gradient(i)) return {};
    Slot& s = (*this)[i];
    T* g = s.grad_alias >= 0 ? (*this)[s.grad_alias].grad.data() : s.grad.data();
    return {g, s.dims, s.dyn};
}

template <class T>
void Buffers<T>::begin_backward(const PassSchedule& pass) {
    pass_ = &pass;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        s.grad_alias = s.aliased_by = -1;
        if (pass.by_rows[i]) {
            if (!s.by_rows) s.by_rows = std::make_unique<RowGradient<T>>();
            s.by_rows->reset(s.dims[0], s.dims.size() / s.dims[0]);
        } else {
            s.by_rows.reset();
        }
        if (pass.needs_grad[i] && pass.is_output[i] && !pass.by_rows[i]) {  // its seed goes in next
            pool_.resize(s.grad, s.dims.size());
            std::fill(s.grad.begin(), s.grad.end(), T(0));
        } else {
            // Taken from the pool and zeroed by the first step that adds into it: a parameter's
            // gradient takes memory only from the end of its layer's backward (when most values
            // have gone back to the pool), not across the whole pass.
            pool_.give(std::move(s.grad));
        }
    }
    for (std::size_t j = 0; j < slots_.size(); ++j) {
        const int k = pass.alias_of[j];
        if (k < 0 || slots_[j].dims != (*this)[k].dims) continue;  // run-time shapes differ
        slots_[j].grad_alias = k;
        (*this)[k].aliased_by = static_cast<int>(j);
    }
}

template <class T>
void Buffers<T>::seed(const std::vector<int>& outputs, const std::unordered_map<int, const std::vector<T>*>& weights) {
    for (int o : outputs) {
        if (!needs_gradient(o)) continue;
        Buffer<T>& g = (*this)[o].grad;
        auto it = weights.find(o);
        if (it == weights.end()) {
            for (auto& x : g) x += T(1);
            continue;
        }
        if (it->second->size() != g.size()) throw InternalError("backward: seed of the wrong size");
        for (std::size_t e = 0; e < g.size(); ++e) g[e] += (*it->second)[e];
    }
}

template <class T>
void Buffers<T>::ensure_gradient(int i) {
    if (!take_gradient_unzeroed(i)) return;
    Slot& s = (*this)[i];
    std::fill(s.grad.begin(), s.grad.end(), T(0));
}

template <class T>
bool Buffers<T>::take_gradient_unzeroed(int i) {
    Slot& s = (*this)[i];
    if (!needs_gradient(i) || s.by_rows || s.grad_alias >= 0 || s.grad.size() == s.dims.size()) return false;
    pool_.resize(s.grad, s.dims.size());
    return true;
}

template <class T>
void Buffers<T>::after_backward(const PassSchedule::Backward& step) {
    for (auto [consumer, addend] : step.hand_over) {
        Slot& s = (*this)[consumer];
        if (s.aliased_by != addend) continue;  // not linked: the run-time shapes differ
        Slot& a = (*this)[addend];
        a.grad = std::move(s.grad);
        a.grad_alias = -1;
        s.aliased_by = -1;
    }
    for (int i : step.free_grad) pool_.give(std::move((*this)[i].grad));
    for (int i : step.free_value) pool_.give(std::move((*this)[i].value));
}

template <class T>
void Buffers<T>::finish_gradient(int i) {
    if (!needs_gradient(i)) return;
    ensure_gradient(i);  // no step added into it: still to be zeroed
    Slot& s = (*this)[i];
    if (s.by_rows)
        s.by_rows->finish();
    else if (s.layout)
        zero_padding(s.grad.data(), *s.layout, s.sample.size());
}

template <class T>
std::span<const T> Buffers<T>::dense_gradient(int i) const {
    const Slot& s = (*this)[i];
    if (!s.by_rows) return s.grad;
    s.dense.assign(s.dims.size(), T(0));
    const std::size_t width = s.by_rows->width;
    for (std::size_t k = 0; k < s.by_rows->rows.size(); ++k)
        std::copy_n(s.by_rows->data.data() + k * width, width, s.dense.data() + s.by_rows->rows[k] * width);
    return s.dense;
}

template <class T>
const RowGradient<T>* Buffers<T>::row_gradient(int i) const {
    return needs_gradient(i) ? (*this)[i].by_rows.get() : nullptr;
}

template <class T>
std::span<T> Buffers<T>::mutable_dense_gradient(int i) {
    Slot& s = (*this)[i];
    if (!needs_gradient(i) || s.by_rows) return {};
    return s.grad;
}

template <class T>
RowGradient<T>* Buffers<T>::mutable_row_gradient(int i) {
    return needs_gradient(i) ? (*this)[i].by_rows.get() : nullptr;
}

template <class T>
void Buffers<T>::release_gradient(int i) {
    Slot& s = (*this)[i];
    if (!s.by_rows) pool_.give(std::move(s.grad));
}

template <class T>
Value Buffers<T>::to_value(int i, const T* from) const {
    const Slot& s = (*this)[i];
    std::vector<std::size_t> shape(s.dims.begin(), s.dims.end());
    auto a = xt::xarray<T>::from_shape(shape);
    std::copy_n(from, s.dims.size(), a.data());
    if (s.dyn == 2) return Value::time_major_sequences(std::move(a), s.layout);
    if (s.dyn == 1) return Value::batch(std::move(a));
    return Value::tensor(std::move(a));
}

template <class T>
std::size_t Buffers<T>::bytes_held() const {
    std::size_t total = pool_.free_bytes();
    for (const auto& s : slots_) {
        total += (s.value.capacity() + s.grad.capacity() + s.dense.capacity() + s.converted.capacity()) * sizeof(T);
        if (s.by_rows)
            total += s.by_rows->data.capacity() * sizeof(T) + s.by_rows->index.capacity() * sizeof(std::int32_t);
    }
    return total;
}

template class Buffers<float>;
template class Buffers<double>;
template void Buffers<float>::fill(int, std::span<const float>);
template void Buffers<float>::fill(int, std::span<const double>);
template void Buffers<double>::fill(int, std::span<const float>);
template void Buffers<double>::fill(int, std::span<const double>);

}  // namespace loom
