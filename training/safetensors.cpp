#include "training/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "core/serialization.hpp"

namespace loom {

namespace {

using Json = nlohmann::json;

// The reference implementation's cap: a larger header is refused before it is read.
constexpr std::uint64_t max_header_bytes = 100'000'000;
// A header's deepest value is a shape or data_offsets entry: in an array (3) in a tensor's object
// (2) in the header (1). Anything deeper is refused while parsing, before it is built.
constexpr std::size_t max_depth = 3;
constexpr const char* metadata_key = "__metadata__";

// The dtypes loom reads, and the byte size of one element of each.
struct Readable {
    const char* name;
    std::size_t size;
};
constexpr Readable readable_dtypes[] = {{"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}};
// The format's other dtypes: named as such rather than as unknown.
const std::set<std::string> other_dtypes = {"BOOL",    "U8",      "I8",  "I16",     "U16",        "I32",
                                            "U32",     "I64",     "U64", "F8_E5M2", "F8_E4M3",    "F8_E8M0",
                                            "F6_E2M3", "F6_E3M2", "F4",  "C64",     "F8_E4M3FNUZ"};

// One tensor as the header describes it, checked against the data's size.
struct Entry {
    std::string name;
    Readable dtype;
    std::vector<std::size_t> shape;
    std::uint64_t begin = 0, end = 0;
};

struct Header {
    std::vector<Entry> entries;  // in the order of their bytes
    std::map<std::string, std::string> metadata;
};

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

std::string dims_str(const std::vector<std::size_t>& dims) {
    std::string out;
    for (std::size_t d : dims) out += (out.empty() ? "" : ", ") + std::to_string(d);
    return "[" + out + "]";
}

std::string number_text(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

// A JSON value for a message, cut short (a string in it may be megabytes long).
std::string short_json(const Json& j) {
    const std::string text = j.dump();
    return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

std::string le64(std::uint64_t n) {
    std::string s(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s;
}

template <class U>
U load_le(const char* p) {
    U u = 0;
    for (std::size_t i = sizeof(U); i-- > 0;) u = static_cast<U>((u << 8) | static_cast<unsigned char>(p[i]));
    return u;
}

// IEEE half precision to float: every half is a float exactly, subnormals, infinities and NaN too.
float half_to_float(std::uint16_t h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    float magnitude = 0;
    if (exponent == 0)
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    else if (exponent == 31)
        magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    else
        magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

// The values of `e` from its bytes at `bytes`: F32, F16 and BF16 as float, F64 as double.
ByDType<Array> decode(const Entry& e, const char* bytes) {
    const std::string_view dtype = e.dtype.name;
    if (dtype == "F64") {
        auto v = xt::xarray<double>::from_shape(e.shape);
        for (std::size_t i = 0; i < v.size(); ++i)
            v.data()[i] = std::bit_cast<double>(load_le<std::uint64_t>(bytes + 8 * i));
        return v;
    }
    auto v = xt::xarray<float>::from_shape(e.shape);
    float* out = v.data();
    if (dtype == "F32")
        for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<float>(load_le<std::uint32_t>(bytes + 4 * i));
    else if (dtype == "BF16")  // the top half of a float's bits
        for (std::size_t i = 0; i < v.size(); ++i)
            out[i] = std::bit_cast<float>(std::uint32_t{load_le<std::uint16_t>(bytes + 2 * i)} << 16);
    else
        for (std::size_t i = 0; i < v.size(); ++i) out[i] = half_to_float(load_le<std::uint16_t>(bytes + 2 * i));
    return v;
}

// The header's size from a file's first 8 bytes (`first`, of a file of `total` bytes), checked
// against the cap and the file before the header is read.
std::uint64_t header_size(std::string_view first, std::uint64_t total, const std::string& source) {
    if (total < 8)
        throw DataError(source + ": " + std::to_string(total) +
                        " bytes, fewer than the 8 of a safetensors header size; not a safetensors file");
    const std::uint64_t n = load_le<std::uint64_t>(first.data());
    if (n > max_header_bytes)
        throw DataError(source + ": a header of " + std::to_string(n) + " bytes is larger than the " +
                        std::to_string(max_header_bytes) + " loom reads; not a safetensors file?");
    if (n > total - 8)
        throw DataError(source + ": a header of " + std::to_string(n) + " bytes runs past the end of the file (" +
                        std::to_string(total) + " bytes); truncated?");
    return n;
}

// Refuses, in a pass of nlohmann's SAX parser before the header is built, a key given twice in one
// object (a JSON object may not say which one counts; nlohmann would keep the last silently) and
// nesting deeper than a header has. A pass of its own, linear in the header: nlohmann's parser
// callback could check the same while building, but it rescans the parent object after every
// entry: the time grew with the square of the tensors.
class HeaderCheck final : public Json::json_sax_t {
public:
    explicit HeaderCheck(const std::string& source) : source_(source) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(Json::number_integer_t) override { return true; }
    bool number_unsigned(Json::number_unsigned_t) override { return true; }
    bool number_float(Json::number_float_t, const Json::string_t&) override { return true; }
    bool string(Json::string_t&) override { return true; }
    bool binary(Json::binary_t&) override { return true; }
    bool start_object(std::size_t) override { return open(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(Json::string_t& key) override {
        if (!open_.back().insert(key).second)
            throw DataError(source_ + ": the header holds the key " + quoted_field(key) + " twice in one object");
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const Json::exception& e) override {
        error_ = e.what();
        return false;
    }
    /// Whether the header's object (or array) was read whole: what follows it, if anything, is no JSON.
    bool complete() const { return complete_; }
    /// nlohmann's message for where the JSON is wrong.
    const std::string& error() const { return error_; }

private:
    bool open() {
        if (open_.size() == max_depth)
            throw DataError(source_ + ": the header nests deeper than the " + std::to_string(max_depth) +
                            " levels of a safetensors header");
        open_.emplace_back();
        return true;
    }
    bool close() {
        open_.pop_back();
        complete_ = open_.empty();
        return true;
    }
    const std::string& source_;
    std::vector<std::unordered_set<std::string>> open_;  // the keys of each open object (none for an array)
    bool complete_ = false;
    std::string error_;
};

// The byte after the JSON value `text` opens with (an object or an array, read whole already).
std::size_t end_of_value(std::string_view text) {
    std::size_t depth = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (escaped) {
            escaped = false;
        } else if (in_string) {
            escaped = c == '\\';
            in_string = c != '"';
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return text.size();
}

// nlohmann's message without its "[json.exception.parse_error.101] ", cut short, with the bytes it
// quotes from the file that could garble a terminal shown as '?'.
DataError not_json(const std::string& source, std::string why) {
    const std::size_t prefix = why.find("] ");
    why = why.substr(prefix == std::string::npos ? 0 : prefix + 2, 200);
    for (char& c : why)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return DataError(source + ": the header is not valid JSON (" + why + ")");
}

// The header as JSON, once it is known to hold one JSON value and white space after it, nothing
// else. The format pads a header with spaces; nlohmann's reader would end it at a NUL byte and
// ignore whatever follows, JSON or not.
Json parse_json(std::string_view text, const std::string& source) {
    auto offsets = [](std::size_t at) {
        return "byte " + std::to_string(at) + " of the header (offset " + std::to_string(at + 8) + " of the file)";
    };
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
        throw DataError(source + ": a NUL byte at " + offsets(nul) +
                        "; a safetensors header is JSON padded with spaces, and holds no NUL");
    HeaderCheck check(source);
    try {
        if (Json::sax_parse(text.begin(), text.end(), &check)) return Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past a double
        throw not_json(source, e.what());
    }
    if (!check.complete()) throw not_json(source, check.error());
    const std::size_t end = end_of_value(text);
    std::size_t at = text.find_first_not_of(" \t\n\r", end);
    if (at == std::string_view::npos) at = end;
    throw DataError(source + ": the header's JSON ends at byte " + std::to_string(end) + ", but " +
                    quoted_field(text.substr(at, 40)) + " follows at " + offsets(at) +
                    "; a safetensors header is padded with spaces only");
}

// A whole number from 0 to 2^64 - 1, else a DataError: `what` names it ("shape entry").
std::uint64_t whole_number(const Json& j, const std::string& at, const std::string& what) {
    if (j.is_number_unsigned()) return j.get<std::uint64_t>();
    if (!j.is_number()) throw DataError(at + what + " " + short_json(j) + " is not a number");
    if (j.is_number_integer() && j.get<std::int64_t>() == 0) return 0;  // written -0
    const double x = j.get<double>();
    if (x < 0) throw DataError(at + what + " " + short_json(j) + " is negative");
    // nlohmann reads a whole number past 2^64 - 1 as a double.
    if (x == std::floor(x) && x >= 0x1p64) throw DataError(at + what + " " + number_text(x) + " is too large");
    throw DataError(at + what + " " + short_json(j) + " is not a whole number");
}

const Json& field(const Json& entry, const char* key, const std::string& source, const std::string& name) {
    const auto it = entry.find(key);
    if (it == entry.end()) throw DataError(source + ": tensor " + quoted_field(name) + " has no \"" + key + "\"");
    return *it;
}

Entry parse_entry(const std::string& name, const Json& j, std::uint64_t data_size, const std::string& source) {
    const std::string at = source + ": tensor " + quoted_field(name) + ": ";
    if (!j.is_object()) throw DataError(source + ": tensor " + quoted_field(name) + " is not an object");
    Entry e;
    e.name = name;

    const Json& dtype = field(j, "dtype", source, name);
    if (!dtype.is_string()) throw DataError(at + "its \"dtype\" is not a string");
    const auto& dtype_name = dtype.get_ref<const std::string&>();
    const auto known = std::find_if(std::begin(readable_dtypes), std::end(readable_dtypes),
                                    [&](const Readable& r) { return dtype_name == r.name; });
    if (known == std::end(readable_dtypes)) {
        if (other_dtypes.count(dtype_name))
            throw DataError(source + ": tensor " + quoted_field(name) + " has dtype " + dtype_name +
                            ", which loom does not read (it reads F32, F64, F16 and BF16)");
        throw DataError(source + ": tensor " + quoted_field(name) + " has the unknown dtype " +
                        quoted_field(dtype_name));
    }
    e.dtype = *known;

    const Json& shape = field(j, "shape", source, name);
    if (!shape.is_array()) throw DataError(at + "its \"shape\" is not an array");
    for (const Json& d : shape) e.shape.push_back(whole_number(d, at, "shape entry"));
    if (e.shape.size() > max_rank)
        throw DataError(at + "shape " + dims_str(e.shape) + " has rank " + std::to_string(e.shape.size()) +
                        "; loom reads rank " + std::to_string(max_rank) + " at most");
    // The element count, and the strides xtensor computes (signed) from the non-zero dimensions,
    // must fit in 64 bits: [2^32, 2^32] would otherwise wrap to 0 elements.
    std::uint64_t count = 1, strides = 1;
    bool fits = true;
    for (std::size_t d : e.shape) {
        fits = fits && !__builtin_mul_overflow(count, std::uint64_t{d}, &count);
        fits = fits && !__builtin_mul_overflow(strides, std::max<std::uint64_t>(d, 1), &strides);
    }
    std::uint64_t bytes = 0;
    fits = fits && strides <= static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) &&
           !__builtin_mul_overflow(count, std::uint64_t{e.dtype.size}, &bytes);
    if (!fits) throw DataError(at + "shape " + dims_str(e.shape) + " overflows 64 bits");

    const Json& offsets = field(j, "data_offsets", source, name);
    if (!offsets.is_array() || offsets.size() != 2) throw DataError(at + "its \"data_offsets\" is not [begin, end]");
    e.begin = whole_number(offsets[0], at, "data offset");
    e.end = whole_number(offsets[1], at, "data offset");
    const std::string range = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end) throw DataError(at + range + " begin after they end");
    if (e.end > data_size)
        throw DataError(at + range + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
    if (e.end - e.begin != bytes)
        throw DataError(at + range + " hold " + std::to_string(e.end - e.begin) + " bytes, but shape " +
                        dims_str(e.shape) + " of " + e.dtype.name + " takes " + std::to_string(bytes));
    return e;
}

// The header's tensors, sorted by where their bytes lie, once they are known to tile the
// `data_size` bytes after the header exactly, as the format requires.
Header parse_header(std::string_view text, std::uint64_t data_size, const std::string& source) {
    const Json root = parse_json(text, source);
    if (!root.is_object()) throw DataError(source + ": the header is not a JSON object");
    Header h;
    for (const auto& [key, value] : root.items()) {
        if (key != metadata_key) {
            h.entries.push_back(parse_entry(key, value, data_size, source));
            continue;
        }
        if (!value.is_object() || !std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); }))
            throw DataError(source + ": \"__metadata__\" is not an object of strings");
        for (const auto& [k, v] : value.items()) h.metadata[k] = v.get<std::string>();
    }
    std::sort(h.entries.begin(), h.entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
    std::uint64_t covered = 0;
    const Entry* previous = nullptr;
    auto hole = [&](std::uint64_t from, std::uint64_t to) {
        return DataError(source + ": bytes " + std::to_string(from) + " to " + std::to_string(to) +
                         " of the data belong to no tensor; a safetensors file's tensors cover its data exactly");
    };
    for (const Entry& e : h.entries) {
        if (e.begin < covered)
            throw DataError(source + ": tensors " + quoted_field(previous->name) + " and " + quoted_field(e.name) +
                            " overlap (bytes " + std::to_string(previous->begin) + " to " +
                            std::to_string(previous->end) + " and " + std::to_string(e.begin) + " to " +
                            std::to_string(e.end) + ")");
        if (e.begin > covered) throw hole(covered, e.begin);
        covered = e.end;
        previous = &e;
    }
    if (covered != data_size) throw hole(covered, data_size);
    return h;
}

// `values` appended as little-endian bytes, whatever this machine's order.
template <class T>
void append_le(std::string& out, const xt::xarray<T>& values) {
    if constexpr (std::endian::native == std::endian::little) {
        out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    } else {
        for (T v : values) {
            const auto bits = std::bit_cast<std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>>(v);
            for (std::size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
        }
    }
}

// Refuses, before anything is written, text the JSON header could not hold.
void check_utf8(const std::string& text, const std::string& at, const std::string& what) {
    try {
        (void)Json(text).dump();
    } catch (const Json::type_error&) {
        throw UserError(at + what + " " + quoted_field(text) + " is not UTF-8, which a safetensors header must be");
    }
}

template <class T>
void check_finite(const std::string& at, const Parameter& p, const xt::xarray<T>& data) {
    if (const std::string bad = first_non_finite<T>({data.data(), data.size()}); !bad.empty())
        throw UserError(at + "parameter '" + p.name() + "' " + p.shape().str() + " holds " + bad +
                        "; a non-finite value is never saved");
}

}  // namespace

std::vector<std::size_t> SafetensorsTensor::shape() const {
    return std::visit([](const auto& v) { return std::vector<std::size_t>(v.shape().begin(), v.shape().end()); },
                      values);
}

void save_safetensors(const std::string& path, const std::vector<Parameter>& parameters,
                      const std::map<std::string, std::string>& metadata) {
    const std::string at = "save_safetensors " + path + ": ";
    std::set<std::string> names;
    for (const auto& p : parameters) {
        if (p.name().empty())
            throw UserError(at + "a parameter of shape " + p.shape().str() +
                            " has no name; tensors are stored by name");
        if (p.name() == metadata_key)
            throw UserError(at +
                            "a parameter is named \"__metadata__\", the key a safetensors header keeps for metadata");
        if (!names.insert(p.name()).second) throw UserError(at + "two parameters are named '" + p.name() + "'");
        check_utf8(p.name(), at, "the parameter name");
        visit_dtype(p.dtype(), [&](auto zero) { check_finite(at, p, p.data<decltype(zero)>()); });
    }
    for (const auto& [key, value] : metadata) {
        check_utf8(key, at, "the metadata key");
        check_utf8(value, at, "the metadata value");
    }
    // Doubles first: with the header padded to 8 bytes, every tensor starts at a multiple of its
    // element size, as readers that map the file in place want (the reference writer does the same).
    std::vector<Parameter> ordered;
    for (const auto& p : parameters)
        if (p.dtype() == DType::f64) ordered.push_back(p);
    for (const auto& p : parameters)
        if (p.dtype() != DType::f64) ordered.push_back(p);
    Json header = Json::object();
    if (!metadata.empty()) header[metadata_key] = metadata;
    std::string data;
    for (const auto& p : ordered) {
        const std::size_t begin = data.size();
        const bool f64 = p.dtype() == DType::f64;
        if (f64)
            append_le(data, p.data<double>());
        else
            append_le(data, p.data<float>());
        header[p.name()] = {
            {"dtype", f64 ? "F64" : "F32"}, {"shape", p.shape().dims()}, {"data_offsets", {begin, data.size()}}};
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    write_file_atomically(path, {le64(text.size()), text, data});
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source) {
    const std::uint64_t n = header_size(bytes.substr(0, 8), bytes.size(), source);
    const Header h = parse_header(bytes.substr(8, n), bytes.size() - 8 - n, source);
    SafetensorsFile f;
    f.path = source;
    f.metadata = h.metadata;
    const char* data = bytes.data() + 8 + n;
    for (const Entry& e : h.entries) f.tensors[e.name] = {e.dtype.name, decode(e, data + e.begin)};
    return f;
}

SafetensorsFile read_safetensors(const std::string& path) {
    const std::uint64_t total = require_regular_file(path, "give the path of a safetensors file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
    // Read in the order of the file, each tensor's bytes once and only once the header has shown
    // they are there: nothing is allocated for sizes a damaged header claims.
    auto read = [&](std::string& into, std::uint64_t size) {
        into.resize(size);
        in.read(into.data(), static_cast<std::streamsize>(size));
        if (in.gcount() != static_cast<std::streamsize>(size))
            throw DataError("'" + path + "' changed size while being read");
    };
    std::string bytes;
    read(bytes, std::min<std::uint64_t>(total, 8));
    const std::uint64_t n = header_size(bytes, total, path);
    read(bytes, n);
    const Header h = parse_header(bytes, total - 8 - n, path);
    SafetensorsFile f;
    f.path = path;
    f.metadata = h.metadata;
    for (const Entry& e : h.entries) {
        read(bytes, e.end - e.begin);
        f.tensors[e.name] = {e.dtype.name, decode(e, bytes.data())};
    }
    if (in.peek() != std::char_traits<char>::eof()) throw DataError("'" + path + "' changed size while being read");
    return f;
}

void assign_safetensors(const SafetensorsFile& file, const std::vector<Parameter>& parameters, ExtraTensors extra) {
    std::vector<std::string> missing, mis_shaped, extras;
    std::set<std::string> wanted;
    for (const auto& p : parameters) {
        wanted.insert(p.name());
        const auto it = file.tensors.find(p.name());
        if (it == file.tensors.end()) {
            missing.push_back("'" + p.name() + "' " + p.shape().str());
        } else if (const auto dims = it->second.shape(); dims != p.shape().dims()) {
            mis_shaped.push_back("'" + p.name() + "' is " + dims_str(dims) + " in the file, " + p.shape().str() +
                                 " in the model");
        }
    }
    if (extra == ExtraTensors::refuse)
        for (const auto& [name, tensor] : file.tensors)
            if (!wanted.count(name)) extras.push_back(quoted_field(name));
    if (!missing.empty() || !mis_shaped.empty() || !extras.empty()) {
        std::string msg = file.path + ": the tensors do not match the model's parameters";
        if (!missing.empty()) msg += "; missing from the file: " + join(missing);
        if (!extras.empty()) msg += "; in the file but not in the model: " + join(extras);
        if (!mis_shaped.empty()) msg += "; of another shape: " + join(mis_shaped);
        throw UserError(msg);
    }
    for (const auto& p : parameters)
        std::visit(
            [&](const auto& v) {
                using T = typename std::decay_t<decltype(v)>::value_type;
                if (const std::string bad = first_non_finite<T>({v.data(), v.size()}); !bad.empty())
                    throw DataError(file.path + ": tensor " + quoted_field(p.name()) + " holds " + bad +
                                    "; a parameter is never given a non-finite value");
                if constexpr (std::is_same_v<T, double>)
                    if (p.dtype() == DType::f32)
                        if (const std::string bad = first_beyond_float({v.data(), v.size()}); !bad.empty())
                            throw DataError(file.path + ": tensor " + quoted_field(p.name()) + " holds " + bad +
                                            beyond_float_reason);
            },
            file.tensors.at(p.name()).values);
    for (const auto& p : parameters)
        std::visit([&](const auto& v) { p.set_value(v); }, file.tensors.at(p.name()).values);
}

}  // namespace loom
