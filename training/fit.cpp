#include "training/fit.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <ostream>

#include "core/errors.hpp"
#include "core/serialization.hpp"

namespace loom {

namespace {

// fit's own records in the checkpoint, under a name users will not pick.
constexpr const char* state_key = "loom.fit.state";

// A skipped update (non-finite loss) stays out of the averages, as in the progress printer.
struct LossSum {
    double sum = 0;
    std::uint64_t count = 0;
    void add(const MinibatchResult& r) {
        if (r.skipped_updates) return;
        sum += r.loss_sum;
        count += r.loss_count;
    }
    double average() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

// Everything besides the trainer's own checkpoint that a resumed run needs to go on exactly.
struct FitState {
    FitResult result;
    std::size_t since_best = 0;  // evaluations in a row without improvement
    bool stopped_early = false;
    LossSum epoch_loss, window_loss;

    std::string bytes() const {
        ByteWriter w;
        w.u64(result.steps), w.u64(result.epochs), w.u64(static_cast<std::uint64_t>(result.best + 1));
        w.u64(since_best), w.u64(stopped_early);
        w.f64(epoch_loss.sum), w.u64(epoch_loss.count), w.f64(window_loss.sum), w.u64(window_loss.count);
        w.u64(result.epoch_losses.size());
        for (double l : result.epoch_losses) w.f64(l);
        w.u64(result.evaluations.size());
        for (const auto& e : result.evaluations) {
            w.u64(e.step), w.u64(e.epoch), w.f64(e.score), w.f64(e.train_loss), w.str(e.summary), w.u64(e.improved);
        }
        return w.bytes();
    }

    static FitState parse(const std::string& bytes, const std::string& where) {
        ByteReader in(bytes, where);
        FitState s;
        s.result.steps = in.u64(), s.result.epochs = in.u64();
        s.result.best = static_cast<std::ptrdiff_t>(in.u64()) - 1;
        s.since_best = in.u64(), s.stopped_early = in.u64() != 0;
        s.epoch_loss.sum = in.f64(), s.epoch_loss.count = in.u64();
        s.window_loss.sum = in.f64(), s.window_loss.count = in.u64();
        for (std::uint64_t k = in.u64(); k > 0; --k) s.result.epoch_losses.push_back(in.f64());
        for (std::uint64_t k = in.u64(); k > 0; --k) {
            FitEvaluation e;
            e.step = in.u64(), e.epoch = in.u64(), e.score = in.f64(), e.train_loss = in.f64();
            e.summary = in.str(), e.improved = in.u64() != 0;
            s.result.evaluations.push_back(std::move(e));
        }
        if (!in.done() || s.result.best >= static_cast<std::ptrdiff_t>(s.result.evaluations.size()))
            throw DataError(where + ": fit's records are inconsistent");
        return s;
    }
};

std::string fixed(double v, int digits = 4) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

}  // namespace

double FitResult::best_score() const {
    return best < 0 ? std::numeric_limits<double>::quiet_NaN() : evaluations[static_cast<std::size_t>(best)].score;
}

FitResult fit(Trainer& trainer, const EpochSource& source, const FitOptions& o,
              const std::function<Evaluation()>& evaluate) {
    const std::size_t n = source.minibatches_per_epoch;
    if (n == 0 || !source.minibatch) throw UserError("fit: the source has no minibatches (minibatches_per_epoch 0)");
    const std::vector<Parameter>& params = trainer.learner().parameters();
    const std::string best_path = !o.best_path.empty()        ? o.best_path
                                  : o.checkpoint_path.empty() ? ""
                                                              : o.checkpoint_path + ".best";

    FitState s;
    std::size_t epoch = 0, index = 0;  // of the next minibatch
    if (!o.checkpoint_path.empty() && std::filesystem::exists(o.checkpoint_path)) {
        const std::string where = "checkpoint '" + o.checkpoint_path + "'";
        // fit's records are read and checked with the file, before the trainer changes.
        const Checkpoint c = trainer.load_checkpoint(o.checkpoint_path, [&](const CheckpointExtras& extras) {
            const auto it = extras.find(state_key);
            if (it == extras.end()) throw UserError(where + " was not written by fit: it has no fit records");
            s = FitState::parse(it->second, where);
            // The best parameters so far live in their own file: a checkpoint copied without it would
            // train for hours and then fail to restore them, so it is refused before anything changes.
            if (o.restore_best && s.result.best >= 0 && !best_path.empty() && !std::filesystem::exists(best_path))
                throw UserError(where + " has a best evaluation (at step " +
                                std::to_string(s.result.evaluations[static_cast<std::size_t>(s.result.best)].step) +
                                ") whose parameters' file '" + best_path +
                                "' is missing; copy it beside the checkpoint, or resume without restore_best");
        });
        if (c.position.minibatch >= n)
            throw UserError(where + " stopped at minibatch " + std::to_string(c.position.minibatch) +
                            " of its epoch; this source has " + std::to_string(n) + " per epoch");
        epoch = c.position.epoch, index = c.position.minibatch;
        s.result.resumed = true;
    }

    std::ostream discard(nullptr);
    ProgressOptions po = o.progress;
    if (!po.num_epochs) po.num_epochs = o.max_epochs;
    if (!po.epoch_size) po.epoch_size = source.samples_per_epoch;
    po.first_epoch = epoch + 1;
    if (!o.progress_stream) po.live = false;
    ProgressPrinter printer(po, o.progress_stream ? *o.progress_stream : discard);

    std::vector<xt::xarray<double>> best_in_memory;  // exact for float and double parameters
    auto save_state = [&] {
        if (o.checkpoint_path.empty()) return;
        const TrainingPosition position{epoch, index, trainer.total_samples_seen(), {}};
        trainer.save_checkpoint(o.checkpoint_path, position, {{state_key, s.bytes()}});
    };
    // Returns true when the run should stop early.
    auto run_evaluation = [&](std::size_t epoch_of_step) {
        const Evaluation e = evaluate();
        FitEvaluation fe{s.result.steps, epoch_of_step, e.score, s.window_loss.average(), e.summary, false};
        s.window_loss = {};
        const auto& r = s.result;
        fe.improved = !std::isnan(e.score) && (r.best < 0 || e.score > r.best_score() + o.min_improvement);
        std::string line = "evaluation at step " + std::to_string(fe.step) + " (epoch " +
                           std::to_string(epoch_of_step + 1) +
                           "): " + (e.summary.empty() ? "score " + fixed(e.score) : e.summary);
        if (fe.improved) {
            s.result.best = static_cast<std::ptrdiff_t>(r.evaluations.size()), s.since_best = 0;
            if (!best_path.empty()) {
                save_checkpoint(best_path, params, nullptr);
            } else {
                best_in_memory.clear();
                for (const auto& p : params) best_in_memory.push_back(p.value<double>());
            }
            line += " (best)";
        } else {
            ++s.since_best;
            line += r.best < 0 ? ", no score yet"
                               : ", best " + fixed(r.best_score()) + " at step " +
                                     std::to_string(r.evaluations[static_cast<std::size_t>(r.best)].step);
            if (o.patience) line += " (" + std::to_string(s.since_best) + " of " + std::to_string(o.patience) + ")";
        }
        s.result.evaluations.push_back(std::move(fe));
        printer.note(line);
        return o.patience && s.since_best >= o.patience;
    };

    while (!s.stopped_early && epoch < o.max_epochs) {
        if (o.max_steps && s.result.steps >= o.max_steps) {
            s.result.stopped = FitStop::max_steps;
            break;
        }
        const MinibatchResult r = trainer.train_minibatch(source.minibatch(epoch, index));
        ++s.result.steps;
        s.epoch_loss.add(r), s.window_loss.add(r);
        printer.update(r);
        if (o.on_step) o.on_step(s.result.steps, r);
        const std::size_t epoch_of_step = epoch;
        if (++index == n) {
            s.result.epoch_losses.push_back(s.epoch_loss.average());
            s.epoch_loss = {};
            printer.end_epoch();
            ++epoch, index = 0, ++s.result.epochs;
        }
        const bool due = o.evaluate_every ? s.result.steps % o.evaluate_every == 0 : index == 0;
        if (evaluate && due) {
            s.stopped_early = run_evaluation(epoch_of_step);
            save_state();
        } else if (o.checkpoint_every && s.result.steps % o.checkpoint_every == 0) {
            save_state();
        }
    }
    if (s.stopped_early) s.result.stopped = FitStop::early;
    save_state();
    if (o.restore_best && s.result.best >= 0) {
        if (!best_path.empty()) {
            load_checkpoint(best_path, params, nullptr);
        } else {
            for (std::size_t k = 0; k < params.size(); ++k) params[k].set_value(best_in_memory[k]);
        }
    }
    return s.result;
}

}  // namespace loom
