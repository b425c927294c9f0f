#pragma once
/// \file
/// fit: the training loop most programs write by hand, on top of a Trainer. It runs epochs over a
/// minibatch source, evaluates every N minibatches (a caller's function: higher is better), keeps
/// the parameters of the best evaluation, stops after `patience` evaluations without improvement,
/// draws the progress bar, and, given a checkpoint path, saves where it is so that a run stopped
/// anywhere (mid-epoch included) resumes with exactly the losses of a run that never stopped.
///
/// The source is an EpochSource, whose `minibatch` must be a pure function of (epoch, minibatch
/// index): that is what makes resuming exact without saving a reader's internal state (a Batcher's
/// epoch_batches(epoch)[i] is one).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "training/progress.hpp"
#include "training/trainer.hpp"

namespace loom {

/// The training data of fit, minibatch by minibatch.
struct EpochSource {
    std::size_t minibatches_per_epoch = 0;  ///< the minibatches of every epoch (at least 1)
    /// The bindings of minibatch `index` of `epoch` (both from 0); called once per training step.
    std::function<Bindings(std::size_t epoch, std::size_t index)> minibatch;
    std::uint64_t samples_per_epoch = 0;  ///< for the progress bar's fraction and ETA; 0: unknown
};

/// What an evaluation gave: the score fit compares (higher is better) and, optionally, the text
/// printed for it (e.g. "held-out MAP 0.81, dev MAP 0.79"); a plain double converts to it.
struct Evaluation {
    /// A score, and the text printed for it (empty: fit prints the score).
    Evaluation(double s, std::string text = {}) : score(s), summary(std::move(text)) {}
    double score;         ///< higher is better
    std::string summary;  ///< printed for this evaluation (may be empty)
};

/// One evaluation fit ran, as FitResult lists it.
struct FitEvaluation {
    std::size_t step = 0;   ///< training steps (minibatches) done when it ran, counted from 1
    std::size_t epoch = 0;  ///< of the last minibatch trained, from 0
    double score = 0;       ///< Evaluation::score
    double train_loss = 0;  ///< average loss of the minibatches since the previous evaluation
    std::string summary;    ///< Evaluation::summary
    bool improved = false;  ///< the best so far: its parameters were kept
};

/// How fit trains, evaluates, stops and saves.
struct FitOptions {
    std::size_t max_epochs = 1;  ///< the epochs to train, resumed ones included
    /// Evaluate every this many training steps; 0: at the end of each epoch.
    std::size_t evaluate_every = 0;
    /// Stop after this many evaluations in a row without a better score; 0: never stop early.
    std::size_t patience = 0;
    double min_improvement = 0;  ///< a score must exceed the best by more than this to count
    /// When fit returns, the parameters are those of the best evaluation (if there was one).
    bool restore_best = true;
    /// Where fit saves its state (Trainer checkpoint + fit's own records) at every evaluation, every
    /// `checkpoint_every` steps and when it returns. If the file exists when fit starts, fit resumes
    /// from it. Empty: no checkpoint, nothing resumed.
    std::string checkpoint_path{};
    std::size_t checkpoint_every = 0;  ///< steps; 0: only at evaluations and at the end
    /// The best parameters' file; empty: checkpoint_path + ".best" if there is a checkpoint path,
    /// otherwise the best parameters are kept in memory.
    std::string best_path{};
    /// Stop (saving the checkpoint) once this many steps are done in all, resumed runs included;
    /// 0: no limit. A step budget, and how the tests interrupt a run.
    std::size_t max_steps = 0;
    /// Stop (saving the checkpoint) once this many seconds have passed since fit was called,
    /// evaluations included; checked before each step. 0: no limit. A time budget (a resumed run
    /// counts its own time only).
    double max_seconds = 0;
    /// When fit stops for good (its epochs done or max_seconds reached, not max_steps or stop_requested: an
    /// interruption), evaluate once more unless the last step was just evaluated, so that the best
    /// parameters kept are chosen among the last ones too.
    bool evaluate_at_end = false;
    /// Progress: the live bar and a line per epoch and per evaluation. Null: print nothing.
    std::ostream* progress_stream = nullptr;
    ProgressOptions progress{};  ///< how the bar is drawn on progress_stream
    /// Called after every training step with the step number (from 1) and what it gave.
    std::function<void(std::size_t step, const MinibatchResult&)> on_step{};
    /// Asked before each step: true stops the run as max_steps does (the checkpoint saved, no
    /// evaluation at the end, FitStop::interrupted). How a caller stops a run from outside: a
    /// signal handler's flag (Ctrl-C), a stop button, the Python binding's pending KeyboardInterrupt.
    std::function<bool()> stop_requested{};
};

/// Why fit returned: max_epochs done, patience ran out, max_steps or max_seconds reached, or
/// FitOptions::stop_requested said stop.
enum class FitStop { epochs, early, max_steps, max_seconds, interrupted };

/// What fit did.
struct FitResult {
    std::vector<FitEvaluation> evaluations;  ///< all of them, those before a resume included
    std::vector<double> epoch_losses;        ///< average training loss of each finished epoch
    std::size_t steps = 0;                   ///< in all, resumed runs included
    std::size_t epochs = 0;                  ///< finished epochs
    std::ptrdiff_t best = -1;                ///< index of the best evaluation; -1: none
    FitStop stopped = FitStop::epochs;       ///< why it returned
    bool resumed = false;                    ///< it went on from checkpoint_path
    double best_score() const;               ///< the best evaluation's score; NaN without one
};

/// Trains `trainer` on `source` (above) until `options` say stop.
/// \param trainer  steps each minibatch (its learner, session and checkpoints)
/// \param source  the minibatches of every epoch
/// \param options  epochs, evaluations, early stopping, checkpoints and progress
/// \param evaluate  scores the model, higher is better (may be empty)
/// \return every evaluation, the epochs' losses, the best evaluation and why fit stopped.
/// `evaluate` may be empty: then nothing is evaluated, kept or stopped early. It runs in whatever
/// mode it sets (Trainer::test_minibatch and Session evaluation run in inference mode); a NaN score
/// never counts as an improvement. A source without minibatches, a checkpoint whose position lies
/// outside this source's epoch, one that fit did not write, or (with restore_best) one that has a
/// best evaluation whose best_path file is missing (a checkpoint copied without its ".best") is a
/// UserError, before anything changes.
FitResult fit(Trainer& trainer, const EpochSource& source, const FitOptions& options,
              const std::function<Evaluation()>& evaluate = {});

}  // namespace loom
