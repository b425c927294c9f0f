// Model files: a round trip by name (parameters created in another order still load), the records,
// every damaged-file case (missing, truncated, one flipped byte, a checkpoint, another model's
// kind) an error that changes nothing, and missing / extra / mis-shaped names all listed at once.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
