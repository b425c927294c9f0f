#include "text/words.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <set>
#include <sstream>
#include <string_view>

#include "data/text.hpp"

namespace loom {

bool is_stopword(const std::string& token) {
    static const std::set<std::string> words = [] {
        std::istringstream list(
            "a about above after again against all also am an and any are as at be because been before being "
            "below between both but by can could did do does doing down during each few for from further had has "
            "have having he her here hers herself him himself his how i if in into is it its itself just me more "
            "most my myself no nor not now of off on once only or other our ours out over own same she should so "
            "some such than that the their theirs them then there these they this those through to too under "
            "until up very was we were what when where which while who whom whose why will with would you your "
            "yours 's n't 're 've 'll 'd 'm one many much may might must shall yet via");
        return std::set<std::string>(std::istream_iterator<std::string>(list), {});
    }();
    const bool has_alnum = std::any_of(token.begin(), token.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x80 || std::isalnum(static_cast<unsigned char>(c));
    });
    return !has_alnum || words.count(data_text::ascii_lower(token));
}

IdfTable IdfTable::fit(const std::vector<std::vector<std::string>>& lists) {
    IdfTable idf;
    for (const auto& tokens : lists)
        for (const auto& w : std::set<std::string>(tokens.begin(), tokens.end())) ++idf.document_frequency[w];
    idf.documents = static_cast<double>(lists.size());
    return idf;
}

double IdfTable::operator()(const std::string& word) const {
    const auto it = document_frequency.find(word);
    return it == document_frequency.end() ? std::log(documents + 1) : std::log(documents / it->second);
}

std::string IdfTable::to_text() const {
    std::ostringstream out;
    out.precision(17);
    out << "documents " << documents << "\n";
    for (const auto& [word, df] : document_frequency) out << word << "\t" << df << "\n";
    return out.str();
}

namespace {

// A count as to_text() writes it: a whole number from `min` to 2^53 (the counts a double holds
// exactly), the whole of `text`; NaN when it is not one (inf, nan, 1e308, 2.5, "3 ").
double count_of(std::string_view text, double min) {
    double v = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
    const bool whole = error == std::errc() && end == text.data() + text.size() && v == std::floor(v);
    return whole && v >= min && v <= 9007199254740992.0 ? v : std::nan("");
}

}  // namespace

IdfTable IdfTable::parse(const std::string& text, const std::string& source) {
    std::istringstream in(text);
    IdfTable idf;
    std::string line;
    std::size_t number = 1;
    if (!std::getline(in, line) || line.rfind("documents ", 0) != 0 ||
        std::isnan(idf.documents = count_of(std::string_view(line).substr(10), 1)))
        data_text::fail(source, number, "expected 'documents N' with N a whole number from 1 to 2^53");
    while (std::getline(in, line)) {
        ++number;
        const std::size_t tab = line.rfind('\t');
        const double df = tab == std::string::npos ? std::nan("") : count_of(std::string_view(line).substr(tab + 1), 1);
        if (!(df <= idf.documents) || !idf.document_frequency.emplace(line.substr(0, tab), df).second)
            data_text::fail(source, number,
                            "expected word<TAB>document frequency (a whole number from 1 to the documents), each "
                            "word once");
    }
    return idf;
}

// Words ending in -ss ("glass", "process") are not plurals and stay whole; a stem keeps 3+ letters.
std::string crude_stem(const std::string& word) {
    const bool letters = std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (!letters || word.size() < 4 || word.ends_with("ss")) return word;
    std::string r = word;
    for (const std::string_view suffix : {"ies", "es", "ing", "ed", "ly", "s"}) {
        if (!word.ends_with(suffix) || word.size() - suffix.size() < 3) continue;
        r = word.substr(0, word.size() - suffix.size()) + (suffix == "ies" ? "y" : "");
        // "stopped" -> "stop", but "filled" stays "fill"
        const bool verb = suffix == "ing" || suffix == "ed";
        if (verb && r.size() >= 4 && r.back() == r[r.size() - 2] && r.back() != 'l' && r.back() != 's') r.pop_back();
        break;
    }
    if (r.size() >= 4 && r.back() == 'e') r.pop_back();  // "game" and "games" alike
    return r;
}

}  // namespace loom
