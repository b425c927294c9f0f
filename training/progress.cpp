#include "training/progress.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include <unistd.h>

namespace loom {

namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
    char buf[128];
    std::snprintf(buf, sizeof buf, fmt, a, b, c);
    return buf;
}

std::string duration(double seconds) {
    const auto s = static_cast<long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

// A skipped update's sums (NaN for a NaN loss) stay out of the averages; it is counted instead.
void add(MinibatchResult& total, const MinibatchResult& m) {
    total.skipped_updates += m.skipped_updates;
    if (m.skipped_updates) return;
    total.loss_sum += m.loss_sum;
    total.loss_count += m.loss_count;
    total.metric_sum += m.metric_sum;
    total.metric_count += m.metric_count;
}

std::string averages(const MinibatchResult& r) {
    std::string s = "loss = " + format("%.6f", r.average_loss()) + " * " + std::to_string(r.loss_count);
    if (r.metric_count)
        s += ", metric = " + format("%.6f", r.average_metric()) + " * " + std::to_string(r.metric_count);
    if (r.skipped_updates)
        s += ", " + std::to_string(r.skipped_updates) + " update" + (r.skipped_updates == 1 ? "" : "s") +
             " skipped (non-finite loss or gradient)";
    return s;
}

}  // namespace

ProgressPrinter::ProgressPrinter(ProgressOptions options) : ProgressPrinter(std::move(options), std::cout) {}

ProgressPrinter::ProgressPrinter(ProgressOptions options, std::ostream& out)
    : options_(std::move(options)),
      out_(out),
      live_(options_.live.value_or(&out == &std::cout && ::isatty(STDOUT_FILENO) == 1)),
      epoch_(options_.first_epoch),
      epoch_start_(Clock::now()),
      last_draw_(epoch_start_ - std::chrono::hours(1)) {}

std::string ProgressPrinter::prefix() const { return options_.tag.empty() ? std::string() : "[" + options_.tag + "] "; }

void ProgressPrinter::update(const MinibatchResult& minibatch) {
    add(epoch_total_, minibatch);
    add(window_total_, minibatch);
    ++minibatches_;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
    const std::size_t every = options_.print_every_n_minibatches;
    if (every && minibatches_ % every == 0) {
        clear_bar();
        out_ << prefix() << " minibatch " << (minibatches_ - every + 1) << "-" << minibatches_ << ": "
             << averages(window_total_) << "\n";
        out_.flush();
        window_total_ = {};
    }
    if (live_ && std::chrono::duration<double>(now - last_draw_).count() >= options_.redraw_seconds) {
        draw_bar(elapsed);
        last_draw_ = now;
    }
}

void ProgressPrinter::draw_bar(double elapsed) {
    const double done = static_cast<double>(epoch_total_.loss_count);
    const double rate = elapsed > 0 ? done / elapsed : 0.0;
    std::string line = prefix() + "epoch " + std::to_string(epoch_) + " ";
    if (options_.epoch_size > 0) {
        const double frac = std::min(1.0, done / static_cast<double>(options_.epoch_size));
        const int width = std::max(1, options_.bar_width);
        const int filled = static_cast<int>(frac * width);
        line += "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
                std::string(width - filled - (filled < width ? 1 : 0), ' ') + "] " + format("%3.0f%%", 100 * frac);
        line += " " + std::to_string(epoch_total_.loss_count) + "/" + std::to_string(options_.epoch_size);
    } else {
        line += std::to_string(epoch_total_.loss_count) + " samples";
    }
    line += " " + format("%.1f", rate) + " samples/s";
    if (options_.epoch_size > 0 && rate > 0) {
        const double left = std::max(0.0, static_cast<double>(options_.epoch_size) - done) / rate;
        line += " ETA " + duration(left);
    }
    line += " loss " + format("%.4f", epoch_total_.average_loss());
    // Pad with spaces so a shorter line fully covers the previous one.
    const std::size_t len = line.size();
    if (len < bar_chars_) line += std::string(bar_chars_ - len, ' ');
    bar_chars_ = len;
    out_ << '\r' << line;
    out_.flush();
    bar_shown_ = true;
}

void ProgressPrinter::clear_bar() {
    if (!bar_shown_) return;
    out_ << '\r' << std::string(bar_chars_, ' ') << '\r';
    bar_shown_ = false;
    bar_chars_ = 0;
}

void ProgressPrinter::note(const std::string& line) {
    clear_bar();
    out_ << prefix() << line << "\n";
    out_.flush();
    last_draw_ = Clock::now() - std::chrono::hours(1);  // redraw the bar at the next update
}

MinibatchResult ProgressPrinter::end_epoch() {
    const double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
    clear_bar();
    const MinibatchResult total = epoch_total_;
    out_ << prefix() << "epoch " << epoch_;
    if (options_.num_epochs) out_ << " of " << options_.num_epochs;
    out_ << ": " << averages(total) << ", "
         << format("%.1f", elapsed > 0 ? static_cast<double>(total.loss_count) / elapsed : 0.0) << " samples/s, "
         << format("%.3f", elapsed) << " s\n";
    out_.flush();
    ++epoch_;
    minibatches_ = 0;
    epoch_total_ = {};
    window_total_ = {};
    epoch_start_ = Clock::now();
    last_draw_ = epoch_start_ - std::chrono::hours(1);
    return total;
}

}  // namespace loom
