// The QA benches' batches (qa_train_bench, qa_score_bench): pairs of token ids with labels, read
// from a file that bench/compare writes from the PyTorch peer's own generator, or made by the QA
// sample's generator; and the process's memory figures from /proc. Header-only.
//
// File format: a line "loom-qa-batches 1", then per batch a line "batch <pairs>" followed by one
// line per pair: "<label> <question ids...> | <answer ids...>".
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"

namespace loom::bench {

struct Batch {
    std::vector<std::vector<std::size_t>> questions, answers;
    std::vector<float> labels;
    std::size_t real_tokens() const {
        std::size_t n = 0;
        for (const auto& q : questions) n += q.size();
        for (const auto& a : answers) n += a.size();
        return n;
    }
    // Tokens when each side is padded to its longest sequence (what a padded engine computes on).
    std::size_t padded_tokens() const {
        auto longest = [](const auto& v) {
            std::size_t m = 0;
            for (const auto& s : v) m = std::max(m, s.size());
            return m;
        };
        return questions.size() * (longest(questions) + longest(answers));
    }
};

inline std::vector<Batch> read_batches(const std::string& path, std::size_t vocab) {
    std::ifstream in(path);
    if (!in) throw UserError("qa_train_bench: cannot open --batches-from file '" + path + "'");
    std::string line;
    std::size_t line_no = 0;
    auto fail = [&](const std::string& why) { throw DataError(path + ":" + std::to_string(line_no) + ": " + why); };
    if (!std::getline(in, line) || line.rfind("loom-qa-batches 1", 0) != 0) {
        line_no = 1;
        fail("expected the header 'loom-qa-batches 1' (write the file with bench/compare --dump-batches)");
    }
    ++line_no;
    std::vector<Batch> batches;
    std::size_t expected = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        std::istringstream ls(line);
        if (line.rfind("batch ", 0) == 0) {
            if (!batches.empty() && batches.back().labels.size() != expected) fail("previous batch is short");
            std::string word;
            ls >> word >> expected;
            if (!ls || expected == 0) fail("expected 'batch <pairs>'");
            batches.emplace_back();
            continue;
        }
        if (batches.empty()) fail("a pair before the first 'batch' line");
        Batch& b = batches.back();
        float label = 0;
        ls >> label;
        if (!ls) fail("expected '<label> <question ids> | <answer ids>'");
        std::vector<std::size_t> q, a;
        bool in_answer = false;
        std::string tok;
        while (ls >> tok) {
            if (tok == "|") {
                in_answer = true;
                continue;
            }
            char* end = nullptr;
            const unsigned long id = std::strtoul(tok.c_str(), &end, 10);
            if (*end != '\0' || id >= vocab)
                fail("token '" + tok + "' is not an id below --vocab " + std::to_string(vocab));
            (in_answer ? a : q).push_back(id);
        }
        if (q.empty() || a.empty()) fail("a pair needs a question and an answer separated by ' | '");
        b.questions.push_back(std::move(q));
        b.answers.push_back(std::move(a));
        b.labels.push_back(label);
    }
    if (!batches.empty() && batches.back().labels.size() != expected) fail("last batch is short");
    return batches;
}

// The sample's generator: questions with 1 true + 1 wrong answer each, so every batch is half true.
inline std::vector<Batch> make_batches(std::size_t count, std::size_t batch, std::size_t vocab, std::uint64_t seed) {
    SyntheticQaOptions s;
    s.questions = count * batch / 2;
    s.candidates = 2;
    s.vocab = vocab;
    s.seed = seed;
    s.topic_seed = seed;
    const QaData data = make_synthetic_qa(s);
    std::vector<Batch> batches(count);
    for (std::size_t i = 0; i < count * (batch / 2) * 2; ++i) {
        Batch& b = batches[i / (batch / 2 * 2)];
        const QaPair& p = data.pairs[i];
        b.questions.push_back(bench::word_ids(p.question));
        b.answers.push_back(bench::word_ids(p.answer));
        b.labels.push_back(float(p.label));
    }
    return batches;
}

// VmRSS / VmHWM of this process in MiB (0 when /proc is not there): where the peak comes from.
inline double proc_status_mib(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string k = std::string(key) + ":";
    while (std::getline(in, line))
        if (line.rfind(k, 0) == 0) return std::strtod(line.c_str() + k.size(), nullptr) / 1024.0;
    return 0.0;
}

}  // namespace loom::bench
