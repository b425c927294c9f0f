#pragma once
/// \file
/// ProgressPrinter: what a training run shows while it runs.
///   - one line per epoch: epoch, average loss, average metric, samples/s, elapsed time, and how
///     many updates were skipped for a non-finite loss or gradient (their sums are left out);
///   - optionally one line every N minibatches;
///   - on a terminal only, a live bar (samples done, samples/s, ETA when the epoch size is known)
///     redrawn in place with a carriage return. Redirected to a file or a pipe, no bar and no
///     carriage return is written,
///     so logs stay readable.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "training/trainer.hpp"

namespace loom {

/// What a ProgressPrinter shows.
struct ProgressOptions {
    std::string tag;                            ///< printed at the start of each line, e.g. "train"
    std::size_t num_epochs = 0;                 ///< shown as "epoch 3 of 10" when known
    std::size_t first_epoch = 1;                ///< the number of the first epoch shown (a resumed run)
    std::uint64_t epoch_size = 0;               ///< samples per epoch, for the bar's fraction and ETA
    std::size_t print_every_n_minibatches = 0;  ///< 0: epoch lines only
    int bar_width = 30;                         ///< characters of the live bar
    double redraw_seconds = 0.1;                ///< the live bar is redrawn at most this often
    /// Whether to draw the live bar; unset: only when the stream is std::cout and stdout is a terminal.
    std::optional<bool> live;
};

/// Prints a run's progress (above) as minibatches arrive.
class ProgressPrinter {
public:
    /// Prints to std::cout.
    explicit ProgressPrinter(ProgressOptions options = {});
    /// Prints to `out`; the live bar is drawn only if options.live says so.
    ProgressPrinter(ProgressOptions options, std::ostream& out);

    /// Adds a minibatch to the epoch's totals; prints the every-N line when due and, when live,
    /// redraws the bar.
    void update(const MinibatchResult& minibatch);
    /// Prints the epoch's line and starts the next epoch. Returns the epoch's totals.
    MinibatchResult end_epoch();
    /// Prints a line of the caller's (e.g. an evaluation's) without breaking the live bar.
    void note(const std::string& line);

    std::size_t epoch() const { return epoch_; }  ///< 1-based number of the current epoch
    /// \return whether the live bar is drawn.
    bool live() const { return live_; }

private:
    using Clock = std::chrono::steady_clock;
    void draw_bar(double elapsed);
    void clear_bar();
    std::string prefix() const;

    ProgressOptions options_;
    std::ostream& out_;
    bool live_;
    std::size_t epoch_ = 1;
    std::size_t minibatches_ = 0;
    MinibatchResult epoch_total_, window_total_;  ///< the epoch so far; since the last N-minibatch line
    Clock::time_point epoch_start_, last_draw_;
    bool bar_shown_ = false;
    std::size_t bar_chars_ = 0;
};

}  // namespace loom
