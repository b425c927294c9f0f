// safetensors files: float and double round trips bit for bit; a file from an independent writer
// (safetensors_fixture/make_fixture.py: Python's json and struct only) with F16 and BF16 values
// decoded by hand; missing, extra and mis-shaped names all listed; a table of hostile files, each a
// DataError naming the file and the problem, through the file reader and the in-memory one alike;
// non-finite values refused on saving and on assigning; a failed save leaving the previous file.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::read_bytes;
using loom::testing::TempDir;
using loom::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

// A u64 as its 8 little-endian bytes.
std::string le64(std::uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s;
}

// A whole file: the header's size, the header, the data.
std::string file_of(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// `values` as the little-endian bytes of their type (this machine's order, checked below).
template <class T>
std::string bytes_of(std::initializer_list<T> values) {
    static_assert(std::endian::native == std::endian::little, "the expected bytes are written little-endian");
    std::string s;
    for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return s;
}

std::string data_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const DataError& e) {
        return e.what();
    }
    FAIL_CHECK("no DataError");
    return {};
}

template <class T>
const xt::xarray<T>& values_of(const SafetensorsFile& f, const std::string& name) {
    return std::get<xt::xarray<T>>(f.tensors.at(name).values);
}

std::string fixture_path() {
    // A path object, not std::string's operator+: GCC 12 at -O1 warns (-Warray-bounds) on the inlined
    // concatenation of a literal this long, falsely.
    return (std::filesystem::path(LOOM_SOURCE_DIR) / "tests/training/safetensors_fixture/fixture.safetensors").string();
}

}  // namespace

TEST_CASE("safetensors: float and double parameters come back bit for bit, by name, with the metadata") {
    TempDir dir("safetensors_round_trip");
    const std::string path = dir.file("m.safetensors");
    const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
    const xt::xarray<float> w_value = {{0.1f, -0.0f, tiny}, {big, -3.5f, 1e-30f}};
    const xt::xarray<double> b_value = {0.1, -1e-310, 1e300, -0.0};
    Parameter w = parameter(w_value, "gpt.layers.0.self_attn.q.W");
    Parameter b = parameter(xt::xarray<float>(xt::zeros<float>({4})), "gpt.b");
    to_precision({b}, DType::f64);
    b.set_value(b_value);
    const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                         {"quote \"and\" \\ new\nline", "caf\xc3\xa9"}};
    save_safetensors(path, {w, b}, metadata);

    // The bytes, checked without loom's reader: a header of a multiple of 8 bytes opening with '{',
    // each tensor's values little-endian and contiguous, nothing else after the header.
    const std::string bytes = read_bytes(path);
    REQUIRE(bytes.size() >= 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n * 256 + static_cast<unsigned char>(bytes[i]);
    CHECK(n % 8 == 0);
    CHECK(bytes[8] == '{');
    CHECK(bytes.size() == 8 + n + 6 * 4 + 4 * 8);
    const std::string data = bytes.substr(8 + n);
    CHECK(data.find(std::string(reinterpret_cast<const char*>(w_value.data()), 6 * 4)) != std::string::npos);
    CHECK(data.find(std::string(reinterpret_cast<const char*>(b_value.data()), 4 * 8)) != std::string::npos);

    const SafetensorsFile f = read_safetensors(path);
    CHECK(f.path == path);
    CHECK(f.metadata == metadata);
    REQUIRE(f.tensors.size() == 2);
    CHECK(f.tensors.at("gpt.layers.0.self_attn.q.W").dtype == "F32");
    CHECK(f.tensors.at("gpt.b").dtype == "F64");
    CHECK(f.tensors.at("gpt.b").shape() == std::vector<std::size_t>{4});

    // Into parameters made in the other order, with other values: each is the saved one, bit for bit.
    Parameter b2 = parameter(xt::xarray<float>(xt::ones<float>({4})), "gpt.b");
    to_precision({b2}, DType::f64);
    Parameter w2 = parameter(xt::xarray<float>(xt::ones<float>({2, 3})), "gpt.layers.0.self_attn.q.W");
    assign_safetensors(f, {b2, w2});
    CHECK(std::memcmp(w2.data<float>().data(), w_value.data(), 6 * sizeof(float)) == 0);
    CHECK(std::memcmp(b2.data<double>().data(), b_value.data(), 4 * sizeof(double)) == 0);

    // Across precisions: F64 into a float parameter rounds, where a float can hold it (1e300 cannot);
    // F32 into a double one is exact.
    Parameter b_float = parameter(xt::xarray<float>(xt::zeros<float>({4})), "gpt.b");
    Parameter w_double = parameter(xt::xarray<float>(xt::zeros<float>({2, 3})), "gpt.layers.0.self_attn.q.W");
    to_precision({w_double}, DType::f64);
    CHECK_THROWS_WITH_AS(assign_safetensors(f, {b_float, w_double}), doctest::Contains("'gpt.b' holds 1e+300"),
                         DataError);
    b.set_value(xt::xarray<double>{0.1, -1e-310, 1e30, -0.0});
    save_safetensors(path, {w, b}, metadata);
    assign_safetensors(read_safetensors(path), {b_float, w_double});
    CHECK(b_float.data<float>()(0) == 0.1f);
    CHECK(b_float.data<float>()(2) == 1e30f);
    CHECK(w_double.data<double>()(0, 0) == double(0.1f));
    CHECK(w_double.data<double>()(0, 2) == double(tiny));
}

TEST_CASE("safetensors: a file from an independent writer reads, F16 and BF16 decoded as by hand") {
    const SafetensorsFile f = read_safetensors(fixture_path());
    CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"note", "caf\xc3\xa9"}});
    REQUIRE(f.tensors.size() == 6);

    CHECK(f.tensors.at("gpt.layers.0.self_attn.q.W").dtype == "F32");
    CHECK(values_of<float>(f, "gpt.layers.0.self_attn.q.W") ==
          xt::xarray<float>{{1.0f, -2.0f, 0.5f}, {3.25f, -0.125f, 1024.0f}});
    CHECK(f.tensors.at("double.b").dtype == "F64");
    CHECK(values_of<double>(f, "double.b") == xt::xarray<double>{0.1, -1e300, 2.5});
    // F16: 0x3C00 = 1; 0xC000 = -2; 0x3555 = 2^(13-15) (1 + 341/1024) = 0.333251953125; 0x0001 = the
    // smallest subnormal, 2^-24; 0x7BFF = the largest finite half, (2 - 2^-10) 2^15 = 65504.
    CHECK(f.tensors.at("half").dtype == "F16");
    CHECK(values_of<float>(f, "half") ==
          xt::xarray<float>{1.0f, -2.0f, 0.333251953125f, std::ldexp(1.0f, -24), 65504.0f});
    // BF16, the top half of a float: 0x3FC0 = 1.5; 0xC040 = -3; 0x3F80 = 1; 0x4049 = 2 (1 + 73/128) = 3.140625.
    CHECK(f.tensors.at("brain").dtype == "BF16");
    CHECK(values_of<float>(f, "brain") == xt::xarray<float>{{1.5f, -3.0f}, {1.0f, 3.140625f}});
    CHECK(f.tensors.at("scalar").shape().empty());
    CHECK(values_of<float>(f, "scalar")() == 7.0f);
    CHECK(f.tensors.at("empty").shape() == std::vector<std::size_t>{0, 4});

    // Into a model that has some of them: the others are named, or left when the caller says so.
    Parameter q = parameter(xt::xarray<float>(xt::zeros<float>({2, 3})), "gpt.layers.0.self_attn.q.W");
    Parameter brain = parameter(xt::xarray<float>(xt::zeros<float>({2, 2})), "brain");
    Parameter b = parameter(xt::xarray<float>(xt::zeros<float>({3})), "double.b");
    to_precision({b}, DType::f64);
    CHECK_THROWS_WITH_AS(assign_safetensors(f, {q, brain, b}),
                         doctest::Contains("in the file but not in the model: 'empty', 'half', 'scalar'"), UserError);
    CHECK(q.data<float>()(0, 0) == 0.0f);
    assign_safetensors(f, {q, brain, b}, ExtraTensors::ignore);
    CHECK(q.data<float>()(1, 2) == 1024.0f);
    CHECK(brain.data<float>()(1, 1) == 3.140625f);
    CHECK(b.data<double>()(0) == 0.1);
}

TEST_CASE("safetensors: F16 infinities, NaN, signed zero and subnormals decode exactly") {
    // 0x7C00 = inf, 0xFC00 = -inf, 0x7E00 = NaN, 0x8000 = -0, 0x03FF = 1023 2^-24, 0x0400 = 2^-14.
    const std::string data = bytes_of<std::uint16_t>({0x7C00, 0xFC00, 0x7E00, 0x8000, 0x03FF, 0x0400});
    const SafetensorsFile f =
        parse_safetensors(file_of(R"({"h":{"dtype":"F16","shape":[6],"data_offsets":[0,12]}})", data), "h");
    const auto& v = values_of<float>(f, "h");
    CHECK(v(0) == std::numeric_limits<float>::infinity());
    CHECK(v(1) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(v(2)));
    CHECK((v(3) == 0.0f && std::signbit(v(3))));
    CHECK(v(4) == 1023.0f * std::ldexp(1.0f, -24));
    CHECK(v(5) == std::ldexp(1.0f, -14));
}

TEST_CASE("safetensors: missing, extra and mis-shaped names are all listed and nothing changes") {
    TempDir dir("safetensors_mismatch");
    const std::string path = dir.file("m.safetensors");
    save_safetensors(path, {parameter(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}}, "w"),
                            parameter(xt::xarray<float>{1, 2}, "b"), parameter(xt::xarray<float>{9}, "old")});
    const SafetensorsFile f = read_safetensors(path);
    Parameter w = parameter(xt::xarray<float>(xt::zeros<float>({3, 2})), "w");
    Parameter b = parameter(xt::xarray<float>(xt::zeros<float>({2})), "b");
    Parameter e = parameter(xt::xarray<float>(xt::zeros<float>({5})), "e");
    std::string message;
    try {
        assign_safetensors(f, {w, b, e});
    } catch (const UserError& error) {
        message = error.what();
    }
    CHECK(message.find(path + ":") == 0);
    CHECK(message.find("missing from the file: 'e' [5]") != std::string::npos);
    CHECK(message.find("in the file but not in the model: 'old'") != std::string::npos);
    CHECK(message.find("'w' is [2, 3] in the file, [3, 2] in the model") != std::string::npos);
    CHECK(b.data<float>()(0) == 0.0f);  // b matched, but nothing is set when anything is wrong
    // The mis-shaped and the missing are errors even when extras are allowed.
    CHECK_THROWS_AS(assign_safetensors(f, {w, b, e}, ExtraTensors::ignore), UserError);
    CHECK(b.data<float>()(0) == 0.0f);
}

TEST_CASE("safetensors: a tensor holding NaN or an infinity is refused by name and element when assigned") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
    for (float bad : {nan, inf, -inf}) {
        CAPTURE(bad);
        // Reading keeps it (a file may hold a mask of -inf); a parameter never gets it.
        const SafetensorsFile f = parse_safetensors(file_of(header, bytes_of<float>({1.0f, 2.0f, bad})), "nan.st");
        Parameter w = parameter(xt::xarray<float>(xt::zeros<float>({3})), "w");
        CHECK(data_error([&] { assign_safetensors(f, {w}); }).find("nan.st: tensor 'w' holds") != std::string::npos);
        CHECK(data_error([&] { assign_safetensors(f, {w}); }).find("at element 2") != std::string::npos);
        CHECK(w.data<float>()(0) == 0.0f);
    }
}

TEST_CASE("safetensors: bad parameters are refused before writing, and a failed save leaves the previous file") {
    TempDir dir("safetensors_save");
    const std::string path = dir.file("m.safetensors");
    Parameter w = parameter(xt::xarray<float>{1, 2, 3}, "w");
    save_safetensors(path, {w});
    const std::string before = read_bytes(path);

    xt::xarray<float> nan_value = {1, 2, std::numeric_limits<float>::quiet_NaN()};
    Parameter d = parameter(xt::xarray<float>{1, 2}, "d");
    to_precision({d}, DType::f64);
    d.set_value(xt::xarray<double>{1.0, -std::numeric_limits<double>::infinity()});
    CHECK_THROWS_WITH_AS(save_safetensors(path, {parameter(nan_value, "n")}),
                         doctest::Contains("parameter 'n' [3] holds nan at element 2"), UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {d}), doctest::Contains("parameter 'd' [2] holds -inf at element 1"),
                         UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {w, parameter(xt::xarray<float>{1}, "")}),
                         doctest::Contains("has no name"), UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {w, parameter(xt::xarray<float>{1}, "w")}),
                         doctest::Contains("two parameters are named 'w'"), UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {parameter(xt::xarray<float>{1}, "__metadata__")}),
                         doctest::Contains("__metadata__"), UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {parameter(xt::xarray<float>{1}, "bad\xff")}),
                         doctest::Contains("not UTF-8"), UserError);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {w}, {{"key", "bad\xc3"}}), doctest::Contains("not UTF-8"), UserError);
    // A directory where the file would be: the write fails, and the directory is untouched.
    fs::create_directory(dir.file("taken"));
    CHECK_THROWS_AS(save_safetensors(dir.file("taken"), {w}), UserError);
    CHECK(fs::is_directory(dir.file("taken")));

    CHECK(read_bytes(path) == before);
    CHECK(dir.names() == std::vector<std::string>{"m.safetensors", "taken"});  // no temporary left
}

TEST_CASE("safetensors: a missing file, a directory, a FIFO or a device is a DataError naming it") {
    TempDir dir("safetensors_not_regular");
    CHECK_THROWS_WITH_AS(read_safetensors(dir.file("absent")), doctest::Contains("absent"), DataError);
    CHECK_THROWS_WITH_AS(read_safetensors(dir.path.string()), doctest::Contains("is a directory"), DataError);
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(read_safetensors(fifo), doctest::Contains("not a regular file"), DataError);
    CHECK_THROWS_WITH_AS(read_safetensors("/dev/zero"),
                         doctest::Contains("'/dev/zero' is a character device, not a regular file"), DataError);
}

TEST_CASE("safetensors: every hostile file is a DataError naming the file and the problem") {
    struct Case {
        const char* what;
        std::string bytes;
        const char* says;
    };
    const std::string f4 = bytes_of<float>({1.0f});  // 4 bytes of data
    auto entry = [](const std::string& fields) { return R"({"a":{)" + fields + "}}"; };
    std::string deep = R"({"a":{"dtype":"F32","shape":)";
    for (int i = 0; i < 100000; ++i) deep += '[';
    const std::vector<Case> cases = {
        {"empty", "", "0 bytes, fewer than the 8"},
        {"7 bytes", std::string(7, '\0'), "7 bytes, fewer than the 8"},
        {"header past the end", le64(100) + "{}", "header of 100 bytes runs past the end"},
        {"header above the cap", le64(100'000'001) + "{}", "header of 100000001 bytes is larger than"},
        {"header size 2^64 - 1", le64(~std::uint64_t{0}) + "{}", "header of 18446744073709551615 bytes is larger"},
        {"not JSON", file_of("{not json}", ""), "the header is not valid JSON"},
        {"not UTF-8", file_of("{\"\xff\":1}", ""), "the header is not valid JSON"},
        {"a number past a double", file_of("{\"w\":66e666666666}", ""), "the header is not valid JSON"},
        {"an array", file_of("[1, 2]", ""), "the header is not a JSON object"},
        {"nested deep", file_of(deep, ""), "the header nests deeper than"},
        {"a name twice", file_of(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{}})", f4),
         "the header holds the key 'a' twice"},
        {"a field twice", file_of(entry(R"("dtype":"F32","dtype":"F64","shape":[],"data_offsets":[0,4])"), f4),
         "the header holds the key 'dtype' twice"},
        {"entry not an object", file_of(R"({"a":3})", ""), "tensor 'a' is not an object"},
        {"no dtype", file_of(entry(R"("shape":[1],"data_offsets":[0,4])"), f4), "tensor 'a' has no \"dtype\""},
        {"dtype a number", file_of(entry(R"("dtype":5,"shape":[1],"data_offsets":[0,4])"), f4),
         "tensor 'a': its \"dtype\" is not a string"},
        {"unknown dtype", file_of(entry(R"("dtype":"F33","shape":[1],"data_offsets":[0,4])"), f4),
         "tensor 'a' has the unknown dtype 'F33'"},
        {"integer dtype", file_of(entry(R"("dtype":"I32","shape":[1],"data_offsets":[0,4])"), f4),
         "tensor 'a' has dtype I32, which loom does not read"},
        {"no shape", file_of(entry(R"("dtype":"F32","data_offsets":[0,4])"), f4), "tensor 'a' has no \"shape\""},
        {"shape a string", file_of(entry(R"("dtype":"F32","shape":"1","data_offsets":[0,4])"), f4),
         "tensor 'a': its \"shape\" is not an array"},
        {"negative dim", file_of(entry(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape entry -1 is negative"},
        {"fractional dim", file_of(entry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape entry 1.5 is not a whole number"},
        {"dim past 64 bits", file_of(entry(R"("dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape entry 1.84467e+19 is too large"},
        {"dim a string", file_of(entry(R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape entry \"1\" is not a number"},
        {"product overflows",
         file_of(entry(R"("dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape [4294967296, 4294967296, 2] overflows 64 bits"},
        {"zero elements, huge strides",
         file_of(entry(R"("dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0])"), ""),
         "tensor 'a': shape [0, 4611686018427387904, 4] overflows 64 bits"},
        {"rank 9", file_of(entry(R"("dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4])"), f4),
         "tensor 'a': shape [1, 1, 1, 1, 1, 1, 1, 1, 1] has rank 9; loom reads rank 8 at most"},
        {"no offsets", file_of(entry(R"("dtype":"F32","shape":[1])"), f4), "tensor 'a' has no \"data_offsets\""},
        {"one offset", file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0])"), f4),
         "tensor 'a': its \"data_offsets\" is not [begin, end]"},
        {"negative offset", file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])"), f4),
         "tensor 'a': data offset -4 is negative"},
        {"begin after end", file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])"), f4),
         "tensor 'a': data_offsets [4, 0] begin after they end"},
        {"past the data", file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,8])"), f4),
         "tensor 'a': data_offsets [0, 8] run past the end of the data (4 bytes)"},
        {"size mismatch", file_of(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), f4),
         "tensor 'a': data_offsets [0, 4] hold 4 bytes, but shape [2] of F32 takes 8"},
        {"overlap",
         file_of(
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             f4 + f4 + f4),
         "tensors 'a' and 'b' overlap"},
        {"hole",
         file_of(
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             f4 + f4 + f4),
         "bytes 4 to 8 of the data belong to no tensor"},
        {"bytes after the last", file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), f4 + f4),
         "bytes 4 to 8 of the data belong to no tensor"},
        {"metadata not an object", file_of(R"({"__metadata__":[1]})", ""),
         "\"__metadata__\" is not an object of strings"},
        {"metadata value a number", file_of(R"({"__metadata__":{"k":1}})", ""),
         "\"__metadata__\" is not an object of strings"},
    };
    TempDir dir("safetensors_hostile");
    const std::string path = dir.file("hostile.safetensors");
    for (const Case& c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        write_bytes(path, c.bytes);
        const std::string from_file = data_error([&] { read_safetensors(path); });
        CHECK(from_file.find(path + ": ") == 0);
        CHECK(from_file.find(c.says) != std::string::npos);
        const std::string from_memory = data_error([&] { parse_safetensors(c.bytes, "memory"); });
        CHECK(from_memory.find("memory: ") == 0);
        CHECK(from_memory.find(c.says) != std::string::npos);
    }
    // The near misses of the table read: no tensor at all, and the header padded with spaces.
    CHECK(parse_safetensors(file_of("{}", ""), "m").tensors.empty());
    CHECK(parse_safetensors(file_of(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])") + "   ", f4), "m")
              .tensors.size() == 1);
}

namespace {

// A header of `count` one-float tensors and its data, as a file in memory.
std::string file_of_tensors(std::size_t count) {
    std::string header = "{", data;
    for (std::size_t i = 0; i < count; ++i) {
        header += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[)" +
                  std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
        data += bytes_of<float>({static_cast<float>(i)});
    }
    return file_of(header + "}", data);
}

// The shortest of three parses of a file of `count` tensors, in seconds.
double parse_seconds(std::size_t count) {
    const std::string bytes = file_of_tensors(count);
    double best = 1e9;
    for (int run = 0; run < 3; ++run) {
        const auto start = std::chrono::steady_clock::now();
        const SafetensorsFile f = parse_safetensors(bytes, "many");
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        REQUIRE(f.tensors.size() == count);
    }
    return best;
}

}  // namespace

TEST_CASE("safetensors: a header's time grows with its entries, not their square") {
    // Rescanning the header at every entry took 0.8 s for 10,000 entries and 19 s for 40,000.
    const double small = parse_seconds(10'000), large = parse_seconds(40'000);
    INFO("10,000 entries: " << small << " s; 40,000: " << large << " s");
    CHECK(large < 10 * small + 0.05);
    // 100,000 entries (a 5.9 MB header) read whole, each tensor where the header says.
    const SafetensorsFile f = parse_safetensors(file_of_tensors(100'000), "many");
    REQUIRE(f.tensors.size() == 100'000);
    CHECK(values_of<float>(f, "t99999")(0) == 99999.0f);
}

TEST_CASE("safetensors: a NUL byte or anything but white space after the header's JSON names the offset") {
    const std::string f4 = bytes_of<float>({1.0f});
    const std::string json = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    auto refusal = [&](const std::string& header) {
        return data_error([&] { parse_safetensors(file_of(header, f4), "padded.st"); });
    };
    const std::string offset = std::to_string(json.size());
    // What follows a NUL was ignored, even text that is no JSON.
    for (const std::string& tail : {std::string("\0", 1), std::string("\0garbage", 8), std::string("\0  ", 3)}) {
        const std::string message = refusal(json + tail);
        CHECK(message.find("padded.st: ") == 0);
        CHECK(message.find("a NUL byte at byte " + offset + " of the header") != std::string::npos);
        CHECK(message.find("offset " + std::to_string(json.size() + 8) + " of the file") != std::string::npos);
    }
    // A NUL inside the JSON is named where it is.
    CHECK(refusal(std::string("{\0}", 3)).find("a NUL byte at byte 1 of the header") != std::string::npos);
    // Text after the object, padded or not: named with its offset.
    const std::string after = refusal(json + "  xyz");
    CHECK(after.find("padded.st: ") == 0);
    CHECK(after.find("'xyz' follows at byte " + std::to_string(json.size() + 2) + " of the header") !=
          std::string::npos);
    CHECK(refusal(json + "{}").find("'{}' follows at byte " + offset) != std::string::npos);
    // White space is padding: the reference writer pads with spaces, and JSON allows the others.
    CHECK(parse_safetensors(file_of(json + " \n\t\r ", f4), "m").tensors.size() == 1);
}

TEST_CASE("safetensors: a double beyond float's range is refused when assigned to a float parameter") {
    const std::string header = R"({"w":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}})";
    const double largest = std::numeric_limits<float>::max();
    for (double beyond : {1e39, -1e39, largest * (1 + 1e-7), std::numeric_limits<double>::max()}) {
        CAPTURE(beyond);
        const SafetensorsFile f = parse_safetensors(file_of(header, bytes_of<double>({1.0, beyond, 2.0})), "big.st");
        Parameter w = parameter(xt::xarray<float>(xt::zeros<float>({3})), "w");
        const std::string message = data_error([&] { assign_safetensors(f, {w}); });
        CHECK(message.find("big.st: tensor 'w' holds") == 0);
        CHECK(message.find("at element 1") != std::string::npos);
        CHECK(message.find("float") != std::string::npos);
        CHECK(w.data<float>()(0) == 0.0f);  // nothing assigned
        // A double parameter takes it as it is.
        to_precision({w}, DType::f64);
        assign_safetensors(f, {w});
        CHECK(w.data<double>()(1) == beyond);
    }
    // Float's largest value itself, written as a double, is a float.
    const SafetensorsFile f = parse_safetensors(file_of(header, bytes_of<double>({largest, -largest, 0.0})), "max.st");
    Parameter w = parameter(xt::xarray<float>(xt::zeros<float>({3})), "w");
    assign_safetensors(f, {w});
    CHECK(w.data<float>()(0) == std::numeric_limits<float>::max());
    CHECK(w.data<float>()(1) == -std::numeric_limits<float>::max());
}

TEST_CASE("safetensors: a save onto a FIFO, a socket or a directory is refused by path, before writing") {
    TempDir dir("safetensors_not_regular_out");
    Parameter w = parameter(xt::xarray<float>{1, 2, 3}, "w");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(save_safetensors(fifo, {w}), doctest::Contains(("'" + fifo + "' is a FIFO").c_str()),
                         UserError);
    CHECK(fs::is_fifo(fifo));
    fs::create_directory(dir.file("taken"));
    CHECK_THROWS_WITH_AS(save_safetensors(dir.file("taken"), {w}),
                         doctest::Contains(("'" + dir.file("taken") + "' is a directory").c_str()), UserError);
    // A symbolic link to a FIFO is judged by the FIFO.
    fs::create_symlink(fifo, dir.file("link"));
    CHECK_THROWS_WITH_AS(save_safetensors(dir.file("link"), {w}), doctest::Contains("is a FIFO"), UserError);
    CHECK(fs::is_symlink(dir.file("link")));
    CHECK(dir.names() == std::vector<std::string>{"fifo", "link", "taken"});  // no temporary was made
}
