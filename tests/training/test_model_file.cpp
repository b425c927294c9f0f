// Model files: a round trip by name (parameters created in another order still load), the records,
// every damaged-file case (missing, truncated, one flipped byte, a checkpoint, another model's
// kind) an error that changes nothing, and missing / extra / mis-shaped names all listed at once.
// Hostile files too: shapes beyond the bytes (or 64 bits), NaN and infinite values and settings,
// FIFOs and devices, each a DataError naming the file and what is wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::read_bytes;
using loom::testing::TempDir;
using loom::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

const xt::xarray<float> w_value = {{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}};
const xt::xarray<float> b_value = {0.5f, -0.25f, 8.0f};

}  // namespace

TEST_CASE("model file: parameters come back by name whatever their order, with the records") {
    TempDir dir("round_trip");
    const std::string path = dir.file("m.loom");
    save_model_file(path, "test_model", {parameter(w_value, "w"), parameter(b_value, "b")},
                    {{"vocabulary", std::string("a\0b", 3)}, {"settings", "embed 4"}});

    Parameter b = parameter(xt::zeros<float>({3}), "b");
    Parameter w = parameter(xt::zeros<float>({2, 3}), "w");
    const ModelFile f = read_model_file(path, "test_model");
    CHECK(f.kind == "test_model");
    CHECK(f.records.at("settings") == "embed 4");
    CHECK(f.records.at("vocabulary") == std::string("a\0b", 3));
    assign_parameters(f, {b, w});
    CHECK(w.value() == w_value);
    CHECK(b.value() == b_value);
    // No kind asked for: any model file reads.
    CHECK(read_model_file(path).parameters.size() == 2);
}

TEST_CASE("model file: every damaged file is a DataError") {
    TempDir dir("damaged");
    const std::string path = dir.file("m.loom");
    save_model_file(path, "test_model", {parameter(w_value, "w"), parameter(b_value, "b")});
    const std::string good = read_bytes(path);

    CHECK_THROWS_WITH_AS(read_model_file(dir.file("absent.loom")), doctest::Contains("absent.loom"), DataError);
    for (std::size_t keep : {std::size_t{0}, std::size_t{10}, good.size() / 2, good.size() - 1}) {
        CAPTURE(keep);
        write_bytes(path, good.substr(0, keep));
        CHECK_THROWS_AS(read_model_file(path), DataError);
    }
    std::string flipped = good;
    flipped[flipped.size() - 3] ^= 0x10;  // inside the last parameter's values
    write_bytes(path, flipped);
    CHECK_THROWS_AS(read_model_file(path), DataError);

    // A checkpoint is a checked file too, but not a model file.
    Parameter w = parameter(w_value, "w");
    save_checkpoint(dir.file("c.ckpt"), {w}, nullptr);
    CHECK_THROWS_WITH_AS(read_model_file(dir.file("c.ckpt")), doctest::Contains("not a loom model file"), DataError);
    // A checked file whose payload is not a model either.
    write_checked_file(dir.file("x"), "hello");
    CHECK_THROWS_AS(read_model_file(dir.file("x")), DataError);
}

TEST_CASE("model file: a model of another kind is refused by name") {
    TempDir dir("kind");
    const std::string path = dir.file("m.loom");
    save_model_file(path, "translator", {parameter(b_value, "b")});
    CHECK_THROWS_WITH_AS(read_model_file(path, "qa_similarity"),
                         doctest::Contains("of kind 'translator', not a 'qa_similarity' model"), UserError);
}

TEST_CASE("model file: missing extra and mis-shaped parameters are all listed and nothing changes") {
    TempDir dir("mismatch");
    const std::string path = dir.file("m.loom");
    save_model_file(path, "m", {parameter(w_value, "w"), parameter(b_value, "b"), parameter(b_value, "old")});
    Parameter w = parameter(xt::zeros<float>({3, 2}), "w");  // transposed
    Parameter b = parameter(xt::zeros<float>({3}), "b");
    Parameter fresh = parameter(xt::zeros<float>({1}), "fresh");
    const ModelFile f = read_model_file(path);
    try {
        assign_parameters(f, {w, b, fresh});
        FAIL("assign_parameters accepted a mismatched model");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("missing from the file: 'fresh' [1]") != std::string::npos);
        CHECK(msg.find("in the file but not in the model: 'old'") != std::string::npos);
        CHECK(msg.find("'w' is [2, 3] in the file, [3, 2] in the model") != std::string::npos);
        CHECK(msg.find(path) != std::string::npos);
    }
    CHECK(b.value() == xt::zeros<float>({3}));  // checked before anything was set
}

TEST_CASE("model file: unnamed or twice-named parameters cannot be saved") {
    TempDir dir("names");
    CHECK_THROWS_WITH_AS(save_model_file(dir.file("a"), "m", {parameter(b_value)}), doctest::Contains("no name"),
                         UserError);
    CHECK_THROWS_WITH_AS(save_model_file(dir.file("b"), "m", {parameter(b_value, "x"), parameter(w_value, "x")}),
                         doctest::Contains("two parameters are named 'x'"), UserError);
    CHECK_FALSE(fs::exists(dir.file("a")));
}

TEST_CASE("model file: settings come back exactly and a missing or bad one names the file") {
    TempDir dir("settings");
    const std::string path = dir.file("m.loom");
    const double third = 1.0 / 3.0;  // needs all 17 digits to come back as the same double
    save_model_file(path, "test_model", {parameter(b_value, "b")},
                    {{"settings", settings_record({{"hidden", 64}, {"lambda", third}, {"rate", 1e-5}})}});
    const ModelFile f = read_model_file(path, "test_model");
    CHECK(f.setting("hidden") == 64.0);
    CHECK(f.setting("lambda") == third);
    CHECK(f.setting("rate") == 1e-5);
    auto message = [](auto&& call) {
        try {
            call();
        } catch (const DataError& e) {
            return std::string(e.what());
        }
        return std::string("no DataError");
    };
    CHECK(message([&] { f.setting("embed"); }) == path + ": its settings lack 'embed'");
    CHECK(message([&] { f.record("vocabulary"); }) == path + ": the model file has no 'vocabulary' record");
    ModelFile bad = f;
    bad.records["settings"] = "hidden sixty-four";
    CHECK(message([&] { bad.setting("hidden"); }) == path + ": setting 'hidden' is 'sixty-four', not a number");
    CHECK_THROWS_AS(settings_record({{"two words", 1.0}}), UserError);
}

namespace {

// A model file of one float parameter `name` of shape `dims` holding `values`, written as
// save_model_file would, but with whatever shape and values a damaged or hostile file may hold.
void write_model(const std::string& path, const std::vector<std::uint64_t>& dims, const std::vector<float>& values,
                 const std::string& settings = "") {
    ByteWriter w;
    w.str("loom-model-file 2");
    w.str("test_model");
    w.u64(settings.empty() ? 0 : 1);
    if (!settings.empty()) w.str("settings"), w.str(settings);
    w.u64(1);
    w.str("w");
    w.u64(dims.size());
    for (std::uint64_t d : dims) w.u64(d);
    w.u64(0);
    w.floats(values);
    write_checked_file(path, w.bytes());
}

std::string data_error(const std::function<void()>& call) {
    try {
        call();
    } catch (const DataError& e) {
        return e.what();
    }
    return "no DataError";
}

}  // namespace

TEST_CASE("model file: a shape with more elements than the file holds is refused before allocating") {
    TempDir dir("huge_shape");
    const std::string path = dir.file("m.loom");
    constexpr std::uint64_t big = std::uint64_t{1} << 32;
    // 2^32 x 2^32 wraps to 0 elements in 64 bits, which matched the 0 values given; the strides
    // xtensor then computed overflowed (undefined behaviour).
    write_model(path, {big, big}, {});
    CHECK(data_error([&] { read_model_file(path); }).find("parameter 'w' of shape [4294967296, 4294967296] has more") !=
          std::string::npos);
    // Zero elements, but strides past 2^63.
    write_model(path, {0, std::uint64_t{1} << 62, 4}, {});
    CHECK(data_error([&] { read_model_file(path); }).find(path + ": parameter 'w' of shape [0, ") != std::string::npos);
    // A plausible count, but more than the bytes left.
    write_model(path, {1000}, {1.0f, 2.0f});
    CHECK(data_error([&] { read_model_file(path); }).find("has more elements than the") != std::string::npos);
    write_model(path, {3}, {1.0f, 2.0f});
    CHECK(data_error([&] { read_model_file(path); }).find("'w' of shape [3] holds 2 values") != std::string::npos);
    write_model(path, {0, 5}, {});  // an empty parameter still reads
    CHECK(std::get<xt::xarray<float>>(read_model_file(path).parameters.at("w")).shape(1) == 5);
}

TEST_CASE("model file: NaN and infinite values are refused when saving and when reading") {
    TempDir dir("non_finite");
    const std::string path = dir.file("m.loom");
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (float bad : {nan, inf, -inf}) {
        CAPTURE(bad);
        xt::xarray<float> v = w_value;
        v(1, 2) = bad;
        CHECK_THROWS_WITH_AS(save_model_file(path, "m", {parameter(b_value, "b"), parameter(v, "w")}),
                             doctest::Contains("parameter 'w' [2, 3] holds"), UserError);
        Parameter d = parameter(xt::xarray<float>{1.0f, 2.0f}, "d");
        to_precision({d}, DType::f64);
        d.set_value(xt::xarray<double>{1.0, double(bad)});
        CHECK_THROWS_WITH_AS(save_model_file(path, "m", {d}), doctest::Contains("'d' [2] holds"), UserError);
        CHECK_FALSE(fs::exists(path));
        write_model(path, {2}, {1.0f, bad});
        CHECK(data_error([&] { read_model_file(path); }).find(path + ": parameter 'w' holds") != std::string::npos);
        fs::remove(path);
    }
}

TEST_CASE("model file: settings are finite, and sizes whole numbers in range") {
    TempDir dir("setting_ranges");
    const std::string path = dir.file("m.loom");
    CHECK_THROWS_WITH_AS(settings_record({{"lambda", std::nan("")}}), doctest::Contains("setting 'lambda' is"),
                         UserError);
    CHECK_THROWS_WITH_AS(settings_record({{"lambda", HUGE_VAL}}), doctest::Contains("setting 'lambda' is"), UserError);
    for (const char* text : {"nan", "inf", "-inf"}) {
        write_model(path, {1}, {1.0f}, std::string("lambda ") + text);
        CHECK(data_error([&] { read_model_file(path).setting("lambda"); }) ==
              path + ": setting 'lambda' is " + text + ", not a finite number");
    }
    write_model(path, {1}, {1.0f}, "lambda 1e308 embed 64");
    const ModelFile f = read_model_file(path);
    CHECK(f.setting("lambda") == 1e308);
    CHECK(data_error([&] { f.setting("lambda", 0, 1000); }).find("setting 'lambda' is") != std::string::npos);
    CHECK(f.whole_setting("embed", 1, 4096) == 64);
    for (const char* text : {"-1", "nan", "1e30", "2.5", "0", "4097"}) {
        write_model(path, {1}, {1.0f}, std::string("embed ") + text);
        CHECK(data_error([&] {
                  read_model_file(path).whole_setting("embed", 1, 4096);
              }).find(path + ": setting 'embed' is") != std::string::npos);
    }
    // The number is printed as the file holds it, so the message never contradicts itself (1048577
    // printed as 1.04858e+06 reads as inside the range).
    write_model(path, {1}, {1.0f}, "block 1048577 lambda 0.000001");
    CHECK(data_error([&] { read_model_file(path).whole_setting("block", 1, 1 << 20); }) ==
          path + ": setting 'block' is 1048577, not a whole number from 1 to 1048576");
    CHECK(data_error([&] { read_model_file(path).setting("lambda", 1e-5, 1); }) ==
          path + ": setting 'lambda' is 1e-06, outside [1e-05, 1]");
}

TEST_CASE("model file: a FIFO or a device is refused by name, without reading it") {
    TempDir dir("not_regular");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Opening the FIFO would block until a writer came: the test would hang.
    CHECK_THROWS_WITH_AS(read_model_file(fifo), doctest::Contains("not a regular file"), DataError);
    // /dev/zero would be read until memory runs out.
    CHECK_THROWS_WITH_AS(read_model_file("/dev/zero"),
                         doctest::Contains("'/dev/zero' is a character device, not a regular file"), DataError);
}

TEST_CASE("model file: a newer version is named as such, and names read from a file are escaped") {
    TempDir dir("newer");
    const std::string path = dir.file("m.loom");
    ByteWriter w;
    w.str("loom-model-file 3");
    w.str("test_model");
    w.u64(0);
    w.u64(0);
    write_checked_file(path, w.bytes());
    CHECK(data_error([&] { read_model_file(path); }) ==
          path +
              ": a model file written by a newer loom (version 3); this loom reads versions 1 to 2: use a newer loom");
    Parameter p = parameter(w_value, "w");
    save_checkpoint(dir.file("c.ckpt"), {p}, nullptr);
    CHECK(data_error([&] { read_model_file(dir.file("c.ckpt")); }).find("not a loom model file but a checkpoint") !=
          std::string::npos);

    // A kind and a parameter name holding an ANSI escape (repaint the terminal red): shown as \x1b.
    save_model_file(path, "evil\x1b[31m", {parameter(w_value, "w\x1b[2J")});
    try {
        read_model_file(path, "test_model");
        FAIL("another kind was accepted");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()) == path + ": holds a model of kind 'evil\\x1b[31m', not a 'test_model' model");
    }
    try {
        assign_parameters(read_model_file(path), {parameter(w_value, "w")});
        FAIL("a missing parameter was accepted");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find("in the file but not in the model: 'w\\x1b[2J'") != std::string::npos, msg);
        CHECK(msg.find('\x1b') == std::string::npos);
    }
}

TEST_CASE("model file: a double beyond float's range is refused by file, parameter and value when loaded as float") {
    TempDir dir("beyond_float");
    const std::string path = dir.file("m.loom");
    const double largest = std::numeric_limits<float>::max();
    for (double beyond : {1e39, -1e39, largest * (1 + 1e-7), std::numeric_limits<double>::max()}) {
        CAPTURE(beyond);
        Parameter d = parameter(xt::xarray<float>{1.0f, 2.0f}, "w");
        to_precision({d}, DType::f64);
        d.set_value(xt::xarray<double>{0.5, beyond});
        save_model_file(path, "m", {d});
        const ModelFile f = read_model_file(path);
        Parameter w = parameter(xt::xarray<float>{7.0f, 7.0f}, "w");
        const std::string message = data_error([&] { assign_parameters(f, {w}); });
        CHECK(message.find(path + ": parameter 'w' holds ") == 0);
        std::ostringstream value;  // with enough digits to tell it from float's largest
        value << std::setprecision(9) << beyond;
        CHECK(message.find(value.str() + " at element 1") != std::string::npos);
        CHECK(message.find("float") != std::string::npos);
        CHECK(w.data<float>()(0) == 7.0f);  // nothing assigned
        // Into a double parameter it loads as it is.
        to_precision({w}, DType::f64);
        assign_parameters(f, {w});
        CHECK(w.data<double>()(1) == beyond);
    }
    // Float's largest value, saved as a double, loads as a float.
    Parameter d = parameter(xt::xarray<float>{1.0f, 2.0f}, "w");
    to_precision({d}, DType::f64);
    d.set_value(xt::xarray<double>{largest, -largest});
    save_model_file(path, "m", {d});
    Parameter w = parameter(xt::xarray<float>{7.0f, 7.0f}, "w");
    assign_parameters(read_model_file(path), {w});
    CHECK(w.data<float>()(0) == std::numeric_limits<float>::max());
    CHECK(w.data<float>()(1) == -std::numeric_limits<float>::max());
}

TEST_CASE("model file: Parameter::set_value refuses a double beyond a float parameter's range, naming it") {
    Parameter w = parameter(xt::xarray<float>{7.0f, 7.0f}, "layer.W");
    CHECK_THROWS_WITH_AS(w.set_value(xt::xarray<double>{1.0, 1e39}), doctest::Contains("layer.W"), UserError);
    CHECK_THROWS_WITH_AS(w.set_value(xt::xarray<double>{1.0, 1e39}), doctest::Contains("1e+39 at element 1"),
                         UserError);
    CHECK(w.data<float>()(0) == 7.0f);  // nothing changed
    w.set_value(xt::xarray<double>{0.25, -0.5});
    CHECK(w.data<float>()(1) == -0.5f);
}
