#include "layers/search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "core/errors.hpp"
#include "core/value.hpp"

namespace loom::layers::search {

namespace {

std::string number(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

struct Candidate {
    double log_probability;
    std::size_t hypothesis, symbol;
};

void sort_best_first(std::vector<Hypothesis>& h) {
    std::stable_sort(h.begin(), h.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
}

}  // namespace

std::size_t symbols_kept(const GenerateOptions& o) {
    return o.keep_symbols ? std::numeric_limits<std::size_t>::max() : std::max<std::size_t>(1, o.context);
}

std::size_t forget_old(std::vector<std::size_t>& symbols, const GenerateOptions& o, bool now) {
    const std::size_t keep = symbols_kept(o);
    if (o.keep_symbols || symbols.size() <= keep || (!now && symbols.size() < 2 * keep)) return 0;
    const std::size_t dropped = symbols.size() - keep;
    symbols.erase(symbols.begin(), symbols.begin() + static_cast<std::ptrdiff_t>(dropped));
    return dropped;
}

template <class T>
void extend(Beam& b, const T* lp, std::size_t v_size, const GenerateOptions& o, bool last) {
    const std::size_t k = o.beam_width;
    // The best continuations over the item's live hypotheses: the top K for greedy, else the top
    // 2K, so that K live ones remain when some of the best end here.
    std::vector<Candidate> cands;
    cands.reserve(b.live.size() * v_size);
    for (std::size_t h = 0; h < b.live.size(); ++h)
        for (std::size_t v = 0; v < v_size; ++v)
            cands.push_back({b.live[h].log_probability + static_cast<double>(lp[b.live[h].row * v_size + v]), h, v});
    // min(|cands|, 2K) without computing 2K, which overflows for an absurd K.
    const std::size_t keep =
        k == 1 ? std::min(cands.size(), std::size_t{1}) : (k > cands.size() / 2 ? cands.size() : 2 * k);
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(),
                      [](const Candidate& a, const Candidate& c) { return a.log_probability > c.log_probability; });
    std::vector<Live> next;
    for (std::size_t c = 0; c < keep && next.size() < k; ++c) {
        const Live& parent = b.live[cands[c].hypothesis];
        const double emitted = static_cast<double>(parent.dropped + parent.symbols.size() + 1);
        if (cands[c].symbol == o.end_symbol) {
            if (c < k)
                b.ended.push_back({parent.symbols, cands[c].log_probability, cands[c].log_probability / emitted, true});
            continue;
        }
        Live child{parent.symbols, cands[c].log_probability, parent.row, parent.dropped};
        child.symbols.push_back(cands[c].symbol);
        child.dropped += forget_old(child.symbols, o);
        if (last) {  // max_length reached without the end symbol
            b.ended.push_back({child.symbols, child.log_probability, child.log_probability / emitted, false});
        } else {
            next.push_back(std::move(child));
        }
    }
    b.live = std::move(next);
    sort_best_first(b.ended);
    // Done when K hypotheses ended and none alive scores better so far (a hypothesis can only lose
    // log-probability; its length normalization may still change, so this is the usual heuristic
    // of beam search, as in CNTK's and fairseq's), or when nothing is alive.
    double best_live = -std::numeric_limits<double>::infinity();
    for (const Live& h : b.live)
        best_live = std::max(best_live, h.log_probability / static_cast<double>(h.dropped + h.symbols.size() + 1));
    b.done = b.live.empty() || (b.ended.size() >= k && b.ended[k - 1].score >= best_live);
}

void check_options(const GenerateOptions& o, std::size_t vocabulary, const std::string& who) {
    if (o.beam_width == 0) throw UserError(who + "beam_width must be at least 1");
    if (o.max_length == 0) throw UserError(who + "max_length must be at least 1");
    for (auto [what, id] : {std::pair{"start_symbol", o.start_symbol}, std::pair{"end_symbol", o.end_symbol}})
        if (id >= vocabulary && id != no_symbol)
            throw UserError(who + what + " " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(vocabulary) + " symbols");
    if (o.on_symbol && o.beam_width > 1)
        throw UserError(who + "on_symbol with beam_width " + std::to_string(o.beam_width) +
                        ": beam search knows its symbols only at its end; stream with beam_width 1");
    if (!o.keep_symbols && !o.on_symbol)
        throw UserError(who +
                        "keep_symbols false keeps only the last symbols of a hypothesis: give on_symbol, "
                        "which receives every symbol");
    if (o.context > 0 && o.beam_width > 1)
        throw UserError(who + "context " + std::to_string(o.context) + " with beam_width " +
                        std::to_string(o.beam_width) +
                        ": a context that starts over serves greedy decoding and sampling (beam_width 1)");
    if (!o.sample) {
        if (o.temperature != 1.0 || o.top_k != 0 || o.top_p != 1.0)
            throw UserError(who + "temperature " + number(o.temperature) + ", top_k " + std::to_string(o.top_k) +
                            " and top_p " + number(o.top_p) +
                            " shape sampling, but sample is false (greedy or beam search): set sample, or "
                            "leave them at 1, 0 and 1");
        return;
    }
    if (o.beam_width != 1)
        throw UserError(who + "sample with beam_width " + std::to_string(o.beam_width) +
                        ": sampling draws one hypothesis per item (beam_width 1); beam search is the other search");
    if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
        throw UserError(who + "temperature " + number(o.temperature) + " must be finite and at least 0 (0: greedy)");
    if (!(o.top_p > 0 && o.top_p <= 1))
        throw UserError(who + "top_p " + number(o.top_p) + " must be in (0, 1] (1: no nucleus)");
}

template void extend<float>(Beam&, const float*, std::size_t, const GenerateOptions&, bool);
template void extend<double>(Beam&, const double*, std::size_t, const GenerateOptions&, bool);

std::size_t last_choice(const Beam& b, std::size_t end_symbol) {
    // Width 1: the one hypothesis grew by the symbol, or ended (with the end symbol, or at max_length
    // with the symbol it emitted last).
    if (!b.live.empty()) return b.live.front().symbols.back();
    const Hypothesis& h = b.ended.back();
    return h.ended ? end_symbol : h.symbols.back();
}

double SymbolStream::uniform() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
}

namespace {

// Draws a symbol from one row of log-probabilities lp [v_size], reshaped as GenerateOptions says.
template <class T>
std::size_t draw(const T* lp, std::size_t v_size, const GenerateOptions& o, SymbolStream& stream, SampleScratch& s,
                 std::size_t item) {
    double best = -std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < v_size; ++v) {
        if (std::isnan(lp[v]))
            throw UserError("Generator::generate: the step's log-probabilities for item " + std::to_string(item) +
                            " hold nan at symbol " + std::to_string(v) + "; nothing can be drawn from them");
        best = std::max(best, static_cast<double>(lp[v]));
    }
    if (!std::isfinite(best))
        throw UserError("Generator::generate: the step's log-probabilities for item " + std::to_string(item) +
                        " are all " + std::to_string(best) + "; nothing can be drawn from them");
    // The tempered distribution unnormalized, its best symbol 1, so that no temperature overflows it.
    s.weight.resize(v_size);
    for (std::size_t v = 0; v < v_size; ++v)
        s.weight[v] = std::exp((static_cast<double>(lp[v]) - best) / o.temperature);
    // The symbols that may be drawn: the first `kept` of `ids` (null: every symbol, in id order).
    std::size_t kept = v_size;
    const std::size_t* ids = nullptr;
    const bool limit_k = o.top_k != 0 && o.top_k < v_size;
    if (limit_k || o.top_p < 1.0) {
        s.order.resize(v_size);
        std::iota(s.order.begin(), s.order.end(), std::size_t{0});
        kept = limit_k ? o.top_k : v_size;
        // Ranked by score (as the tempered weights, without their rounding to equal or to 0), equals by id.
        std::partial_sort(s.order.begin(), s.order.begin() + static_cast<std::ptrdiff_t>(kept), s.order.end(),
                          [lp](std::size_t a, std::size_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
        if (o.top_p < 1.0) {
            // The nucleus of the top k: a symbol stays while the mass ranked before it is below top_p.
            double total = 0, before = 0;
            for (std::size_t j = 0; j < kept; ++j) total += s.weight[s.order[j]];
            std::size_t n = 0;
            while (n < kept && before < o.top_p * total) before += s.weight[s.order[n++]];
            kept = n;
        }
        ids = s.order.data();
    }
    double total = 0;
    for (std::size_t j = 0; j < kept; ++j) total += s.weight[ids ? ids[j] : j];
    const double target = stream.uniform() * total;
    // The first symbol whose cumulative weight passes the target; the last one of positive weight
    // when rounding leaves the target at the very end.
    std::size_t chosen = v_size;
    double sum = 0;
    for (std::size_t j = 0; j < kept; ++j) {
        const std::size_t v = ids ? ids[j] : j;
        if (s.weight[v] == 0) continue;
        chosen = v;
        sum += s.weight[v];
        if (target < sum) break;
    }
    return chosen;
}

}  // namespace

template <class T>
std::size_t sample(Beam& b, const T* lp, std::size_t v_size, const GenerateOptions& o, bool last, SymbolStream& stream,
                   SampleScratch& scratch, std::size_t item) {
    Live& h = b.live.front();
    const T* row = lp + h.row * v_size;
    const std::size_t symbol = draw(row, v_size, o, stream, scratch, item);
    // The model's log-probability, not the reshaped distribution's (Hypothesis::log_probability).
    const double log_probability = h.log_probability + static_cast<double>(row[symbol]);
    const double emitted = static_cast<double>(h.dropped + h.symbols.size() + 1);
    const bool ends = symbol == o.end_symbol;
    if (!ends) h.symbols.push_back(symbol), h.dropped += forget_old(h.symbols, o);
    if (ends || last) {
        b.ended.push_back({std::move(h.symbols), log_probability, log_probability / emitted, ends});
        b.live.clear();
    } else {
        h.log_probability = log_probability;
    }
    b.done = b.live.empty();
    return symbol;
}

template std::size_t sample<float>(Beam&, const float*, std::size_t, const GenerateOptions&, bool, SymbolStream&,
                                   SampleScratch&, std::size_t);
template std::size_t sample<double>(Beam&, const double*, std::size_t, const GenerateOptions&, bool, SymbolStream&,
                                    SampleScratch&, std::size_t);

// Each item's best hypotheses, at most beam_width, those that ended first.
Generated best_of(std::vector<Beam>& beams, std::size_t beam_width) {
    Generated g;
    for (Beam& b : beams) {
        sort_best_first(b.ended);
        if (b.ended.size() > beam_width) b.ended.resize(beam_width);
        if (b.ended.empty() || !b.ended.front().ended) ++g.unfinished;
        g.items.push_back(std::move(b.ended));
    }
    return g;
}

}  // namespace loom::layers::search

namespace loom::layers {

Value Generated::best_sequences(std::size_t end_symbol) const {
    std::vector<std::vector<std::size_t>> ids;
    for (const auto& item : items) {
        if (item.empty()) throw UserError("Generated::best_sequences: an item has no hypothesis");
        ids.push_back(item.front().symbols);
        if (item.front().ended) ids.back().push_back(end_symbol);
        if (ids.back().empty()) ids.back().push_back(end_symbol);
    }
    return Value::index_sequences(ids);
}

}  // namespace loom::layers
