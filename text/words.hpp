#pragma once
/// \file
/// Statistics of English words that any text feature can use: which words carry no content
/// (stopwords), how rare a word is in a collection (inverse document frequency), and a crude stemmer
/// that lets two inflections of one word meet.
#include <map>
#include <string>
#include <vector>

namespace loom {

/// English function words; a token without a letter or digit counts as one too.
bool is_stopword(const std::string& token);

/// Document frequencies of a collection of token lists (each list one document).
struct IdfTable {
    std::map<std::string, double> document_frequency;  ///< per word, the documents it occurs in
    double documents = 0;                              ///< N, the documents counted
    /// \return the table of `documents`, each a list of tokens (a word counts once per document).
    static IdfTable fit(const std::vector<std::vector<std::string>>& documents);
    double operator()(const std::string& word) const;  ///< log(N / df); an unseen word: log(N + 1)
    /// @{
    /// "documents N" then one "word, a tab, df" line per word, to keep inside a model file; parse()
    /// reads it back and throws DataError naming `source` and the line for anything else.
    std::string to_text() const;
    static IdfTable parse(const std::string& text, const std::string& source);
    /// @}
};

/// A crude English suffix stripper, so that "wrote"/"written" stay apart but "games"/"game",
/// "founded"/"found", "studies"/"study" meet: lowercase ASCII words of 4+ letters lose one of
/// -ies -es -s -ing -ed -ly (a doubled final consonant after -ing/-ed too) and a final 'e'.
/// Anything else (numbers, short words, non-ASCII) comes back unchanged.
std::string crude_stem(const std::string& word);

}  // namespace loom
