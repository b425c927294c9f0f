// The g2p sample's model files (samples/g2p/model.hpp): written and read back, and a file whose
// settings are not those of its parameters refused before a model of those settings is built.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include "core/errors.hpp"
#include "g2p/model.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

// The peak resident memory of this process so far, in MB.
double peak_rss_mb() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024;
}

}  // namespace

TEST_CASE("g2p model file: saved and read back with its sizes") {
    testing::TempDir dir("g2p_model_file");
    g2p::Model m({8, 6, 10});
    g2p::save_model(dir.file("m.loom"), m);
    const auto back = g2p::load_model(dir.file("m.loom"));
    CHECK(back->sizes.embed == 8);
    CHECK(back->sizes.encoder == 6);
    CHECK(back->sizes.decoder == 10);
    for (const auto& sizing : g2p::sizing_parameters(m.sizes)) {
        const std::string& name = sizing.first;
        const auto params = m.parameters();
        const auto it =
            std::find_if(params.begin(), params.end(), [&](const Parameter& p) { return p.name() == name; });
        REQUIRE_MESSAGE(it != params.end(), name);
        CHECK(it->shape() == Shape(sizing.second));
    }
}

TEST_CASE("g2p model file: settings of 4096 over small parameters are refused before the model is built") {
    testing::TempDir dir("g2p_model_claims");
    g2p::Model small({8, 6, 10});
    const std::string path = dir.file("claims.loom");
    save_model_file(path, "g2p", small.parameters(),
                    {{"settings", settings_record({{"embed", 4096}, {"encoder", 4096}, {"decoder", 4096}})}});
    const double before = peak_rss_mb();
    CHECK_THROWS_WITH_AS(
        g2p::load_model(path),
        doctest::Contains("make parameter 'letter_embedding.E' [29, 4096], but the file holds [29, 8]"), DataError);
    CHECK(peak_rss_mb() - before < 200);  // a model of these settings holds gigabytes
    // One size off is found too.
    save_model_file(path, "g2p", small.parameters(),
                    {{"settings", settings_record({{"embed", 8}, {"encoder", 6}, {"decoder", 4096}})}});
    CHECK_THROWS_WITH_AS(g2p::load_model(path), doctest::Contains("'decoder.feed_weights'"), DataError);
}

TEST_CASE("g2p model file: an architecture record other than lstm or transformer names the file and the record") {
    testing::TempDir dir("g2p_model_architecture");
    g2p::Model small({8, 6, 10});
    const std::string path = dir.file("arch.loom");
    const std::string settings = settings_record({{"embed", 8}, {"encoder", 6}, {"decoder", 10}});
    for (const std::string& architecture : {std::string("gru"), std::string(), std::string("Transformer")}) {
        CAPTURE(architecture);
        save_model_file(path, "g2p", small.parameters(), {{"architecture", architecture}, {"settings", settings}});
        try {
            g2p::load_model(path);
            FAIL("no error for an architecture record '" << architecture << "'");
        } catch (const DataError& e) {
            const std::string message = e.what();
            CHECK_MESSAGE(message.starts_with(path + ": its 'architecture' record is '" + architecture + "'"), message);
            CHECK_MESSAGE(message.find("--architecture") == std::string::npos, message);  // no option was given
        }
    }
}

TEST_CASE("g2p model file: a Transformer written by loom 0.2 is named as such, with what changed") {
    testing::TempDir dir("g2p_model_0_2");
    const std::string path = dir.file("old.loom");
    // loom 0.2's g2p Transformer: its own letter table and stacks named encoder.* and decoder.*
    // (0.3 made it a Seq2SeqTransformer named g2p.*), with the records of today's files.
    auto p = [](const std::string& name, std::vector<std::size_t> shape) {
        return parameter(xt::xarray<float>(xt::zeros<float>(shape)), name);
    };
    const std::vector<Parameter> old = {
        p("letter_embedding", {g2p::letter_count(), 8}), p("encoder.layers.0.linear1.W", {8, 16}),
        p("decoder.layers.0.linear1.W", {8, 16}), p("decoder.embedding", {g2p::phoneme_count(), 8})};
    const auto records = g2p::model_records(
        {.layers = 1, .model = 8, .heads = 2, .feedforward = 16, .architecture = g2p::Architecture::transformer});
    save_model_file(path, "g2p", old, records);
    CHECK_THROWS_WITH_AS(g2p::load_model(path),
                         doctest::Contains((path + ": a g2p Transformer written by loom 0.2").c_str()), DataError);
    CHECK_THROWS_WITH_AS(g2p::load_model(path), doctest::Contains("retrain"), DataError);
    // Today's file of those sizes reads.
    g2p::Model today(
        {.layers = 1, .model = 8, .heads = 2, .feedforward = 16, .architecture = g2p::Architecture::transformer});
    g2p::save_model(path, today);
    CHECK(g2p::load_model(path)->sizes.model == 8);
}
