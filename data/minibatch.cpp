#include "data/minibatch.hpp"

#include "core/errors.hpp"

namespace loom {

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

Value make_ctf_minibatch(const CtfData& data, const std::string& stream, const std::vector<std::size_t>& sequences,
                         bool as_indices) {
    if (sequences.empty()) throw UserError("make_ctf_minibatch: empty batch of sequences from '" + data.source + "'");
    const std::size_t k = data.stream_index(stream);
    for (std::size_t s : sequences) {
        if (s >= data.size())
            throw UserError("make_ctf_minibatch: sequence " + std::to_string(s) + " out of range: '" + data.source +
                            "' has " + std::to_string(data.size()) + " sequences");
        // A graph sequence cannot be empty; say which sequence of the file lacks the stream.
        if (data.sequences[s].streams[k].length == 0)
            throw DataError(data.source + ":" + std::to_string(data.sequences[s].first_line) +
                            ": the sequence starting here has no sample of stream '" + stream + "'");
    }
    if (as_indices) {
        std::vector<std::vector<std::size_t>> ids;
        ids.reserve(sequences.size());
        for (std::size_t s : sequences) ids.push_back(data.indices(s, stream));
        return Value::index_sequences(ids);
    }
    std::vector<xt::xarray<float>> dense;
    dense.reserve(sequences.size());
    for (std::size_t s : sequences) dense.push_back(data.dense(s, stream));
    return Value::sequences(dense);
}

}  // namespace loom
