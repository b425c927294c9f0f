#pragma once
/// \file
/// Reader for question / answer-sentence / label files in the SelQA answer-sentence-selection
/// layout: no header, one pair per line, three tab-separated columns
///
///   question tokens<TAB>sentence tokens<TAB>label (0 or 1)
///
/// tokens separated by spaces. Rows of one question are contiguous; pairs are grouped by the
/// question's tokens (after lowercasing, when on), so a question whose block appears twice in a
/// file (SelQA's dev split has one) is one group, and so is one written once with a trailing space.
/// The file must be UTF-8 (a leading byte-order mark is dropped); blank lines are skipped. Malformed
/// rows, NUL bytes and invalid UTF-8 throw DataError "file:line: reason"; so does a file without a
/// single pair. A minibatch of pairs becomes the Values a model is fed with (make_qa_minibatch).
#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "core/value.hpp"
#include "data/batching.hpp"
#include "qa/metrics.hpp"
#include "text/vocabulary.hpp"
#include "text/words.hpp"

namespace loom {

/// One line of a QA file: a question, a candidate answer sentence and whether it answers it.
struct QaPair {
    std::vector<std::string> question;  ///< the question's tokens
    std::vector<std::string> answer;    ///< the candidate sentence's tokens
    int label = 0;                      ///< 1: the sentence answers the question
    std::size_t group = 0;              ///< question group id, 0..num_groups-1 in order of first appearance
    std::size_t line = 0;               ///< 1-based line in the file
};

/// How read_qa_tsv treats the text.
struct QaReadOptions {
    bool lowercase = true;  ///< ASCII lowercasing of both columns
};

/// A file of question/answer pairs, grouped by question.
struct QaData {
    std::string source;          ///< the file's name, for messages
    std::vector<QaPair> pairs;   ///< in file order
    std::size_t num_groups = 0;  ///< the number of distinct questions

    /// \return the number of pairs labelled 1.
    std::size_t num_positives() const;
    /// @{
    /// Parallel vectors, in the form the ranking metrics and the Batcher take.
    std::vector<std::size_t> groups() const;
    std::vector<int> labels() const;
    std::vector<ItemLengths> lengths() const;
    /// @}
    /// MAP and MRR of `scores` (one per pair, in order) over this data's questions: ranking_metrics.
    RankingMetrics rank(const std::vector<double>& scores) const;
    /// Token lists for building a vocabulary: each group's question once (so a question is not
    /// counted once per candidate) and every answer sentence.
    std::vector<std::vector<std::string>> token_lists() const;
    /// Each question's pairs (indices into `pairs`), questions in order of first appearance; with
    /// `mixed_only`, only questions with both a true and a wrong sentence (what a ranking loss, which
    /// compares a question's candidates, can learn from).
    std::vector<std::vector<std::size_t>> by_question(bool mixed_only = false) const;
    /// Moves every k-th question (group % every == every - 1) with all its pairs out of this data
    /// into the returned data (same group ids, source `held_out_source`): held-out questions, never
    /// a question split between the two. Throws UserError for every < 2.
    QaData hold_out(std::size_t every, const std::string& held_out_source = "held-out questions");
};

/// Reads a tokenised QA file (SelQA's TSV: question, sentence, label per line, tokens
/// separated by spaces). Throws DataError "file:line: reason".
QaData read_qa_tsv(const std::string& path, const QaReadOptions& options = {});
/// Same, from any stream; `source` names it in error messages.
QaData parse_qa_tsv(std::istream& in, const std::string& source, const QaReadOptions& options = {});

/// Raw text: question, a tab, sentence (then a tab and a label) per line, both columns through
/// tokenize_english (so SelQA's pre-tokenised files read the same); rows of one question need not be contiguous
/// (grouped by the question's lowercased text). The first line is a header, and skipped, when its columns are the
/// column names (any case): question, sentence or answer, and label unless there are two; a row whose question is the
/// word "Question" is data. Labels are required unless `labels_optional` (pairs to score). UTF-8 only, as parse_qa_tsv:
/// a byte-order mark is dropped; NUL bytes, UTF-16 and invalid UTF-8 are refused at their line and column. Throws
/// DataError "file:line: reason".
QaData read_qa_text(const std::string& path, bool labels_optional = false);
/// Same, from any stream; `source` names it in error messages.
QaData parse_qa_text(std::istream& in, const std::string& source, bool labels_optional = false);

/// The inputs of a question/answer model for one minibatch of a QaData, ready to bind.
struct QaMinibatch {
    std::vector<std::size_t> items;  ///< indices into QaData::pairs, in batch order
    Value questions;                 ///< index sequences, sample shape [1]
    Value answers;                   ///< index sequences, sample shape [1]
    Value labels;                    ///< batch [N, 1] of 0 / 1
    /// With an IdfTable only (else empty): each question's match_features against its answer, a
    /// sequence of [match_feature_count] on the question's length.
    Value question_features;
    /// With an IdfTable only (else empty): each answer's match_features against its question, a
    /// sequence of [match_feature_count] on the answer's length.
    Value answer_features;
};

/// The minibatch of `items`: their questions and answers as token ids through `vocab` (unknown
/// words as its unknown id), and their labels. Throws UserError for an empty batch or an item index
/// out of range.
QaMinibatch make_qa_minibatch(const QaData& data, const Vocabulary& vocab, const std::vector<std::size_t>& items);
/// Same, with each side's match_features through `idf` (question_features, answer_features): all of a
/// match-feature model's inputs in one call, e.g. for a Python training loop, which would be slow to
/// build them token by token.
QaMinibatch make_qa_minibatch(const QaData& data, const Vocabulary& vocab, const std::vector<std::size_t>& items,
                              const IdfTable& idf);

}  // namespace loom
