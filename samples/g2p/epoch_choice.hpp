#pragma once
// What the held-out training words decide after each epoch of the g2p sample: whether the epoch's
// parameters are kept (the best so far), and whether the plateau schedule halves the learning rate.
//
// A held-out PER moves in steps of whole phonemes of a few words: over fewer than min_words words,
// or when two epochs score the same, it cannot tell them apart. Then the later epoch is kept and
// the rate is the schedule's: an epoch is never chosen over a later one, nor the rate halved, on a
// difference the held-out words cannot show.
#include <cstddef>
#include <limits>
#include <string>

namespace g2p {

class EpochChoice {
public:
    // The fewest held-out words whose PER tells epochs apart.
    static constexpr std::size_t min_words = 20;

    // `held_out`: the number of held-out words; `plateau`: the schedule halves the rate after
    // `patience` epochs in a row that scored worse than the best.
    EpochChoice(std::size_t held_out, bool plateau, std::size_t patience = 2);

    struct Verdict {
        bool keep = false;   // this epoch's parameters are the ones to keep (so far)
        bool halve = false;  // the rate is to be halved
        std::string note;    // for the epoch's line: "", ", no better", ", rate halved", ...
    };
    // The verdict on an epoch whose held-out PER is `per`.
    Verdict after_epoch(double per);
    // Whether a mean of parameters scoring `per` is kept rather than the epoch kept: with too few
    // held-out words, the mean (the schedule's end) is.
    bool prefers(double per) const { return !decides() || per <= best_; }
    // Whether there are enough held-out words to choose (min_words).
    bool decides() const { return held_out_ >= min_words; }

private:
    std::size_t held_out_, patience_;
    bool plateau_;
    double best_ = std::numeric_limits<double>::infinity();
    std::size_t worse_ = 0;  // epochs in a row that scored worse than the best
};

}  // namespace g2p
