// The Transformer models (layers::Seq2SeqTransformer, layers::TransformerLM): the cross-attention
// weights from the graph of the logits (need_weights), and the model file that carries the
// architecture: read back in one call, the same logits bit for bit; files whose settings are not
// those of their parameters refused before a model is made.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

using Matrix = xt::xarray<double>;

layers::TransformerOptions small() {
    return {.model_dim = 8,
            .heads = 2,
            .feedforward_dim = 12,
            .dropout = 0.0,
            .encoder_layers = 1,
            .decoder_layers = 2,
            .name = "s2s"};
}

std::string scratch(const std::string& file) {
    const auto dir = std::filesystem::temp_directory_path() / "loom_test_transformer_models";
    std::filesystem::create_directories(dir);
    return (dir / file).string();
}

const std::vector<std::vector<std::size_t>> sources{{1, 4, 2}, {5}, {0, 3, 3, 1, 2}};
const std::vector<std::vector<std::size_t>> previous_symbols{{0, 2}, {0, 1, 3, 2}, {0}};

Value logits_of(const layers::Seq2SeqTransformer& m) {
    Variable source = sequence::input_variable({1}, "source");
    Variable previous = sequence::input_variable({1}, "previous", SequenceAxis{});
    Variable logits = m(source, previous);
    return evaluate({logits}, {{source, Value::index_sequences(sources)},
                               {previous, Value::index_sequences(previous_symbols)}})[logits];
}

Value logits_of(const layers::TransformerLM& m) {
    Variable x = sequence::input_variable({1}, "x");
    Variable logits = m(x);
    return evaluate({logits}, {{x, Value::index_sequences(previous_symbols)}})[logits];
}

void check_equal(const Value& a, const Value& b) {
    REQUIRE(a.layout().num_sequences() == b.layout().num_sequences());
    for (std::size_t n = 0; n < a.layout().num_sequences(); ++n) {
        const Matrix x = a.sequence<double>(n), y = b.sequence<double>(n);
        REQUIRE(x.shape() == y.shape());
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(x.flat(i) == y.flat(i));
    }
}

}  // namespace

TEST_CASE("Seq2SeqTransformer gives each decoder layer's cross-attention weights from the logits' graph") {
    layers::Seq2SeqTransformer m(6, 5, small());
    Variable source = sequence::input_variable({1}, "source");
    Variable previous = sequence::input_variable({1}, "previous", SequenceAxis{});
    const Variable encoded = m.encode(source);
    const layers::TransformerOutput out = m.forward(previous, encoded, true);
    REQUIRE(out.cross_attention_weights.size() == 2);
    CHECK(m.forward(previous, encoded, false).cross_attention_weights.empty());
    std::vector<Variable> wanted{out.output, m.decode(previous, encoded)};
    wanted.insert(wanted.end(), out.cross_attention_weights.begin(), out.cross_attention_weights.end());
    auto v = evaluate(
        wanted, {{source, Value::index_sequences(sources)}, {previous, Value::index_sequences(previous_symbols)}});
    check_equal(v[out.output], v[wanted[1]]);  // asking for the weights changes no logit
    // Per head (average_weights false): [heads, T_max source] per step, whose mean is the average.
    const layers::TransformerOutput per_head = m.forward(previous, encoded, true, false);
    REQUIRE(per_head.cross_attention_weights.size() == 2);
    auto h = evaluate({per_head.cross_attention_weights[1]}, {{source, Value::index_sequences(sources)},
                                                              {previous, Value::index_sequences(previous_symbols)}});
    for (std::size_t n = 0; n < sources.size(); ++n) {
        const Matrix heads = h[per_head.cross_attention_weights[1]].sequence<double>(n);  // [steps, 2, 5]
        const Matrix mean = v[out.cross_attention_weights[1]].sequence<double>(n);        // [steps, 5]
        REQUIRE(heads.dimension() == 3);
        REQUIRE(heads.shape(1) == 2);
        for (std::size_t t = 0; t < mean.shape(0); ++t)
            for (std::size_t j = 0; j < mean.shape(1); ++j)
                CHECK((heads(t, 0, j) + heads(t, 1, j)) / 2 == doctest::Approx(mean(t, j)).epsilon(1e-6));
    }
    for (const Variable& w : out.cross_attention_weights) {
        for (std::size_t n = 0; n < sources.size(); ++n) {
            const Matrix rows = v[w].sequence<double>(n);  // [target steps, T_max source]
            REQUIRE(rows.shape(0) == previous_symbols[n].size());
            REQUIRE(rows.shape(1) == 5);  // the longest source
            for (std::size_t t = 0; t < rows.shape(0); ++t) {
                double sum = 0;
                for (std::size_t j = 0; j < rows.shape(1); ++j) {
                    INFO("item " << n << " step " << t << " source step " << j);
                    if (j >= sources[n].size()) CHECK(rows(t, j) == 0.0);  // past the item's source
                    CHECK(rows(t, j) >= 0.0);
                    sum += rows(t, j);
                }
                CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
                if (sources[n].size() == 1) CHECK(rows(t, 0) == doctest::Approx(1.0));
            }
        }
    }
}

TEST_CASE("Seq2SeqTransformer: gradients in double on ragged sources and targets, tied and untied") {
    for (bool tied : {false, true}) {
        CAPTURE(tied);
        layers::TransformerOptions o = small();
        o.tie_embeddings = tied;
        o.decoder_layers = 1;
        layers::Seq2SeqTransformer m(6, 5, o);
        to_precision(m.parameters(), DType::f64);
        Variable source = sequence::input_variable({1}, "source");
        Variable previous = sequence::input_variable({1}, "previous", SequenceAxis{});
        const Bindings in{{source, Value::index_sequences(sources)},
                          {previous, Value::index_sequences(previous_symbols)}};
        loom::testing::require_gradients("Seq2SeqTransformer", tanh(m(source, previous)), in,
                                         loom::testing::as_variables(m.parameters()), {.max_elements = 24});
    }
}

TEST_CASE("a Transformer model saved with its architecture reads back in one call, the same logits bit for bit") {
    SUBCASE("Seq2SeqTransformer, learned positions, GELU, post-norm") {
        layers::TransformerOptions o = small();
        o.positions = layers::PositionalEncoding::learned;
        o.max_positions = 9;
        o.activation = layers::FeedForwardActivation::gelu;
        o.norm_first = false;
        layers::Seq2SeqTransformer m(6, 5, o);
        const std::string path = scratch("s2s.loom");
        m.save(path, {{"vocabulary", "abcdef"}});
        const layers::Seq2SeqTransformer back = layers::Seq2SeqTransformer::load(path);
        CHECK(back.options().positions == layers::PositionalEncoding::learned);
        CHECK(back.options().max_positions == 9);
        CHECK(back.options().norm_first == false);
        CHECK(back.options().name == "s2s");
        CHECK(back.source_vocabulary() == 6);
        CHECK(back.target_vocabulary() == 5);
        CHECK(read_model_file(path).record("vocabulary") == "abcdef");  // the caller's records travel too
        check_equal(logits_of(back), logits_of(m));
    }
    SUBCASE("TransformerLM, GPT's settings") {
        layers::TransformerLM m(7, {.model_dim = 8,
                                    .heads = 4,
                                    .feedforward_dim = 32,
                                    .dropout = 0.1,
                                    .activation = layers::FeedForwardActivation::gelu,
                                    .attention_dropout = 0.1,
                                    .decoder_layers = 3,
                                    .positions = layers::PositionalEncoding::learned,
                                    .max_positions = 6,
                                    .tie_embeddings = true,
                                    .scale_embedding = false});
        const std::string path = scratch("lm.loom");
        m.save(path);
        const layers::TransformerLM back = layers::TransformerLM::load(path);
        CHECK(back.options().decoder_layers == 3);
        CHECK(back.options().heads == 4);
        CHECK(back.options().dropout == 0.1);
        CHECK(back.options().tie_embeddings);
        CHECK_FALSE(back.options().scale_embedding);
        CHECK(back.options().name == "lm");
        CHECK(back.options().init == layers::TransformerInit::glorot);
        CHECK(back.vocabulary() == 7);
        check_equal(logits_of(back), logits_of(m));
    }
    SUBCASE("TransformerLM, TransformerOptions::gpt") {
        layers::TransformerLM m(7, layers::TransformerOptions::gpt(2, 2, 8, 6, 0.1));
        const std::string path = scratch("gpt.loom");
        m.save(path);
        const layers::TransformerLM back = layers::TransformerLM::load(path);
        CHECK(back.options().init == layers::TransformerInit::gpt);
        CHECK(back.options().feedforward_dropout == 0.0);
        check_equal(logits_of(back), logits_of(m));
    }
}

TEST_CASE("TransformerInit::gpt draws weight matrices N(0, 0.02^2), residual projections 0.02 / sqrt(2 layers)") {
    // The sample standard deviation of n normal draws is within 10 % of sigma with probability
    // 1 - 1e-9 for n >= 4096 (its relative error is about 1 / sqrt(2 n) = 1.1 %).
    const auto stddev = [](const Parameter& p) {
        const Matrix v = p.value<double>();
        double sum = 0, squares = 0;
        for (double x : v) sum += x, squares += x * x;
        const double n = static_cast<double>(v.size()), mean = sum / n;
        return std::sqrt(squares / n - mean * mean);
    };
    for (const bool seq2seq : {false, true}) {
        INFO((seq2seq ? "Seq2SeqTransformer" : "TransformerLM"));
        layers::TransformerOptions o = layers::TransformerOptions::gpt(4, 2, 64, 16);
        o.encoder_layers = 2;
        std::vector<Parameter> ps;
        if (seq2seq) {
            o.tie_embeddings = false;
            ps = layers::Seq2SeqTransformer(70, 80, o).parameters();
        } else {
            ps = layers::TransformerLM(70, o).parameters();
        }
        std::size_t residual = 0, other = 0;
        for (const Parameter& p : ps) {
            const std::string name = p.name();
            INFO(name);
            const Matrix v = p.value<double>();
            if (name.ends_with(".b") || name.ends_with(".bias")) {
                CHECK(xt::amax(xt::abs(v))() == 0.0);
            } else if (name.ends_with(".scale")) {
                CHECK(xt::amin(v)() == 1.0);
            } else if (name.ends_with(".out.W") || name.ends_with(".linear2.W")) {
                const bool encoder = name.find(".encoder.") != std::string::npos;
                CHECK(stddev(p) == doctest::Approx(0.02 / std::sqrt(2.0 * (encoder ? 2 : 4))).epsilon(0.1));
                ++residual;
            } else {  // q, k, v, linear1, an untied projection, embeddings and positions
                CHECK(stddev(p) == doctest::Approx(0.02).epsilon(0.1));
                ++other;
            }
        }
        CHECK(residual == (seq2seq ? 2 * 2 + 3 * 4 : 2 * 4));  // the encoder's 2 a layer, the decoder's 3
        CHECK(other > residual);
    }
    // The default stays Glorot's: U(-l, l), l = sqrt(6 / (64 + 256)), standard deviation l / sqrt(3).
    layers::TransformerOptions glorot = layers::TransformerOptions::gpt(1, 2, 64, 16);
    glorot.init = layers::TransformerInit::glorot;
    for (const Parameter& p : layers::TransformerLM(70, glorot).parameters())
        if (p.name().ends_with(".linear1.W"))
            CHECK(stddev(p) == doctest::Approx(std::sqrt(6.0 / 320.0) / std::sqrt(3.0)).epsilon(0.1));
}

TEST_CASE("a Transformer model file is refused when it is not one: kind, settings against parameters, records") {
    layers::TransformerLM lm(7, {.model_dim = 8, .heads = 2, .feedforward_dim = 12, .decoder_layers = 1});
    const std::string path = scratch("refused.loom");
    lm.save(path);
    CHECK_THROWS_WITH_AS(layers::Seq2SeqTransformer::load(read_model_file(path)),
                         doctest::Contains("of kind 'transformer_lm', not a Seq2SeqTransformer"), DataError);
    // Settings that make a larger model than the parameters the file holds: refused by count before
    // a model of those settings is made (a file claiming a huge width must not be allocated).
    for (const auto& claim : std::vector<std::pair<std::string, double>>{
             {"model_dim", 16}, {"decoder_layers", 900}, {"vocabulary", 1e6}, {"tie_embeddings", 1}}) {
        const std::string& setting = claim.first;
        CAPTURE(setting);
        std::map<std::string, double> settings{
            {"model_dim", 8},      {"heads", 2},           {"feedforward_dim", 12}, {"dropout", 0.1},
            {"norm_first", 1},     {"epsilon", 1e-5},      {"activation", 0},       {"attention_dropout", 0},
            {"encoder_layers", 6}, {"decoder_layers", 1},  {"positions", 0},        {"max_positions", 512},
            {"tie_embeddings", 0}, {"scale_embedding", 1}, {"vocabulary", 7}};
        settings[setting] = claim.second;
        save_model_file(path, "transformer_lm", lm.parameters(),
                        {{"transformer", settings_record(settings)}, {"transformer_name", "lm"}});
        CHECK_THROWS_WITH_AS(layers::TransformerLM::load(path), doctest::Contains("its settings make a model of"),
                             DataError);
    }
    save_model_file(path, "transformer_lm", lm.parameters(), {{"transformer_name", "lm"}});
    CHECK_THROWS_WITH_AS(layers::TransformerLM::load(path), doctest::Contains("transformer"), DataError);
    CHECK_THROWS_WITH_AS(lm.save(path, {{"transformer", "mine"}}), doctest::Contains("the record 'transformer'"),
                         UserError);
}

TEST_CASE("TransformerDecoderLayer::cross_attention_weights are forward's weights, and a decoder-only layer has none") {
    layers::TransformerDecoderLayer layer(small(), true, "dec");
    Variable x = sequence::input_variable({8}, "x"), memory = sequence::input_variable({8}, "memory");
    const Variable alone = layer.cross_attention_weights(x, memory);
    const Variable within = layer.forward(x, memory, true).cross_attention_weights.at(0);
    const Bindings in{{x, Value::sequences(loom::testing::random_sequences({8}, {2, 4, 1}, 81))},
                      {memory, Value::sequences(loom::testing::random_sequences({8}, {3, 1, 5}, 82))}};
    auto v = evaluate({alone, within}, in);
    check_equal(v[alone], v[within]);
    for (std::size_t n = 0; n < 3; ++n) {
        const Matrix rows = v[alone].sequence<double>(n);
        for (std::size_t t = 0; t < rows.shape(0); ++t) CHECK(xt::sum(xt::row(rows, t))() == doctest::Approx(1.0));
    }
    layers::TransformerDecoderLayer only(small(), false, "only");
    CHECK_THROWS_WITH_AS(only.cross_attention_weights(x, memory), doctest::Contains("only: has no cross-attention"),
                         UserError);
}
