#include "training/model_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>
#include <variant>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "core/serialization.hpp"

namespace loom {

namespace {

// Distinguishes a model file from a checkpoint or any other checked file; the number is this
// layout's version. Version 2 records each parameter's precision (version 1: float only).
const std::string magic = "loom-model-file 2";
const std::string magic_v1 = "loom-model-file 1";
const std::string magic_prefix = "loom-model-file ";
constexpr int this_version = 2;

// What a file whose first string is `tag` is, when it is no model file this build reads.
std::string not_readable(const std::string& path, const std::string& tag) {
    if (tag.starts_with(magic_prefix)) {
        const std::string number = tag.substr(magic_prefix.size());
        int version = 0;
        const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), version);
        if (error == std::errc() && end == number.data() + number.size() && version > this_version)
            return path + ": a model file written by a newer loom (version " + number +
                   "); this loom reads versions 1 to " + std::to_string(this_version) + ": use a newer loom";
    }
    if (tag == "loom-checkpoint")
        return path + ": not a loom model file but a checkpoint (load it with load_checkpoint)";
    return path + ": not a loom model file (a checkpoint or another loom file?)";
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

// A number for messages, shortly: 1e+308, -1, 2.5 (std::to_string writes 1e308 in 309 digits).
// The shortest text that reads back as x: 1048577, not 1.04858e+06, which reads as another number.
std::string number_text(double x) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, x).ptr;
    return std::string(text, end);
}

std::string shape_str(const std::vector<std::size_t>& dims) { return Shape(dims).str(); }

std::string dims_str(const std::vector<std::size_t>& dims) {
    std::string out;
    for (std::size_t d : dims) out += (out.empty() ? "" : ", ") + std::to_string(d);
    return "[" + out + "]";
}

// The values of a parameter of shape `dims`. The shape is checked before anything is allocated:
// its element count must fit in the bytes left (no product may overflow on the way), and so must
// the strides xtensor computes (signed) from the non-zero dimensions.
template <class T>
xt::xarray<T> read_values(ByteReader& r, const std::string& path, const std::string& name,
                          const std::vector<std::size_t>& dims) {
    const std::uint64_t available = r.remaining() / sizeof(T);
    std::uint64_t count = 1, strides = 1;
    bool fits = true;
    for (std::size_t d : dims) {
        const std::uint64_t nonzero = std::max<std::uint64_t>(d, 1);
        if (strides > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / nonzero) fits = false;
        strides = fits ? strides * nonzero : strides;
        if (d != 0 && count > available / d) fits = false;
        count = fits ? count * d : count;
    }
    if (!fits)
        throw DataError(path + ": parameter " + quoted_field(name) + " of shape " + dims_str(dims) +
                        " has more elements than the " + std::to_string(r.remaining()) +
                        " bytes left in the file hold");
    std::vector<T> values;
    if constexpr (std::is_same_v<T, double>)
        values = r.doubles();
    else
        values = r.floats();
    if (values.size() != count)
        throw DataError(path + ": parameter " + quoted_field(name) + " of shape " + dims_str(dims) + " holds " +
                        std::to_string(values.size()) + " values");
    if (const std::string bad = first_non_finite<T>(values); !bad.empty())
        throw DataError(path + ": parameter " + quoted_field(name) + " holds " + bad +
                        "; a model file holds finite values only");
    xt::xarray<T> v = xt::zeros<T>(dims);
    std::copy(values.begin(), values.end(), v.begin());
    return v;
}

template <class T>
void check_finite(const std::string& path, const Parameter& p, const xt::xarray<T>& data) {
    if (const std::string bad = first_non_finite<T>({data.data(), data.size()}); !bad.empty())
        throw UserError("save_model_file " + path + ": parameter '" + p.name() + "' " + p.shape().str() + " holds " +
                        bad + "; a non-finite value is never saved");
}

// Calls f with the file's value of `name`, in whichever precision it was saved; false if none.
template <class F>
bool with_stored(const ModelFile& file, const std::string& name, F&& f) {
    const auto it = file.parameters.find(name);
    if (it == file.parameters.end()) return false;
    std::visit(f, it->second);
    return true;
}

}  // namespace

void save_model_file(const std::string& path, const std::string& kind, const std::vector<Parameter>& parameters,
                     const std::map<std::string, std::string>& records) {
    std::set<std::string> names;
    for (const auto& p : parameters) {
        if (p.name().empty())
            throw UserError("save_model_file " + path + ": a parameter of shape " + p.shape().str() +
                            " has no name; parameters are stored by name");
        if (!names.insert(p.name()).second)
            throw UserError("save_model_file " + path + ": two parameters are named '" + p.name() + "'");
        if (p.dtype() == DType::f64)
            check_finite(path, p, p.data<double>());
        else
            check_finite(path, p, p.data<float>());
    }
    ByteWriter w;
    w.str(magic);
    w.str(kind);
    w.u64(records.size());
    for (const auto& [key, value] : records) {
        w.str(key);
        w.str(value);
    }
    w.u64(parameters.size());
    for (const auto& p : parameters) {
        w.str(p.name());
        const auto& dims = p.shape().dims();
        w.u64(dims.size());
        for (std::size_t d : dims) w.u64(d);
        if (p.dtype() == DType::f64) {
            w.u64(1);
            const auto& v = p.data<double>();
            w.doubles({v.data(), v.size()});
        } else {
            w.u64(0);
            const auto& v = p.data<float>();
            w.floats({v.data(), v.size()});
        }
    }
    write_checked_file(path, w.bytes());
}

ModelFile read_model_file(const std::string& path, const std::string& expected_kind) {
    const std::string bytes = read_checked_file(path);
    ByteReader r(bytes, path);
    const std::string tag = r.str();
    if (tag != magic && tag != magic_v1) throw DataError(not_readable(path, tag));
    ModelFile f;
    f.path = path;
    f.kind = r.str();
    if (!expected_kind.empty() && f.kind != expected_kind)
        throw UserError(path + ": holds a model of kind " + quoted_field(f.kind) + ", not a '" + expected_kind +
                        "' model");
    for (std::uint64_t n = r.u64(), i = 0; i < n; ++i) {
        std::string key = r.str();
        f.records[key] = r.str();
    }
    for (std::uint64_t n = r.u64(), i = 0; i < n; ++i) {
        const std::string name = r.str();
        const std::uint64_t rank = r.u64();
        if (rank > max_rank)
            throw DataError(path + ": parameter " + quoted_field(name) + " has rank " + std::to_string(rank));
        std::vector<std::size_t> dims;
        for (std::uint64_t k = 0; k < rank; ++k) dims.push_back(r.u64());
        const std::uint64_t precision = tag == magic ? r.u64() : 0;
        if (precision > 1)
            throw DataError(path + ": parameter " + quoted_field(name) + " has an unknown precision tag");
        const bool fresh = precision == 1 ? f.parameters.emplace(name, read_values<double>(r, path, name, dims)).second
                                          : f.parameters.emplace(name, read_values<float>(r, path, name, dims)).second;
        if (!fresh) throw DataError(path + ": parameter " + quoted_field(name) + " appears twice");
    }
    if (!r.done()) throw DataError(path + ": unexpected bytes after the last parameter");
    return f;
}

const std::string& ModelFile::record(const std::string& key) const {
    const auto it = records.find(key);
    if (it == records.end()) throw DataError(path + ": the model file has no '" + key + "' record");
    return it->second;
}

bool ModelFile::has_setting(const std::string& name) const {
    std::istringstream in(record("settings"));
    for (std::string key, value; in >> key >> value;)
        if (key == name) return true;
    return false;
}

double ModelFile::setting(const std::string& name) const {
    std::istringstream in(record("settings"));
    for (std::string key, value; in >> key >> value;) {
        if (key != name) continue;
        double x = 0;
        const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), x);
        if (error != std::errc() || end != value.data() + value.size())
            throw DataError(path + ": setting '" + name + "' is " + quoted_field(value) + ", not a number");
        if (!std::isfinite(x)) throw DataError(path + ": setting '" + name + "' is " + value + ", not a finite number");
        return x;
    }
    throw DataError(path + ": its settings lack '" + name + "'");
}

double ModelFile::setting(const std::string& name, double min, double max) const {
    const double x = setting(name);
    if (!(x >= min && x <= max))
        throw DataError(path + ": setting '" + name + "' is " + number_text(x) + ", outside [" + number_text(min) +
                        ", " + number_text(max) + "]");
    return x;
}

std::size_t ModelFile::whole_setting(const std::string& name, std::size_t min, std::size_t max) const {
    const double x = setting(name);
    // Compared as doubles before the conversion: a double beyond size_t's range converts to UB.
    if (!(x >= double(min) && x <= double(max) && x == std::floor(x)))
        throw DataError(path + ": setting '" + name + "' is " + number_text(x) + ", not a whole number from " +
                        std::to_string(min) + " to " + std::to_string(max));
    return static_cast<std::size_t>(x);
}

ModelFile ModelFile::settings_in(const std::string& key) const {
    ModelFile view;
    view.path = path;
    view.records["settings"] = record(key);
    return view;
}

void ModelFile::check_parameter_count(double wanted) const {
    double held = 0;
    for (const auto& [name, value] : parameters)
        held += static_cast<double>(std::visit([](const auto& a) { return a.size(); }, value));
    if (held == wanted) return;
    std::ostringstream message;  // whole numbers in full, however large the claim
    message << std::fixed << std::setprecision(0) << path << ": its settings make a model of " << wanted
            << " numbers, but its parameters hold " << held << "; it is not a model file loom wrote";
    throw DataError(message.str());
}

std::string settings_record(const std::map<std::string, double>& settings) {
    std::ostringstream out;
    out.precision(17);
    for (const auto& [name, value] : settings) {
        if (name.empty() || name.find_first_of(" \t\n") != std::string::npos)
            throw UserError("settings_record: the name '" + name + "' is empty or holds white space");
        if (!std::isfinite(value))
            throw UserError("settings_record: setting '" + name + "' is " + number_text(value) +
                            "; a non-finite value is never saved");
        out << (out.tellp() > 0 ? " " : "") << name << " " << value;
    }
    return out.str();
}

void assign_parameters(const ModelFile& file, const std::vector<Parameter>& parameters) {
    std::vector<std::string> missing, mis_shaped, extra;
    std::set<std::string> wanted;
    for (const auto& p : parameters) {
        wanted.insert(p.name());
        const bool found = with_stored(file, p.name(), [&](const auto& stored) {
            const std::vector<std::size_t> dims(stored.shape().begin(), stored.shape().end());
            if (dims != p.shape().dims())
                mis_shaped.push_back("'" + p.name() + "' is " + shape_str(dims) + " in the file, " + p.shape().str() +
                                     " in the model");
        });
        if (!found) missing.push_back("'" + p.name() + "' " + p.shape().str());
    }
    for (const auto& [name, v] : file.parameters)
        if (!wanted.count(name)) extra.push_back(quoted_field(name));
    if (!missing.empty() || !mis_shaped.empty() || !extra.empty()) {
        std::string msg = file.path + ": the parameters do not match the model";
        if (!missing.empty()) msg += "; missing from the file: " + join(missing);
        if (!extra.empty()) msg += "; in the file but not in the model: " + join(extra);
        if (!mis_shaped.empty()) msg += "; of another shape: " + join(mis_shaped);
        throw UserError(msg);
    }
    // Checked before anything changes: a double beyond float's range has no float to become.
    for (const auto& p : parameters)
        with_stored(file, p.name(), [&]<class T>(const xt::xarray<T>& stored) {
            if constexpr (std::is_same_v<T, double>)
                if (p.dtype() == DType::f32)
                    if (const std::string bad = first_beyond_float({stored.data(), stored.size()}); !bad.empty())
                        throw DataError(file.path + ": parameter " + quoted_field(p.name()) + " holds " + bad +
                                        beyond_float_reason);
        });
    for (const auto& p : parameters) with_stored(file, p.name(), [&](const auto& stored) { p.set_value(stored); });
}

}  // namespace loom
