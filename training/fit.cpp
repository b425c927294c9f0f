#include "training/fit.hpp"

#include <chrono>
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

std::size_t best_step(const FitResult& r) { return r.evaluations[static_cast<std::size_t>(r.best)].step; }

// One call of fit: the trainer, the next minibatch's place in the source, fit's records and the
// best parameters so far.
class FitRun {
public:
    FitRun(Trainer& trainer, const EpochSource& source, const FitOptions& o,
           const std::function<Evaluation()>& evaluate)
        : trainer_(trainer),
          source_(source),
          o_(o),
          evaluate_(evaluate),
          params_(trainer.learner().parameters()),
          best_path_(!o.best_path.empty()        ? o.best_path
                     : o.checkpoint_path.empty() ? ""
                                                 : o.checkpoint_path + ".best") {}

    bool can_resume() const { return !o_.checkpoint_path.empty() && std::filesystem::exists(o_.checkpoint_path); }
    void resume();
    ProgressOptions progress_options() const;
    void train(ProgressPrinter& printer);
    void save_state();
    void restore_best();
    const FitResult& result() const { return s_.result; }

private:
    void check_best_file(const std::string& where) const;
    void train_step(ProgressPrinter& printer);
    bool run_evaluation(std::size_t epoch_of_step, ProgressPrinter& printer);
    void keep_best();

    Trainer& trainer_;
    const EpochSource& source_;
    const FitOptions& o_;
    const std::function<Evaluation()>& evaluate_;
    const std::vector<Parameter>& params_;
    const std::string best_path_;
    FitState s_;
    std::size_t epoch_ = 0, index_ = 0;               // of the next minibatch
    std::vector<xt::xarray<double>> best_in_memory_;  // exact for float and double parameters
};

void FitRun::resume() {
    const std::string where = "checkpoint '" + o_.checkpoint_path + "'";
    // fit's records are read and checked with the file, before the trainer changes.
    const Checkpoint c = trainer_.load_checkpoint(o_.checkpoint_path, [&](const CheckpointExtras& extras) {
        const auto it = extras.find(state_key);
        if (it == extras.end()) throw UserError(where + " was not written by fit: it has no fit records");
        s_ = FitState::parse(it->second, where);
        check_best_file(where);
    });
    const std::size_t n = source_.minibatches_per_epoch;
    if (c.position.minibatch >= n)
        throw UserError(where + " stopped at minibatch " + std::to_string(c.position.minibatch) +
                        " of its epoch; this source has " + std::to_string(n) + " per epoch");
    epoch_ = c.position.epoch, index_ = c.position.minibatch;
    s_.result.resumed = true;
}

// The best parameters so far live in their own file: a checkpoint copied without it would train
// for hours and then fail to restore them, so it is refused before anything changes.
void FitRun::check_best_file(const std::string& where) const {
    if (o_.restore_best && s_.result.best >= 0 && !best_path_.empty() && !std::filesystem::exists(best_path_))
        throw UserError(where + " has a best evaluation (at step " + std::to_string(best_step(s_.result)) +
                        ") whose parameters' file '" + best_path_ +
                        "' is missing; copy it beside the checkpoint, or resume without restore_best");
}

ProgressOptions FitRun::progress_options() const {
    ProgressOptions po = o_.progress;
    if (!po.num_epochs) po.num_epochs = o_.max_epochs;
    if (!po.epoch_size) po.epoch_size = source_.samples_per_epoch;
    po.first_epoch = epoch_ + 1;
    if (!o_.progress_stream) po.live = false;
    return po;
}

void FitRun::train(ProgressPrinter& printer) {
    const auto start = std::chrono::steady_clock::now();
    const auto seconds = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (!s_.stopped_early && epoch_ < o_.max_epochs) {
        if (o_.max_steps && s_.result.steps >= o_.max_steps) {
            s_.result.stopped = FitStop::max_steps;
            break;
        }
        if (o_.max_seconds > 0 && seconds() >= o_.max_seconds) {
            s_.result.stopped = FitStop::max_seconds;
            break;
        }
        if (o_.stop_requested && o_.stop_requested()) {
            s_.result.stopped = FitStop::interrupted;
            break;
        }
        train_step(printer);
    }
    if (s_.stopped_early) s_.result.stopped = FitStop::early;
    // An early stop follows an evaluation of its last step, so it needs no test of its own here.
    const auto& evaluations = s_.result.evaluations;
    const bool last_evaluated = !evaluations.empty() && evaluations.back().step == s_.result.steps;
    const bool interrupted = s_.result.stopped == FitStop::max_steps || s_.result.stopped == FitStop::interrupted;
    if (evaluate_ && o_.evaluate_at_end && !interrupted && !last_evaluated)
        run_evaluation(index_ == 0 && epoch_ > 0 ? epoch_ - 1 : epoch_, printer);
}

// Trains on the next minibatch, then evaluates (and saves) or saves when it is due.
void FitRun::train_step(ProgressPrinter& printer) {
    const MinibatchResult r = trainer_.train_minibatch(source_.minibatch(epoch_, index_));
    ++s_.result.steps;
    s_.epoch_loss.add(r), s_.window_loss.add(r);
    printer.update(r);
    if (o_.on_step) o_.on_step(s_.result.steps, r);
    const std::size_t epoch_of_step = epoch_;
    if (++index_ == source_.minibatches_per_epoch) {
        s_.result.epoch_losses.push_back(s_.epoch_loss.average());
        s_.epoch_loss = {};
        printer.end_epoch();
        ++epoch_, index_ = 0, ++s_.result.epochs;
    }
    const bool due = o_.evaluate_every ? s_.result.steps % o_.evaluate_every == 0 : index_ == 0;
    if (evaluate_ && due) {
        s_.stopped_early = run_evaluation(epoch_of_step, printer);
        save_state();
    } else if (o_.checkpoint_every && s_.result.steps % o_.checkpoint_every == 0) {
        save_state();
    }
}

// Returns true when the run should stop early.
bool FitRun::run_evaluation(std::size_t epoch_of_step, ProgressPrinter& printer) {
    const Evaluation e = evaluate_();
    FitEvaluation fe{s_.result.steps, epoch_of_step, e.score, s_.window_loss.average(), e.summary, false};
    s_.window_loss = {};
    const auto& r = s_.result;
    fe.improved = !std::isnan(e.score) && (r.best < 0 || e.score > r.best_score() + o_.min_improvement);
    std::string line = "evaluation at step " + std::to_string(fe.step) + " (epoch " +
                       std::to_string(epoch_of_step + 1) +
                       "): " + (e.summary.empty() ? "score " + fixed(e.score) : e.summary);
    if (fe.improved) {
        s_.result.best = static_cast<std::ptrdiff_t>(r.evaluations.size()), s_.since_best = 0;
        keep_best();
        line += " (best)";
    } else {
        ++s_.since_best;
        line += r.best < 0 ? ", no score yet"
                           : ", best " + fixed(r.best_score()) + " at step " + std::to_string(best_step(r));
        if (o_.patience) line += " (" + std::to_string(s_.since_best) + " of " + std::to_string(o_.patience) + ")";
    }
    s_.result.evaluations.push_back(std::move(fe));
    printer.note(line);
    return o_.patience && s_.since_best >= o_.patience;
}

void FitRun::keep_best() {
    if (!best_path_.empty()) {
        save_checkpoint(best_path_, params_, nullptr);
    } else {
        best_in_memory_.clear();
        for (const auto& p : params_) best_in_memory_.push_back(p.value<double>());
    }
}

void FitRun::save_state() {
    if (o_.checkpoint_path.empty()) return;
    const TrainingPosition position{epoch_, index_, trainer_.total_samples_seen(), {}};
    trainer_.save_checkpoint(o_.checkpoint_path, position, {{state_key, s_.bytes()}});
}

void FitRun::restore_best() {
    if (!o_.restore_best || s_.result.best < 0) return;
    if (!best_path_.empty()) {
        load_checkpoint(best_path_, params_, nullptr);
    } else {
        for (std::size_t k = 0; k < params_.size(); ++k) params_[k].set_value(best_in_memory_[k]);
    }
}

}  // namespace

double FitResult::best_score() const {
    return best < 0 ? std::numeric_limits<double>::quiet_NaN() : evaluations[static_cast<std::size_t>(best)].score;
}

FitResult fit(Trainer& trainer, const EpochSource& source, const FitOptions& o,
              const std::function<Evaluation()>& evaluate) {
    if (source.minibatches_per_epoch == 0 || !source.minibatch)
        throw UserError("fit: the source has no minibatches (minibatches_per_epoch 0)");
    FitRun run(trainer, source, o, evaluate);
    if (run.can_resume()) run.resume();
    std::ostream discard(nullptr);
    ProgressPrinter printer(run.progress_options(), o.progress_stream ? *o.progress_stream : discard);
    run.train(printer);
    run.save_state();
    run.restore_best();
    return run.result();
}

}  // namespace loom
