// Vocabulary: reserved ids, counts, min_count / max_size, unknown words, save and load.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/errors.hpp"
#include "text/vocabulary.hpp"

#include "test_support.hpp"

using namespace loom;
using loom::testing::temp_path;
using loom::testing::TempFile;

namespace {

// counts: the 3, cat 2, sat 2, a 1, mat 1, on 1
const std::vector<std::vector<std::string>> corpus = {
    {"the", "cat", "sat"}, {"the", "cat", "on", "a", "mat"}, {"the", "sat"}};

void expect_load_error(const std::string& text, std::size_t line, const std::string& reason) {
    TempFile file("bad.vocab", text);
    try {
        Vocabulary::load(file.path.string());
        FAIL("no DataError for: " << text);
    } catch (const DataError& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find(file.path.string() + ":" + std::to_string(line) + ":") != std::string::npos, msg);
        CHECK_MESSAGE(msg.find(reason) != std::string::npos, msg);
    }
}

}  // namespace

TEST_CASE("vocabulary: reserved ids / then words by decreasing count / ties alphabetical") {
    const Vocabulary v = Vocabulary::build(corpus);
    REQUIRE(v.size() == 8);
    CHECK(v.word(0) == "<pad>");
    CHECK(v.word(1) == "<unk>");
    CHECK(v.id("the") == 2);
    CHECK(v.id("cat") == 3);  // cat and sat both 2: alphabetical
    CHECK(v.id("sat") == 4);
    CHECK(v.id("a") == 5);
    CHECK(v.id("mat") == 6);
    CHECK(v.id("on") == 7);
    CHECK(v.id("dog") == Vocabulary::unknown_id);
    CHECK(v.id("<pad>") == Vocabulary::padding_id);
    CHECK_FALSE(v.contains("dog"));
    CHECK(v.ids({"the", "dog", "mat"}) == std::vector<std::size_t>{2, 1, 6});
    CHECK_THROWS_AS(v.word(8), UserError);
}

TEST_CASE("vocabulary: min_count and max_size") {
    const Vocabulary frequent = Vocabulary::build(corpus, {.min_count = 2});
    CHECK(frequent.size() == 5);
    CHECK(frequent.id("mat") == Vocabulary::unknown_id);
    CHECK(frequent.id("sat") == 4);

    const Vocabulary small = Vocabulary::build(corpus, {.min_count = 1, .max_size = 4});
    REQUIRE(small.size() == 4);
    CHECK(small.id("the") == 2);
    CHECK(small.id("cat") == 3);
    CHECK(small.id("sat") == Vocabulary::unknown_id);

    CHECK(Vocabulary::build(corpus, {.min_count = 1, .max_size = 2}).size() == 2);
    CHECK_THROWS_AS(Vocabulary::build(corpus, {.min_count = 1, .max_size = 1}), UserError);
    CHECK(Vocabulary::build({}).size() == 2);
}

TEST_CASE("vocabulary: save and load give the same ids") {
    const Vocabulary v = Vocabulary::build(corpus);
    const auto path = temp_path("roundtrip.vocab");
    v.save(path.string());
    const Vocabulary back = Vocabulary::load(path.string());
    std::filesystem::remove(path);
    REQUIRE(back.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(back.word(i) == v.word(i));
    CHECK(back.id("mat") == 6);
    CHECK(back.id("dog") == Vocabulary::unknown_id);
}

TEST_CASE("vocabulary: malformed files name file / line and reason") {
    expect_load_error("", 1, "not a loom vocabulary file");
    expect_load_error("words\n<pad>\n<unk>\n", 1, "not a loom vocabulary file");
    expect_load_error("loom-vocabulary 1\n<pad>\n<unk>\ncat\n\ndog\n", 5, "empty word");
    expect_load_error("loom-vocabulary 1\n<pad>\n<unk>\ncat\ndog\ncat\n", 6, "word 'cat' appears twice");
    expect_load_error("loom-vocabulary 1\n<unk>\n<pad>\n", 2, "id 0 must be the padding word");
    expect_load_error("loom-vocabulary 1\n<pad>\ncat\n", 3, "id 1 must be the unknown word");
    expect_load_error("loom-vocabulary 1\n<pad>\n", 2, "truncated");
    CHECK_THROWS_WITH_AS(Vocabulary::load("/nonexistent/v.vocab"), doctest::Contains("/nonexistent/v.vocab"),
                         DataError);
}

TEST_CASE("vocabulary: a byte-order mark is dropped / padded or invalid words are errors") {
    TempFile bom("bom.vocab", "\xEF\xBB\xBFloom-vocabulary 1\n<pad>\n<unk>\ncaf\xC3\xA9\n");
    const Vocabulary v = Vocabulary::load(bom.path.string());
    CHECK(v.size() == 3);
    CHECK(v.id("caf\xC3\xA9") == 2);
    expect_load_error("loom-vocabulary 1\n<pad>\n<unk>\ncat \n", 4, "starts or ends with a space or tab");
    expect_load_error("loom-vocabulary 1\n<pad>\n<unk>\n\tcat\n", 4, "starts or ends with a space or tab");
    expect_load_error("loom-vocabulary 1\n<pad>\n<unk>\ncaf\xE9\n", 4, "word 'caf\\xe9'");
    expect_load_error(std::string("loom-vocabulary 1\n<pad>\n<unk>\nc") + '\0' + "t\n", 4, "it holds a NUL byte");
    expect_load_error("loom-vocabulary 2\n<pad>\n<unk>\n", 1, "found 'loom-vocabulary 2'");
}

TEST_CASE("vocabulary: a word that could not be read back is not saved") {
    const Vocabulary v = Vocabulary::build({{"cat", "cat "}});
    const auto path = temp_path("unsavable.vocab");
    CHECK_THROWS_WITH_AS(v.save(path.string()), doctest::Contains("starts or ends with a space"), UserError);
    CHECK_FALSE(std::filesystem::exists(path));
    const Vocabulary latin1 = Vocabulary::build({{"caf\xE9"}});
    CHECK_THROWS_WITH_AS(latin1.save(path.string()), doctest::Contains("not valid UTF-8"), UserError);
}

TEST_CASE("vocabulary: a directory is named as one") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THROWS_WITH_AS(Vocabulary::load(dir), doctest::Contains("is a directory"), DataError);
}
