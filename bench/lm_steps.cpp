// lm_steps: the lm sample's GPT trained step by step on windows that bench/torch_lm.py --trace
// draws too, from weights both engines read (a safetensors file under loom's names), so that the
// two engines' losses, gradient norms and learning rates can be compared step by step.
//
//   torch_lm.py --train T --iterations 0 --save-safetensors init.safetensors [sizes]
//   lm_steps --train T --load-safetensors init.safetensors --iterations 200 [sizes] > loom.txt
//   torch_lm.py --train T --load-safetensors init.safetensors --iterations 200 --trace [sizes] > torch.txt
//
// With --learning-rate 0 the weights stay as loaded: each line is then the training-mode loss of
// its windows under fresh dropout draws, which the two engines should give alike on average.
//
// Every line is `step I: loss L, gradient norm G, learning rate R`: the batch's mean loss before
// the update, the global norm of its mean gradient before clipping, and the rate the update used.
// Window b of iteration i starts at splitmix64(i * batch + b) mod (n - block), n the training
// part's length (the text less its last --holdout), the rule torch_lm.py --trace uses.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <numbers>

#include <loom.hpp>

#include "model.hpp"

using namespace loom;

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
    std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

int main(int argc, char** argv) {
    std::string train_file, weights, save, precision = "highest";
    lm::Settings sizes{.layers = 4, .heads = 4, .width = 128, .block = 64, .dropout = 0.0};
    std::size_t batch = 12, iterations = 200, warmup = 100;
    double holdout = 0.05, learning_rate = 1e-3, min_learning_rate = 1e-4, weight_decay = 0.1, beta2 = 0.99, clip = 1.0;
    std::uint64_t seed = 1;
    CLI::App app{"The lm sample's GPT trained step by step on torch_lm.py --trace's windows"};
    app.add_option("--train", train_file, "UTF-8 text")->required()->check(CLI::ExistingFile);
    app.add_option("--load-safetensors", weights, "initial weights under loom's names")->check(CLI::ExistingFile);
    app.add_option("--save-safetensors", save, "the weights after the last step");
    app.add_option("--holdout", holdout, "the end of --train left out")->check(CLI::Range(0.0, 0.5));
    app.add_option("--layers", sizes.layers)->check(CLI::Range(1, 64));
    app.add_option("--heads", sizes.heads)->check(CLI::Range(1, 256));
    app.add_option("--width", sizes.width)->check(CLI::Range(1, 4096));
    app.add_option("--block", sizes.block)->check(CLI::Range(2, 4096));
    app.add_option("--dropout", sizes.dropout)->check(CLI::Range(0.0, 0.9));
    app.add_option("--batch", batch)->check(CLI::Range(1, 4096));
    app.add_option("--iterations", iterations)->check(CLI::Range(1, 1 << 24));
    app.add_option("--warmup", warmup);
    app.add_option("--learning-rate", learning_rate);
    app.add_option("--min-learning-rate", min_learning_rate);
    app.add_option("--weight-decay", weight_decay);
    app.add_option("--beta2", beta2);
    app.add_option("--clip", clip);
    app.add_option("--seed", seed, "dropout's draws, and the weights without --load-safetensors");
    app.add_option("--matmul-precision", precision)->check(CLI::IsMember({"highest", "medium"}));
    CLI11_PARSE(app, argc, argv);
    try {
        set_seed(seed);
        set_blas_threads(1);
        set_matmul_precision(parse_matmul_precision(precision));
        const std::u32string text = read_utf8_text(train_file);
        const Alphabet alphabet = Alphabet::of(text);
        const std::vector<std::uint32_t> all = alphabet.ids(text, train_file);
        const auto n = static_cast<std::size_t>(static_cast<double>(all.size()) * (1.0 - holdout));
        const std::vector<std::uint32_t> ids(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
        if (ids.size() < sizes.block + 1) throw UserError("--train: too short for --block");

        lm::Model m(sizes, alphabet.size());
        if (!weights.empty()) assign_safetensors(read_safetensors(weights), m.parameters());
        const LearningRate schedule =
            budget_cosine_decay(learning_rate, warmup, TrainingBudget::steps(iterations), min_learning_rate);
        Trainer trainer(m.loss, Variable(),
                        adamw(m.parameters(), schedule, 0.9, beta2, 1e-8, weight_decay,
                              {.gradient_clipping_norm = clip, .decay_matrices_only = true}));
        for (std::size_t i = 0; i < iterations; ++i) {
            std::vector<std::vector<std::size_t>> in, next;
            for (std::size_t b = 0; b < batch; ++b) {
                const std::size_t at = splitmix64(i * batch + b) % (ids.size() - sizes.block);
                in.emplace_back(ids.begin() + at, ids.begin() + at + sizes.block);
                next.emplace_back(ids.begin() + at + 1, ids.begin() + at + sizes.block + 1);
            }
            const MinibatchResult r = trainer.train_minibatch(m.bind(in, next));
            std::printf("step %zu: loss %.6f, gradient norm %.6f, learning rate %.6e\n", i, r.average_loss(),
                        trainer.learner().last_gradient_norm(), schedule(i));
        }
        if (!save.empty()) save_safetensors(save, m.parameters());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
