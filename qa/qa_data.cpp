#include "qa/qa_data.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "data/text.hpp"
#include "qa/overlap.hpp"
#include "text/tokenize.hpp"

namespace loom {

namespace {

using data_text::fail;

std::vector<std::string_view> split_tabs(std::string_view line) {
    std::vector<std::string_view> columns;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t tab = line.find('\t', begin);
        if (tab == std::string_view::npos) {
            columns.push_back(line.substr(begin));
            return columns;
        }
        columns.push_back(line.substr(begin, tab - begin));
        begin = tab + 1;
    }
}

std::string_view trim(std::string_view s) {
    const std::size_t begin = s.find_first_not_of(" \t");
    if (begin == std::string_view::npos) return {};
    const std::size_t end = s.find_last_not_of(" \t");
    return s.substr(begin, end - begin + 1);
}

std::vector<std::string> tokens_of(std::string_view column, bool lowercase) {
    std::vector<std::string> tokens = data_text::split_whitespace(column);
    if (lowercase)
        for (auto& t : tokens) t = data_text::ascii_lower(t);
    return tokens;
}

}  // namespace

QaData parse_qa_tsv(std::istream& in, const std::string& source, const QaReadOptions& options) {
    QaData data;
    data.source = source;
    // Keyed by the question's tokens as the model sees them, so spacing (a trailing space, a double
    // space) cannot split one question into two groups.
    std::unordered_map<std::string, std::size_t> group_of_question;
    data_text::LineReader lines(in, source, data_text::TextCheck::utf8);
    std::string line;
    while (lines.next(line)) {
        if (data_text::is_blank(line)) continue;
        const std::vector<std::string_view> columns = split_tabs(line);
        if (columns.size() != 3)
            lines.fail("expected 3 tab-separated columns (question, sentence, label), found " +
                       std::to_string(columns.size()) +
                       (columns.size() == 1 && line.find(' ') != std::string::npos
                            ? " (are the columns separated by spaces instead of tabs?)"
                            : ""));
        const std::string_view label = trim(columns[2]);
        if (label.empty()) lines.fail("the label (third column) is empty; it must be 0 or 1");
        if (label != "0" && label != "1") lines.fail("label must be 0 or 1, found " + quoted_field(label));
        QaPair pair;
        pair.question = tokens_of(columns[0], options.lowercase);
        pair.answer = tokens_of(columns[1], options.lowercase);
        if (pair.question.empty()) lines.fail("empty question (first column has no tokens)");
        // An empty sentence would become a zero-length sequence that no model can score.
        if (pair.answer.empty()) lines.fail("empty answer sentence (second column has no tokens)");
        pair.label = label == "1" ? 1 : 0;
        pair.line = lines.line_number();
        std::string key;
        for (const auto& token : pair.question) (key += token) += ' ';
        const auto [it, inserted] = group_of_question.try_emplace(std::move(key), data.num_groups);
        if (inserted) ++data.num_groups;
        pair.group = it->second;
        data.pairs.push_back(std::move(pair));
    }
    // No caller wants zero pairs: training on them does nothing and metrics over them are undefined.
    if (data.pairs.empty())
        throw DataError("'" + source + "' holds no question/answer pairs (" +
                        (lines.line_number() == 0 ? "the file is empty" : "only blank lines") + ")");
    return data;
}

QaData read_qa_tsv(const std::string& path, const QaReadOptions& options) {
    std::ifstream in = data_text::open_for_reading(path);
    return parse_qa_tsv(in, path, options);
}

std::size_t QaData::num_positives() const {
    std::size_t n = 0;
    for (const auto& p : pairs) n += static_cast<std::size_t>(p.label);
    return n;
}

std::vector<std::size_t> QaData::groups() const {
    std::vector<std::size_t> out;
    out.reserve(pairs.size());
    for (const auto& p : pairs) out.push_back(p.group);
    return out;
}

std::vector<int> QaData::labels() const {
    std::vector<int> out;
    out.reserve(pairs.size());
    for (const auto& p : pairs) out.push_back(p.label);
    return out;
}

RankingMetrics QaData::rank(const std::vector<double>& scores) const {
    return ranking_metrics(groups(), scores, labels());
}

std::vector<ItemLengths> QaData::lengths() const {
    std::vector<ItemLengths> out;
    out.reserve(pairs.size());
    for (const auto& p : pairs) out.push_back({p.question.size(), p.answer.size()});
    return out;
}

std::vector<std::vector<std::string>> QaData::token_lists() const {
    std::vector<std::vector<std::string>> lists;
    std::vector<char> question_taken(num_groups, 0);
    for (const auto& p : pairs) {
        if (!question_taken[p.group]) {
            question_taken[p.group] = 1;
            lists.push_back(p.question);
        }
        lists.push_back(p.answer);
    }
    return lists;
}

std::vector<std::vector<std::size_t>> QaData::by_question(bool mixed_only) const {
    std::vector<std::vector<std::size_t>> groups(num_groups);
    std::vector<std::size_t> positives(num_groups, 0), order;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        if (groups[pairs[i].group].empty()) order.push_back(pairs[i].group);
        groups[pairs[i].group].push_back(i);
        positives[pairs[i].group] += pairs[i].label != 0;
    }
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t g : order)
        if (!mixed_only || (positives[g] > 0 && positives[g] < groups[g].size())) out.push_back(std::move(groups[g]));
    return out;
}

QaData QaData::hold_out(std::size_t every, const std::string& held_out_source) {
    if (every < 2) throw UserError("QaData::hold_out: every " + std::to_string(every) + " would hold out everything");
    QaData held;
    held.source = held_out_source, held.num_groups = num_groups;
    std::vector<QaPair> kept;
    for (auto& p : pairs) (p.group % every == every - 1 ? held.pairs : kept).push_back(std::move(p));
    pairs = std::move(kept);
    return held;
}

namespace {

// Whether `columns` are the names of read_qa_text's columns (any case, spaces around them allowed):
// "question", "sentence" or "answer", and "label" unless there are only two columns.
bool is_header(const std::vector<std::string_view>& columns) {
    if (columns.size() != 2 && columns.size() != 3) return false;
    auto name = [&](std::size_t k) { return data_text::ascii_lower(trim(columns[k])); };
    const std::string second = name(1);
    return name(0) == "question" && (second == "sentence" || second == "answer") &&
           (columns.size() == 2 || name(2) == "label");
}

}  // namespace

QaData read_qa_text(const std::string& path, bool labels_optional) {
    std::ifstream in = data_text::open_for_reading(path);
    return parse_qa_text(in, path, labels_optional);
}

QaData parse_qa_text(std::istream& in, const std::string& path, bool labels_optional) {
    QaData data;
    data.source = path;
    std::unordered_map<std::string, std::size_t> group_of;
    data_text::LineReader lines(in, path, data_text::TextCheck::utf8);
    bool first = true;
    std::string line;
    while (lines.next(line)) {
        if (data_text::is_blank(line)) continue;
        const std::vector<std::string_view> cols = split_tabs(line);
        // Only the first line may be a header, and only by its column names: a question that is
        // the word "Question" is data.
        if (std::exchange(first, false) && is_header(cols)) continue;
        if (cols.size() != 3 && !(labels_optional && cols.size() == 2))
            lines.fail("expected question<TAB>sentence<TAB>label, found " + std::to_string(cols.size()) +
                       " tab-separated columns" +
                       (cols.size() == 1 && line.find(' ') != std::string::npos
                            ? " (are the columns separated by spaces instead of tabs?)"
                            : ""));
        const bool labelled = cols.size() == 3;
        const std::string_view label = labelled ? trim(cols[2]) : std::string_view();
        if (labelled && label.empty()) lines.fail("the label (third column) is empty; it must be 0 or 1");
        if (labelled && label != "0" && label != "1") lines.fail("label " + quoted_field(label) + " is not 0 or 1");
        QaPair p{tokenize_english(cols[0]), tokenize_english(cols[1]), labelled && label == "1", 0,
                 lines.line_number()};
        if (p.question.empty() || p.answer.empty())
            lines.fail(std::string(p.question.empty() ? "question" : "sentence") + " is empty");
        // Keyed by the question's tokens, as in parse_qa_tsv: spacing cannot split a group.
        std::string key;
        for (const auto& token : p.question) (key += data_text::ascii_lower(token)) += ' ';
        p.group = group_of.emplace(key, group_of.size()).first->second;
        data.pairs.push_back(std::move(p));
    }
    if (data.pairs.empty()) throw DataError(path + ": no question/sentence pairs");
    data.num_groups = group_of.size();
    return data;
}

QaMinibatch make_qa_minibatch(const QaData& data, const Vocabulary& vocab, const std::vector<std::size_t>& items) {
    if (items.empty()) throw UserError("make_qa_minibatch: empty batch of items from '" + data.source + "'");
    std::vector<std::vector<std::size_t>> questions, answers;
    questions.reserve(items.size());
    answers.reserve(items.size());
    xt::xarray<float> labels = xt::zeros<float>({items.size(), std::size_t{1}});
    for (std::size_t n = 0; n < items.size(); ++n) {
        if (items[n] >= data.pairs.size())
            throw UserError("make_qa_minibatch: item " + std::to_string(items[n]) + " out of range: '" + data.source +
                            "' has " + std::to_string(data.pairs.size()) + " pairs");
        const QaPair& pair = data.pairs[items[n]];
        questions.push_back(vocab.ids(pair.question));
        answers.push_back(vocab.ids(pair.answer));
        labels(n, 0) = static_cast<float>(pair.label);
    }
    QaMinibatch batch;
    batch.items = items;
    batch.questions = Value::index_sequences(questions);
    batch.answers = Value::index_sequences(answers);
    batch.labels = Value::batch(labels);
    return batch;
}

QaMinibatch make_qa_minibatch(const QaData& data, const Vocabulary& vocab, const std::vector<std::size_t>& items,
                              const IdfTable& idf) {
    QaMinibatch batch = make_qa_minibatch(data, vocab, items);
    std::vector<xt::xarray<float>> questions, answers;
    questions.reserve(items.size());
    answers.reserve(items.size());
    const auto rows = [](std::vector<float> numbers, std::size_t tokens) {
        xt::xarray<float> out = xt::zeros<float>({tokens, match_feature_count});
        std::copy(numbers.begin(), numbers.end(), out.begin());
        return out;
    };
    for (std::size_t item : items) {
        const QaPair& pair = data.pairs[item];
        questions.push_back(rows(match_features(pair.question, pair.answer, idf), pair.question.size()));
        answers.push_back(rows(match_features(pair.answer, pair.question, idf), pair.answer.size()));
    }
    batch.question_features = Value::sequences(questions);
    batch.answer_features = Value::sequences(answers);
    return batch;
}

}  // namespace loom
