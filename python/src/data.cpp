// numpy in, numpy out. In: each input's data is checked against its shape and dynamic axes before
// anything runs, then copied once into loom's layout (sequences padded time-major). Out: arrays that
// share the result's storage, no copy.
#include <cstring>
#include <sstream>

#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

std::string tuple_text(const std::vector<std::size_t>& dims) {
    std::ostringstream out;
    out << "(";
    for (std::size_t i = 0; i < dims.size(); ++i) out << (i ? ", " : "") << dims[i];
    out << (dims.size() == 1 ? ",)" : ")");
    return out.str();
}

/// "[T, 2, 3]": an array of `lead` leading axes and then the sample's.
std::string layout_text(const char* lead, const Shape& sample) {
    std::string text = std::string("[") + lead;
    for (std::size_t d : sample) text += ", " + std::to_string(d);
    return text + "]";
}

std::vector<std::size_t> dims_of(const py::array& a) { return {a.shape(), a.shape() + a.ndim()}; }

std::string array_text(const py::array& a) {
    return "an array of shape " + tuple_text(dims_of(a)) + " and dtype " + std::string(py::str(py::object(a.dtype())));
}

/// What an input takes, for messages: "sequence input 'q' of sample shape (2,)".
std::string input_text(const Variable& input) {
    const char* kind = input.axis().is_sequence()  ? "sequence input"
                       : input.axis().is_dynamic() ? "input"
                                                   : "static input";
    std::string text = std::string(kind) + (input.name().empty() ? "" : " '" + input.name() + "'");
    return text + " of sample shape " + tuple_text(input.shape().dims());
}

/// Whether `dims` (leading dynamic axes stripped) is the input's sample shape; a 0 in the input's
/// shape (any_size) takes any size. For sample shape (1,) the trailing 1 may be left out.
bool sample_fits(const std::vector<std::size_t>& dims, std::size_t lead, const Shape& sample) {
    if (dims.size() < lead) return false;
    std::vector<std::size_t> rest(dims.begin() + static_cast<std::ptrdiff_t>(lead), dims.end());
    if (sample == Shape{1} && rest.empty()) return true;
    if (rest.size() != sample.rank()) return false;
    for (std::size_t i = 0; i < rest.size(); ++i)
        if (sample[i] != 0 && sample[i] != rest[i]) return false;
    return true;
}

/// The element type an array becomes: float32 and float64 as they are, integers and booleans as
/// float32 (ids and masks; whole numbers up to 2^24 exactly); anything else a UserError.
DType dtype_for(const py::array& a, const std::string& where) {
    const py::dtype dt = a.dtype();
    const char kind = dt.kind();
    if (kind == 'f' && dt.itemsize() == 8) return DType::f64;
    if (kind == 'f' && dt.itemsize() == 4) return DType::f32;
    if (kind == 'i' || kind == 'u' || kind == 'b') {
        if (a.size() > 0 && (kind == 'i' || kind == 'u')) {
            py::object numpy = py::module_::import("numpy");
            const double largest = numpy.attr("max")(numpy.attr("abs")(a)).cast<double>();
            if (largest > static_cast<double>(Value::max_exact_float_id))
                throw UserError(where + ": integer data up to 2^24 = 16777216 is held exactly (as float32); got " +
                                std::to_string(static_cast<long long>(largest)));
        }
        return DType::f32;
    }
    throw UserError(where + ": takes float32 or float64 data (or integer ids); got dtype " +
                    std::string(py::str(py::object(dt))));
}

py::array as_array(py::handle data, const std::string& where) {
    if (py::isinstance<py::array>(data)) return py::reinterpret_borrow<py::array>(data);
    try {
        // A scipy.sparse matrix or array (CNTK's one-hot data): its dense values, as loom stores them.
        if (py::hasattr(data, "toarray") && py::hasattr(data, "nnz"))
            return py::module_::import("numpy").attr("asarray")(data.attr("toarray")());
        return py::module_::import("numpy").attr("asarray")(data);
    } catch (py::error_already_set& e) {
        throw UserError(where + ": the data is not an array (numpy says: " + std::string(py::str(e.value())) + ")");
    }
}

/// `a` as a C-contiguous array of T (integers converted), and its elements.
template <class T>
py::array_t<T, py::array::c_style | py::array::forcecast> contiguous(const py::array& a) {
    return numbers_of<T>(a, "the data");
}

template <class T>
Value make_sequences(const std::vector<py::array>& seqs, const Shape& sample) {
    std::vector<std::size_t> lengths;
    for (const py::array& s : seqs) lengths.push_back(static_cast<std::size_t>(s.shape(0)));
    auto layout = std::make_shared<const SequenceLayout>(lengths);
    const std::size_t n = seqs.size(), row = sample.size();
    std::vector<std::size_t> shape{layout->max_length(), n};
    shape.insert(shape.end(), sample.begin(), sample.end());
    xt::xarray<T> data = xt::zeros<T>(shape);  // padding +0: bound without another copy
    for (std::size_t i = 0; i < n; ++i) {
        const auto s = contiguous<T>(seqs[i]);
        for (std::size_t t = 0; t < lengths[i]; ++t)
            std::memcpy(data.data() + (t * n + i) * row, s.data() + t * row, row * sizeof(T));
    }
    return Value::time_major_sequences(std::move(data), layout);
}

template <class T>
xt::xarray<T> owned(const py::array& a, std::vector<std::size_t> shape) {
    const auto c = contiguous<T>(a);
    xt::xarray<T> out = xt::zeros<T>(shape);
    std::copy_n(c.data(), c.size(), out.data());
    return out;
}

Value sequences_value(const Variable& input, py::handle data, const std::string& where) {
    const Shape& sample = input.shape();
    std::vector<py::array> seqs;
    if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
        for (py::handle item : data) seqs.push_back(as_array(item, where));
    } else {
        const py::array a = as_array(data, where);
        if (a.ndim() >= 2 && sample_fits(dims_of(a), 2, sample)) {
            for (py::ssize_t i = 0; i < a.shape(0); ++i) seqs.push_back(py::array(a.attr("__getitem__")(i)));
        } else if (a.ndim() >= 1 && sample_fits(dims_of(a), 1, sample)) {
            seqs.push_back(a);  // CNTK: one array [T, sample...] is a batch of one sequence
        } else {
            throw UserError(where + " takes a list of arrays " + layout_text("T_i", sample) + " (or one array " +
                            layout_text("N, T", sample) + ", or one sequence " + layout_text("T", sample) + "); got " +
                            array_text(a));
        }
    }
    if (seqs.empty()) throw UserError(where + ": a batch needs at least one sequence; got none");
    bool f64 = false;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        const std::string which = where + ", sequence " + std::to_string(i);
        if (sample != Shape{1} && seqs[i].ndim() >= 1 && !sample_fits(dims_of(seqs[i]), 1, sample) &&
            sample_fits(dims_of(seqs[i]), 0, sample)) {  // CNTK: one sample is a sequence of one step
            std::vector<py::ssize_t> one_step{1};
            one_step.insert(one_step.end(), seqs[i].shape(), seqs[i].shape() + seqs[i].ndim());
            seqs[i] = seqs[i].reshape(one_step);
        }
        if (seqs[i].ndim() < 1 || !sample_fits(dims_of(seqs[i]), 1, sample))
            throw UserError(which + ": takes an array " + layout_text("T", sample) + "; got " + array_text(seqs[i]));
        if (seqs[i].shape(0) == 0) throw UserError(which + " is empty; every sequence needs at least one step");
        f64 = dtype_for(seqs[i], which) == DType::f64 || f64;
    }
    return f64 ? make_sequences<double>(seqs, sample) : make_sequences<float>(seqs, sample);
}

Value batch_or_tensor_value(const Variable& input, py::handle data, const std::string& where, bool batch) {
    const Shape& sample = input.shape();
    const py::array a = as_array(data, where);
    if (!sample_fits(dims_of(a), batch ? 1 : 0, sample) || (batch && a.ndim() >= 1 && a.shape(0) == 0))
        throw UserError(where +
                        (batch ? " takes an array " + layout_text("N", sample) + " (N >= 1); got "
                               : std::string(" takes an array of its shape; got ")) +
                        array_text(a));
    std::vector<std::size_t> shape;
    if (batch) shape.push_back(static_cast<std::size_t>(a.shape(0)));
    for (std::size_t i = 0; i < sample.rank(); ++i)
        shape.push_back(sample[i] != 0
                            ? sample[i]
                            : static_cast<std::size_t>(a.shape(static_cast<py::ssize_t>(i + (batch ? 1 : 0)))));
    if (dtype_for(a, where) == DType::f64) {
        auto v = owned<double>(a, shape);
        return batch ? Value::batch(std::move(v)) : Value::tensor(std::move(v));
    }
    auto v = owned<float>(a, shape);
    return batch ? Value::batch(std::move(v)) : Value::tensor(std::move(v));
}

template <class T>
py::array view(const py::capsule& owner, const T* base, std::vector<std::size_t> shape) {
    std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
    py::ssize_t stride = sizeof(T);
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= dims[i];
    }
    return py::array_t<T>(dims, strides, base, owner);
}

template <class T>
py::object numpy_of(const std::shared_ptr<Value>& kept) {
    const Value& v = *kept;
    const xt::xarray<T>& data = v.data<T>();
    py::capsule owner(new std::shared_ptr<Value>(kept),
                      [](void* p) { delete static_cast<std::shared_ptr<Value>*>(p); });
    std::vector<std::size_t> shape(data.shape().begin(), data.shape().end());
    if (v.kind() != Value::Kind::Sequence) return view<T>(owner, data.data(), shape);
    // Sequence n is rows [0, L_n) of column n of [T_max, N, sample...]: a strided view.
    const std::size_t n = shape[1];
    const std::vector<std::size_t> sample(shape.begin() + 2, shape.end());
    std::size_t row = 1;
    for (std::size_t d : sample) row *= d;
    py::list out;
    for (std::size_t i = 0; i < n; ++i) {
        std::vector<py::ssize_t> dims{static_cast<py::ssize_t>(v.layout().length(i))};
        std::vector<py::ssize_t> strides{static_cast<py::ssize_t>(n * row * sizeof(T))};
        py::ssize_t stride = sizeof(T);
        std::vector<py::ssize_t> inner(sample.size());
        for (std::size_t k = sample.size(); k-- > 0;) {
            inner[k] = stride;
            stride *= static_cast<py::ssize_t>(sample[k]);
        }
        for (std::size_t k = 0; k < sample.size(); ++k) {
            dims.push_back(static_cast<py::ssize_t>(sample[k]));
            strides.push_back(inner[k]);
        }
        out.append(py::array_t<T>(dims, strides, data.data() + i * row, owner));
    }
    return out;
}

}  // namespace

Value to_value(const Variable& input, py::handle data, const char* caller) {
    if (py::isinstance<Value>(data)) return data.cast<Value>();
    const std::string where = std::string(caller) + ": " + input_text(input);
    if (input.axis().is_sequence()) return sequences_value(input, data, where);
    return batch_or_tensor_value(input, data, where, input.axis().is_dynamic());
}

py::object to_numpy(Value value) {
    auto kept = std::make_shared<Value>(std::move(value));
    if (kept->empty()) return py::none();
    return kept->dtype() == DType::f64 ? numpy_of<double>(kept) : numpy_of<float>(kept);
}

}  // namespace loom_python
