#include "training/averaging.hpp"

#include "core/errors.hpp"

namespace loom {

ParameterAverage::ParameterAverage(std::vector<Parameter> parameters) : parameters_(std::move(parameters)) {}

void ParameterAverage::add() {
    if (count_ == 0) sums_.clear();
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        const Parameter& p = parameters_[i];
        if (count_ == 0) {
            if (p.dtype() == DType::f64)
                sums_.emplace_back(p.value<double>());
            else
                sums_.emplace_back(p.value<float>());
            continue;
        }
        // A parameter converted by to_precision since the first add: its sum follows it.
        if (p.dtype() == DType::f64) {
            if (auto* f = std::get_if<xt::xarray<float>>(&sums_[i])) sums_[i] = xt::xarray<double>(*f);
            std::get<xt::xarray<double>>(sums_[i]) += p.data<double>();
        } else {
            if (auto* d = std::get_if<xt::xarray<double>>(&sums_[i])) sums_[i] = xt::xarray<float>(*d);
            std::get<xt::xarray<float>>(sums_[i]) += p.data<float>();
        }
    }
    ++count_;
}

void ParameterAverage::assign() const {
    if (count_ == 0) throw UserError("ParameterAverage::assign: no values were added (call add() first)");
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        if (const auto* d = std::get_if<xt::xarray<double>>(&sums_[i]))
            parameters_[i].set_value(xt::xarray<double>(*d / double(count_)));
        else
            parameters_[i].set_value(xt::xarray<float>(std::get<xt::xarray<float>>(sums_[i]) / float(count_)));
    }
}

}  // namespace loom
