#include "text/tokenize.hpp"

#include <array>

#include "core/utf8.hpp"

namespace loom {

namespace {

bool is_alnum(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c <= ' ' || c == 0x7f; }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Curly quotes and dashes as their ASCII forms, so "it’s" splits as "it's" does; Unicode spaces
// (a no-break or zero-width space pasted from a web page) as a space, so they separate words.
std::string normalize_punctuation(std::string_view text) {
    static const std::array<std::pair<std::string_view, char>, 6> map{
        {{"\u2018", '\''}, {"\u2019", '\''}, {"\u201c", '"'}, {"\u201d", '"'}, {"\u2013", '-'}, {"\u2014", '-'}}};
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        if (const std::size_t space = unicode_space_length(text.substr(i))) {
            out += ' ';
            i += space;
            continue;
        }
        bool replaced = false;
        for (const auto& [from, to] : map)
            if (text.substr(i, from.size()) == from) {
                out += to;
                i += from.size();
                replaced = true;
                break;
            }
        if (!replaced) out += lower(text[i++]);
    }
    return out;
}

// The clitic starting at s[i] (an apostrophe), if one is there and ends a word: its length, else 0.
std::size_t clitic_at(const std::string& s, std::size_t i) {
    for (std::string_view c : {"'s", "'re", "'ve", "'ll", "'d", "'m"})
        if (s.compare(i, c.size(), c) == 0 && (i + c.size() == s.size() || !is_alnum(s[i + c.size()]))) return c.size();
    return 0;
}

// A dotted abbreviation of single letters starting at s[i] ("u.s.", "e.g."): its length, else 0.
std::size_t abbreviation_at(const std::string& s, std::size_t i) {
    std::size_t j = i, letters = 0;
    while (j + 1 < s.size() && is_alnum(s[j]) && !is_digit(s[j]) && s[j + 1] == '.' && (j == i || s[j - 1] == '.')) {
        j += 2;
        ++letters;
    }
    return letters >= 2 && (j == s.size() || !is_alnum(s[j])) ? j - i : 0;
}

}  // namespace

std::vector<std::string> tokenize_english(std::string_view raw) {
    const std::string s = normalize_punctuation(raw);
    std::vector<std::string> tokens;
    std::size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = s[i];
        if (is_space(c)) {
            ++i;
        } else if (const std::size_t n = abbreviation_at(s, i)) {
            tokens.push_back(s.substr(i, n));
            i += n;
        } else if (is_alnum(c)) {
            std::size_t j = i + 1;
            for (; j < s.size(); ++j) {
                if (is_alnum(s[j])) continue;
                const bool joined = j + 1 < s.size() && is_alnum(s[j + 1]);
                const bool in_number =
                    (s[j] == ',' || s[j] == '.') && is_digit(s[j - 1]) && joined && is_digit(s[j + 1]);
                const bool inner =
                    (s[j] == '-' || (s[j] == '\'' && !clitic_at(s, j) && s.compare(j, 2, "'t") != 0)) && joined;
                if (!in_number && !inner) break;
            }
            // "don't": the word ends before the n of n't.
            if (s.compare(j, 2, "'t") == 0 && s[j - 1] == 'n' && (j + 2 == s.size() || !is_alnum(s[j + 2]))) {
                if (j - 1 > i) tokens.push_back(s.substr(i, j - 1 - i));
                tokens.push_back("n't");
                i = j + 2;
                continue;
            }
            tokens.push_back(s.substr(i, j - i));
            i = j;
        } else if (const std::size_t clitic = c == '\'' ? clitic_at(s, i) : 0) {
            tokens.push_back(s.substr(i, clitic));
            i += clitic;
        } else {
            std::size_t j = i + 1;
            while (j < s.size() && s[j] == s[i]) ++j;
            tokens.push_back(s.substr(i, j - i));
            i = j;
        }
    }
    return tokens;
}

}  // namespace loom
