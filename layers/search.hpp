#pragma once
// The searches Generator drives (greedy decoding, beam search, sampling): each item's hypotheses,
// extended by one symbol per step from the log-probabilities the step computed for their rows. Not
// for users: Generator (layers/decoder.hpp) is the interface; layers/generator.cpp runs the steps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "layers/decoder.hpp"

namespace loom::layers::search {

// A hypothesis still growing: its symbols, summed log-probability and its row in the last step.
struct Live {
    std::vector<std::size_t> symbols;
    double log_probability = 0;
    std::size_t row = 0;
    std::size_t dropped = 0;  // symbols emitted before `symbols` and no longer kept (keep_symbols false)
};

// The most symbols a hypothesis keeps: every one, or with GenerateOptions::keep_symbols false the
// last max(1, context).
std::size_t symbols_kept(const GenerateOptions& o);
// With keep_symbols false, drops the front of `symbols` down to the last symbols_kept(o) once it
// holds twice as many (so that dropping costs O(1) a symbol); returns how many it dropped.
std::size_t forget_old(std::vector<std::size_t>& symbols, const GenerateOptions& o, bool now = false);

// One item's search: its live hypotheses, those that ended, and whether it is over.
struct Beam {
    std::vector<Live> live;
    std::vector<Hypothesis> ended;
    bool done = false;
};

// A UserError starting with `who` for options no search takes (GenerateOptions says which), before
// any step.
void check_options(const GenerateOptions& o, std::size_t vocabulary, const std::string& who);

// Greedy decoding (beam_width 1) and beam search: extends `b` by one step from its rows'
// log-probabilities lp ([rows, v_size]); `last`: max_length is reached with this symbol.
template <class T>
void extend(Beam& b, const T* lp, std::size_t v_size, const GenerateOptions& o, bool last);

// The symbol a search of beam_width 1 chose at its last extend.
std::size_t last_choice(const Beam& b, std::size_t end_symbol);

// An item's random stream (SplitMix64, Steele, Lea and Flood 2014): a 64-bit counter hashed at each
// draw, so a stream is one number, cheap to make per item and the same on every platform.
class SymbolStream {
public:
    explicit SymbolStream(std::uint64_t seed) : state_(seed) {}
    // Uniform in [0, 1), 53 random bits.
    double uniform();

private:
    std::uint64_t state_;
};

// Scratch space of a sampling step, kept across steps so a step allocates nothing.
struct SampleScratch {
    std::vector<double> weight;
    std::vector<std::size_t> order;
};

// Sampling (GenerateOptions::sample, temperature above 0): draws the next symbol of b's one
// hypothesis from lp's row for it, reshaped by temperature, top_k and top_p; returns it.
// `item` names it in the error for log-probabilities that hold no distribution (NaN).
template <class T>
std::size_t sample(Beam& b, const T* lp, std::size_t v_size, const GenerateOptions& o, bool last, SymbolStream& stream,
                   SampleScratch& scratch, std::size_t item);

// Each item's best hypotheses, at most beam_width, those that ended first.
Generated best_of(std::vector<Beam>& beams, std::size_t beam_width);

}  // namespace loom::layers::search
