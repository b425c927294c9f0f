#include "epoch_choice.hpp"

namespace g2p {

EpochChoice::EpochChoice(std::size_t held_out, bool plateau, std::size_t patience)
    : held_out_(held_out), patience_(patience), plateau_(plateau) {}

EpochChoice::Verdict EpochChoice::after_epoch(double per) {
    if (!decides()) return {true, false, ""};
    if (per < best_) {
        best_ = per, worse_ = 0;
        return {true, false, ""};
    }
    // A tie: nothing tells the two epochs apart, so the later one, further along the schedule, is kept.
    if (per == best_) return {true, false, ", as good: this later epoch kept"};
    if (plateau_ && ++worse_ >= patience_) {
        worse_ = 0;
        return {false, true, ", rate halved"};
    }
    return {false, false, ", no better"};
}

}  // namespace g2p
