#include "training.hpp"

namespace qa {

using namespace loom;

namespace {

// One training item: a question with a true answer and (for the hinge loss) a wrong one.
struct Item {
    std::size_t question_pair, wrong_pair;
};

std::vector<Item> make_items(const QaData& data, const std::string& loss, int hard_negatives) {
    std::vector<Item> items;
    if (loss == "mse") {
        for (std::size_t i = 0; i < data.pairs.size(); ++i) items.push_back({i, i});
        return items;
    }
    std::vector<std::vector<std::size_t>> negatives(data.num_groups);
    for (std::size_t i = 0; i < data.pairs.size(); ++i)
        if (!data.pairs[i].label) negatives[data.pairs[i].group].push_back(i);
    std::vector<double> overlap;
    if (hard_negatives >= 0)
        for (const auto& p : data.pairs) overlap.push_back(word_overlap_score(p.question, p.answer));
    for (std::size_t i = 0; i < data.pairs.size(); ++i) {
        const auto& neg = negatives[data.pairs[i].group];
        if (!data.pairs[i].label || neg.empty()) continue;
        // Every wrong answer of the question is paired with each of its true ones, so an epoch sees
        // every candidate.
        for (std::size_t j : neg)
            if (hard_negatives < 0 || overlap[j] >= overlap[i] - hard_negatives) items.push_back({i, j});
    }
    return items;
}

}  // namespace

std::unique_ptr<Trainer> make_trainer(const TripletModel& model, const TrainOptions& o) {
    LearnerOptions lo;
    lo.gradient_clipping_norm = o.clip;
    // Embedding rows a minibatch does not use get no update ("lazy Adam"), as sparse embedding
    // optimizers do: exact Adam would sweep all 2 x vocab x embed weights every step.
    lo.lazy_sparse_rows = true;
    std::vector<Parameter> trained;
    for (const auto& p : model.parameters())
        if (!(o.freeze_embedding && p.name().find(".embedding") != std::string::npos)) trained.push_back(p);
    const bool hinge = o.loss == "hinge";
    return std::make_unique<Trainer>(hinge ? model.hinge_loss : model.squared_loss,
                                     hinge ? model.pair_correct : model.pointwise_correct,
                                     adam(trained, o.lr, 0.9, 0.999, 1e-8, lo));
}

void train_epochs(const TripletModel& model, Trainer& trainer, const QaData& data, const EncodedPairs& pairs,
                  const TrainOptions& o, const TrainingPosition& start,
                  const std::function<void(std::size_t, const DataPosition&)>& after_epoch) {
    const bool hinge = o.loss == "hinge";
    const bool flags = model.options.overlap_inputs;
    const auto items = make_items(data, o.loss, o.hard_negatives);
    if (items.empty())
        throw UserError("qa_similarity: no training items in " + data.source +
                        " (the hinge loss needs questions with a true and a wrong answer)");
    std::vector<ItemLengths> lengths;
    for (const auto& it : items)
        lengths.push_back({pairs.questions[it.question_pair].size(), pairs.answers[it.question_pair].size()});
    BatchingOptions bo;
    bo.batch_size = o.batch;
    bo.seed = o.seed;
    Batcher batcher(lengths, bo);
    batcher.set_position({start.epoch, start.minibatch});

    ProgressOptions po;
    po.tag = o.tag;
    po.num_epochs = o.epochs;
    po.first_epoch = start.epoch + 1;
    po.epoch_size = items.size();
    ProgressPrinter progress(po);

    for (std::size_t epoch = start.epoch; epoch < o.epochs; ++epoch) {
        while (batcher.position().epoch == epoch) {
            const auto batch = batcher.next();
            std::vector<std::vector<std::size_t>> q, a, w;
            std::vector<std::vector<float>> q_flags, a_flags, q_negative_flags, w_flags;
            xt::xarray<float> labels = xt::zeros<float>({batch.size(), std::size_t{1}});
            for (std::size_t k = 0; k < batch.size(); ++k) {
                const Item& it = items[batch[k]];
                q.push_back(pairs.questions[it.question_pair]);
                a.push_back(pairs.answers[it.question_pair]);
                w.push_back(pairs.answers[it.wrong_pair]);
                labels(k, 0) = static_cast<float>(data.pairs[it.question_pair].label);
                if (flags) {
                    const QaPair &p = data.pairs[it.question_pair], &wrong = data.pairs[it.wrong_pair];
                    q_flags.push_back(pairs.question_flags[it.question_pair]);
                    a_flags.push_back(pairs.answer_flags[it.question_pair]);
                    q_negative_flags.push_back(overlap_flags(p.question, wrong.answer));
                    w_flags.push_back(overlap_flags(wrong.answer, p.question));
                }
            }
            Bindings in{{model.question, Value::index_sequences(q)}, {model.answer, Value::index_sequences(a)}};
            if (flags) {
                in.emplace(model.question_flags, flag_sequences(q_flags));
                in.emplace(model.answer_flags, flag_sequences(a_flags));
            }
            if (hinge) {
                in.emplace(model.negative, Value::index_sequences(w));
                if (flags) {
                    in.emplace(model.question_negative_flags, flag_sequences(q_negative_flags));
                    in.emplace(model.negative_flags, flag_sequences(w_flags));
                }
            } else {
                in.emplace(model.label, Value::batch(labels));
            }
            const TrainingScope training;  // dropout is active only here
            progress.update(trainer.train_minibatch(in));
        }
        progress.end_epoch();
        after_epoch(epoch, batcher.position());
    }
}

std::vector<xt::xarray<float>> parameter_values(const TripletModel& model) {
    std::vector<xt::xarray<float>> values;
    for (const auto& p : model.parameters()) values.push_back(p.value());
    return values;
}

void set_parameter_values(const TripletModel& model, const std::vector<xt::xarray<float>>& values) {
    const auto ps = model.parameters();
    for (std::size_t i = 0; i < ps.size(); ++i) ps[i].set_value(values[i]);
}

}  // namespace qa
