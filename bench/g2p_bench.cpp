// g2p_bench: the g2p sample's model (samples/g2p/model.hpp) on CMUdict, timed as bench/torch_g2p.py
// times its PyTorch peer: teacher-forced training steps (forward, backward, Adam) on consecutive
// chunks of the training file, and beam-search decoding of the dev words. Prints one JSON object.
//
//   g2p_bench --train cmudict-train.dict --dev cmudict-dev.dict [--threads N] [--mode train|decode|both]
//
// --gemm-share also times every GEMM call of the training steps (train_gemm_share, else 0): two
// clock readings per call, which cost the Transformer's many small products 2-3 % of a step.
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "bench_common.hpp"
#include "model.hpp"

using namespace loom;

int main(int argc, char** argv) {
    std::string train_file, dev_file, model_file, mode = "both";
    std::size_t threads = 1, batch = 64, steps = 30, warmup = 3, decode_words = 0, decode_batch = 128, beam = 5,
                max_length = 30;
    bool gemm_share = false;
    g2p::Sizes sizes;
    CLI::App app{"Time the g2p model: training steps and beam-search decoding (JSON on stdout)"};
    app.add_option("--train", train_file, "CMUdict-format training file")->required()->check(CLI::ExistingFile);
    app.add_option("--dev", dev_file, "CMUdict-format file whose words are decoded")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--model", model_file, "decode with these trained parameters (g2p --save; its sizes)")
        ->check(CLI::ExistingFile);
    app.add_option("--mode", mode, "train, decode or both")->check(CLI::IsMember({"train", "decode", "both"}));
    app.add_option("--threads", threads, "inter-op threads (BLAS single-threaded)")->check(CLI::Range(1, 64));
    app.add_option("--batch", batch, "pronunciations per training step")->check(CLI::Range(1, 100000));
    app.add_option("--steps", steps, "timed training steps")->check(CLI::Range(1, 100000));
    app.add_option("--warmup", warmup, "untimed training steps first");
    app.add_option("--decode-words", decode_words, "dev words decoded (0: all)");
    app.add_option("--decode-batch", decode_batch, "words per beam search")->check(CLI::Range(1, 100000));
    app.add_option("--beam", beam, "beam width")->check(CLI::Range(1, 1000));
    app.add_option("--max-len", max_length, "phonemes per word at most")->check(CLI::Range(1, 1000));
    app.add_flag("--gemm-share", gemm_share, "time the training steps' GEMM calls too (train_gemm_share)");
    std::string architecture = "lstm";
    app.add_option("--architecture", architecture, "lstm or transformer (a --model file says its own)")
        ->check(CLI::IsMember({"lstm", "transformer"}));
    app.add_option("--layers", sizes.layers)->check(CLI::Range(1, 64));
    app.add_option("--model-dim", sizes.model)->check(CLI::Range(2, 4096));
    app.add_option("--heads", sizes.heads)->check(CLI::Range(1, 256));
    app.add_option("--feedforward", sizes.feedforward)->check(CLI::Range(1, 65536));
    app.add_option("--dropout", sizes.dropout)->check(CLI::Range(0.0, 0.9));
    app.add_option("--embed", sizes.embed)->check(CLI::Range(1, 4096));
    app.add_option("--encoder", sizes.encoder)->check(CLI::Range(1, 4096));
    app.add_option("--decoder", sizes.decoder)->check(CLI::Range(1, 4096));
    CLI11_PARSE(app, argc, argv);
    keep_freed_memory();  // as the g2p sample does; compare_g2p gives its PyTorch peer the same settings
    return bench::report_errors([&] {
        set_blas_threads(1);
        set_inter_op_threads(static_cast<int>(threads));
        set_seed(1);
        sizes.architecture = g2p::architecture_named(architecture);
        std::unique_ptr<ModelFile> trained;
        if (!model_file.empty()) {  // decoding a trained model: hypotheses as long as real ones
            trained = std::make_unique<ModelFile>(read_model_file(model_file, "g2p"));
            // Whole numbers in the range the options allow: a double from a file converted to size_t
            // is undefined behaviour when it is negative, NaN or huge.
            sizes = g2p::sizes_of(*trained);
        }
        g2p::Model m(sizes);
        if (trained) assign_parameters(*trained, m.parameters());
        double train_seconds = 0, tokens = 0, train_gemm_seconds = 0;
        std::string losses;  // every step's mean loss, all digits: two builds compare bit for bit
        if (mode != "decode") {
            // Consecutive chunks of the file's pronunciations, in file order (variants after their word).
            const PronunciationDictionary train = read_pronunciations(train_file);
            std::vector<std::vector<std::size_t>> words, prons;
            for (std::size_t i = 0; i < train.size() && words.size() < (warmup + steps) * batch; ++i)
                for (const auto& p : train.pronunciations()[i])
                    words.push_back(g2p::letter_ids(train.words()[i])), prons.push_back(g2p::phoneme_ids(p));
            if (words.size() < (warmup + steps) * batch) throw UserError("g2p_bench: --train has too few entries");
            // bench/torch_g2p.py's optimizer: the LSTM's Adam(2e-3), unclipped; the Transformer's Adam(1e-3,
            // betas (0.9, 0.98)) with the gradient clipped at norm 5, without the warm-up of the rate (same
            // cost). g2p itself trains both at 2e-3 after a warm-up, both clipped at norm 5.
            const bool transformer = sizes.architecture == g2p::Architecture::transformer;
            Trainer trainer(m.loss, Variable(),
                            transformer ? adam(m.parameters(), 1e-3, 0.9, 0.98, 1e-8, {.gradient_clipping_norm = 5.0})
                                        : adam(m.parameters(), 2e-3));
            for (std::size_t s = 0; s < warmup + steps; ++s) {
                const std::vector<std::vector<std::size_t>> w(words.begin() + s * batch,
                                                              words.begin() + (s + 1) * batch),
                    p(prons.begin() + s * batch, prons.begin() + (s + 1) * batch);
                gemm_timing(gemm_share && s >= warmup);
                gemm_reset_timing();
                const double t0 = bench::wall_seconds();
                const TrainingScope training;  // dropout drops, as in g2p's training
                const MinibatchResult r = trainer.train_minibatch(m.bind(w, p));
                char loss[32];
                std::snprintf(loss, sizeof loss, "%s%.17g", losses.empty() ? "" : ", ", r.average_loss());
                losses += loss;
                if (s < warmup) continue;
                train_seconds += bench::wall_seconds() - t0;
                train_gemm_seconds += gemm_seconds();
                for (std::size_t k = 0; k < batch; ++k) tokens += double(w[k].size() + p[k].size() + 1);
            }
        }
        double decode_seconds = 0;
        std::size_t decoded = 0, phonemes = 0, unfinished = 0;
        if (mode != "train") {
            // The Transformer decodes the weights as loaded, not as the timed steps changed them (as the peer).
            if (trained && sizes.architecture == g2p::Architecture::transformer)
                assign_parameters(*trained, m.parameters());
            const PronunciationDictionary dev = read_pronunciations(dev_file);
            const std::size_t n = decode_words == 0 ? dev.size() : std::min(decode_words, dev.size());
            {  // warm-up, untimed (as the peer's): the step's graph is compiled at the first call
                std::vector<std::vector<std::size_t>> words;
                for (std::size_t i = 0; i < std::min(decode_batch, n); ++i)
                    words.push_back(g2p::letter_ids(dev.words()[i]));
                m.predict(words, beam, max_length);
            }
            for (std::size_t start = 0; start < n; start += decode_batch) {
                std::vector<std::vector<std::size_t>> words;
                for (std::size_t i = start; i < std::min(start + decode_batch, n); ++i)
                    words.push_back(g2p::letter_ids(dev.words()[i]));
                const double t0 = bench::wall_seconds();
                const g2p::Model::Prediction p = m.predict(words, beam, max_length);
                decode_seconds += bench::wall_seconds() - t0;
                for (const auto& ids : p.phonemes) phonemes += ids.size();
                unfinished += p.unfinished;
            }
            decoded = n;
        }
        gemm_timing(false);
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        std::printf(
            "{\"engine\": \"loom\", \"threads\": %zu, \"batch\": %zu, \"beam\": %zu, \"train_words_per_s\": %.2f, "
            "\"train_ms_per_step\": %.3f, \"train_tokens_per_step\": %.1f, \"decode_words_per_s\": %.2f, "
            "\"decode_words\": %zu, \"decode_mean_phonemes\": %.3f, \"decode_unfinished\": %zu, \"train_gemm_share\": "
            "%.3f, \"peak_rss_mib\": %.1f, \"embed\": %zu, \"encoder\": "
            "%zu, \"decoder\": %zu, \"architecture\": \"%s\", \"layers\": %zu, \"model\": %zu, \"heads\": %zu, "
            "\"feedforward\": %zu, \"train_losses\": [%s]}\n",
            threads, batch, beam, train_seconds > 0 ? double(steps * batch) / train_seconds : 0.0,
            train_seconds > 0 ? 1000 * train_seconds / double(steps) : 0.0, tokens / double(steps),
            decode_seconds > 0 ? double(decoded) / decode_seconds : 0.0, decoded,
            decoded > 0 ? double(phonemes) / double(decoded) : 0.0, unfinished,
            train_seconds > 0 ? train_gemm_seconds / train_seconds : 0.0, double(usage.ru_maxrss) / 1024, sizes.embed,
            sizes.encoder, sizes.decoder, g2p::architecture_name(sizes.architecture).c_str(), sizes.layers, sizes.model,
            sizes.heads, sizes.feedforward, losses.c_str());
        return 0;
    });
}
