// The checkpoint reader's field checks: a file that passes its checksum (written by a broken or
// hostile writer) but holds impossible counts, shapes or duplicate records is a DataError that
// says which field is wrong, and the model is left as it was. Damaged files are made from real
// saves with one field changed, so the tests follow the format as it grows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "graph/variable.hpp"
#include "training/checkpoint.hpp"

using namespace loom;
namespace fs = std::filesystem;

namespace {

struct Scratch {
    std::string path =
        (fs::temp_directory_path() / ("loom_checkpoint_fields_" + std::to_string(::getpid()) + ".ckpt")).string();
    ~Scratch() { fs::remove(path); }
};

// Offsets in the payload: the tag ("loom-checkpoint": 8-byte length + 15 bytes), the version,
// then the parameter count and the first parameter's name, rank and dims.
constexpr std::size_t count_at = 8 + 15 + 8;
constexpr std::size_t first_name_at = count_at + 8;

std::uint64_t u64_at(const std::string& payload, std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, payload.data() + at, 8);
    return v;
}

void set_u64(std::string& payload, std::size_t at, std::uint64_t v) { std::memcpy(payload.data() + at, &v, 8); }

// Loads `payload` (given a valid header) into `params`; expects a DataError holding `reason` and
// the parameters' values unchanged.
void expect_rejected(const std::string& payload, const std::vector<Parameter>& params, const std::string& reason) {
    Scratch file;
    write_checked_file(file.path, payload);
    std::vector<xt::xarray<float>> before;
    for (const auto& p : params) before.push_back(p.data());
    CHECK_THROWS_WITH_AS(load_checkpoint(file.path, params, nullptr), doctest::Contains(reason.c_str()), DataError);
    for (std::size_t i = 0; i < params.size(); ++i) CHECK(params[i].data() == before[i]);
}

std::string saved_payload(const std::vector<Parameter>& params, const CheckpointExtras& extras = {}) {
    Scratch file;
    save_checkpoint(file.path, params, nullptr, {}, extras);
    return read_checked_file(file.path);
}

}  // namespace

TEST_CASE("checkpoint fields: a parameter with no elements cannot exist, so none is ever saved") {
    // The empty float array was the fuzzer's first finding (memcpy from a null pointer); reading one
    // is tested in test_serialization.cpp. Graph nodes refuse zero-size dimensions outright.
    CHECK_THROWS_WITH_AS(parameter(xt::xarray<float>::from_shape({3, 0}), "none"),
                         doctest::Contains("zero-size dimension"), UserError);
}

TEST_CASE("checkpoint fields: an impossible parameter count or rank is named") {
    Parameter w = parameter(xt::xarray<float>({{1, 2}, {3, 4}}), "w");
    const std::string good = saved_payload({w});
    REQUIRE(u64_at(good, count_at) == 1);
    REQUIRE(u64_at(good, first_name_at) == 1);  // the name "w"

    std::string count = good;
    set_u64(count, count_at, 1ull << 40);
    expect_rejected(count, {w}, "parameter count 1099511627776 is impossible");

    const std::size_t rank_at = first_name_at + 8 + 1;
    REQUIRE(u64_at(good, rank_at) == 2);
    std::string rank = good;
    set_u64(rank, rank_at, 9);
    expect_rejected(rank, {w}, "parameter 'w' has rank 9 (at most 8)");
}

TEST_CASE("checkpoint fields: dims whose product wraps around are rejected before it is used") {
    Parameter w = parameter(xt::xarray<float>({{1, 2}, {3, 4}}), "w");
    std::string payload = saved_payload({w});
    const std::size_t dims_at = first_name_at + 8 + 1 + 8;
    REQUIRE(u64_at(payload, dims_at) == 2);
    // 2^62 * 4 is 2^64, which is 0 in 64 bits: without the check it would match an empty array.
    set_u64(payload, dims_at, 1ull << 62);
    set_u64(payload, dims_at + 8, 4);
    expect_rejected(payload, {w}, "parameter 'w' has a dimension of 4611686018427387904");
}

TEST_CASE("checkpoint fields: an extra record stored twice is rejected") {
    Parameter w = parameter(xt::xarray<float>({1, 2}), "w");
    std::string payload = saved_payload({w}, {{"a", "x"}, {"b", "y"}});
    // The key "b" as a record: its length, then the byte; make it a second "a".
    const std::string key_b = std::string("\x01\0\0\0\0\0\0\0b", 9);
    const std::size_t at = payload.find(key_b);
    REQUIRE(at != std::string::npos);
    payload[at + 8] = 'a';
    expect_rejected(payload, {w}, "extra record 'a' appears twice");
}

TEST_CASE("checkpoint fields: a long name from the file is cut in messages") {
    const std::string long_name(500, 'n');
    Scratch file;
    save_checkpoint(file.path, {parameter(xt::xarray<float>({1, 2}), long_name)}, nullptr);
    Parameter w = parameter(xt::xarray<float>({1, 2}), "w");
    try {
        load_checkpoint(file.path, {w}, nullptr);
        FAIL("a parameter of another name was accepted");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find("...' (500 bytes)") != std::string::npos, msg);
        CHECK_MESSAGE(msg.size() < 300, msg);
    }
}

TEST_CASE("checkpoint fields: a directory given as a checkpoint is named as one") {
    Parameter w = parameter(xt::xarray<float>({1, 2}), "w");
    CHECK_THROWS_WITH_AS(load_checkpoint(fs::temp_directory_path().string(), {w}, nullptr),
                         doctest::Contains("is a directory"), DataError);
}

TEST_CASE("checkpoint fields: NaN or inf values and a newer version are refused by name") {
    Parameter w = parameter(xt::xarray<float>({{1, 2}, {3, 4}}), "w");
    const std::string good = saved_payload({w});
    // After the name "w": rank, two dims, the precision tag, the value count, then the values.
    const std::size_t rank_at = first_name_at + 8 + 1, values_at = rank_at + 8 + 16 + 8 + 8;
    REQUIRE(u64_at(good, values_at - 8) == 4);
    float second = 0;
    std::memcpy(&second, good.data() + values_at + 4, 4);
    REQUIRE(second == 2.0f);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        std::string payload = good;
        std::memcpy(payload.data() + values_at + 4, &bad, 4);
        expect_rejected(payload, {w},
                        std::string("parameter 'w' [2, 2] holds ") + (std::isnan(bad) ? "nan" : "-inf") +
                            " at element 1; a checkpoint holds finite values only");
    }
    std::string newer = good;
    set_u64(newer, 8 + 15, 3);
    expect_rejected(newer, {w}, "was written by a newer loom (version 3)");
}
