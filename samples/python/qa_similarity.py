"""qa_similarity.py: the QA sample's model (samples/qa_similarity) trained from Python with fit.

    python3 qa_similarity.py                                   built-in synthetic data, a short run
    python3 qa_similarity.py --train T.tsv --eval D.tsv        question<TAB>sentence<TAB>label files

Per side: Embedding -> dropout 0.5 -> splice with the 6 match features of each token ->
BiRecurrence(LSTM, LSTM) -> Dense -> softmax attention over the steps (a log-sum-exp recurrence) ->
the cosine of the two sides. Listwise loss over one question's candidates (a softmax of 10 cosine),
Adam 1e-3 with clipping 5 and lazy embedding rows; every 10th question held out, evaluated twice an
epoch, and the mean of the parameters at those evaluations kept. The final score adds
lambda * idf word overlap where that beats the network on the held-out questions. The parameters are
made with the C++ sample's names, shapes, initializers and order, so the same seed starts from the
same weights and, with the same data, trains to the same MAP.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import loom as C

LISTWISE_SCALE = 10.0
FEATURES = C.qa.match_feature_count


def synthetic(questions: int, seed: int) -> C.qa.QaData:
    """The built-in data: each wrong answer repeats two of the question's words, the true one none but
    it shares the question's topic, so counting shared words is misled (qa/synthetic_qa.hpp)."""
    return C.qa.make_synthetic_qa(questions=questions, vocab=2000, topic_words=20, copy=0, distractor_copy=2,
                                  seed=seed)


def attention(embedded, w):
    """sum_t weight_t * embedded_t with weights exp(z_t - log sum_s exp(z_s)), z = embedded w, the
    normalizer a log_add_exp recurrence over the steps (layers::sequence_softmax_attention)."""
    scores = C.times(embedded, w)
    p = C.placeholder(scores.shape, name="log_cumsum_exp")
    previous = C.element_select(C.sequence.is_first(scores), C.constant(-1e30), C.past_value(p))
    log_cumsum_exp = C.log_add_exp(scores, previous)
    log_cumsum_exp.replace_placeholders({p: log_cumsum_exp})
    log_sum_exp = C.sequence.last(log_cumsum_exp)
    weights = C.exp(scores - C.sequence.broadcast_as(log_sum_exp, scores))
    return C.sequence.reduce_sum(weights * embedded), weights


class Tower:
    """One side: ids and their match features (sequences on one axis) -> the attended [dense] vector
    and the attention weights. Without features and dropout (features=False, dropout=0) it is the
    C++ tower of qa::ModelOptions' defaults, which bench/python_qa_train_bench.py trains."""

    def __init__(self, vocab: int, embed: int, hidden: int, dense: int, name: str, dropout: float = 0.5,
                 features: bool = True):
        self.dropout, self.features = dropout, features
        L = C.layers
        self.embedding = L.Embedding(embed, init=C.glorot_uniform(), vocabulary=vocab, name=name + ".embedding")
        # The backward LSTM draws its weights first, as in the C++ sample (model.cpp).
        backward = L.LSTM(hidden, init=C.glorot_uniform(), name=name + ".backward")
        forward = L.LSTM(hidden, init=C.glorot_uniform(), name=name + ".forward")
        self.encoder = L.Sequential([L.BiRecurrence(forward, backward),
                                     L.Dense(dense, init=C.glorot_uniform(), name=name + ".dense")], name=name)
        self.attention_w = C.parameter((dense, 1), init=C.glorot_normal(), name=name + ".attention_w")

    def __call__(self, ids, flags=None):
        x = self.embedding(ids)
        if self.dropout > 0:
            x = C.dropout(x, self.dropout)  # before the splice: the features are always seen
        return attention(self.encoder(C.splice(x, flags) if self.features else x), self.attention_w)


class Model:
    """Both towers, the cosine of their vectors and the listwise loss."""

    def __init__(self, vocab: int, embed: int, hidden: int, dense: int):
        towers = Tower(vocab, embed, hidden, dense, "question"), Tower(vocab, embed, hidden, dense, "answer")
        self.label = C.input_variable(1, name="label")
        question_axis, answer_axis = C.SequenceAxis(), C.SequenceAxis()
        self.question = C.sequence.input_variable(1, name="question", sequence_axis=question_axis)
        self.question_flags = C.sequence.input_variable(FEATURES, name="question_flags", sequence_axis=question_axis)
        self.answer = C.sequence.input_variable(1, name="answer", sequence_axis=answer_axis)
        self.answer_flags = C.sequence.input_variable(FEATURES, name="answer_flags", sequence_axis=answer_axis)
        question_vector, self.question_attention = towers[0](self.question, self.question_flags)
        answer_vector, self.answer_attention = towers[1](self.answer, self.answer_flags)
        self.cosine = C.cosine_distance(question_vector, answer_vector, name="cosine")
        softmax = C.batch.softmax(self.cosine * C.constant(LISTWISE_SCALE))
        self.listwise_loss = C.negate(C.batch.reduce_sum(self.label * C.log(softmax)))

    def inputs(self, batch: C.qa.QaMinibatch, labels: bool = True) -> dict:
        """The bindings of a minibatch made by C.qa.make_qa_minibatch (in C++: ids and features)."""
        data = {self.question: batch.questions, self.question_flags: batch.question_features,
                self.answer: batch.answers, self.answer_flags: batch.answer_features}
        if labels:
            data[self.label] = batch.labels
        return data


class Text:
    """What the network reads besides its parameters: the vocabulary, the idf table, lambda."""

    def __init__(self, train: C.qa.QaData):
        self.vocabulary = C.text.Vocabulary.build(train.token_lists())
        self.idf = C.text.IdfTable.fit(train.token_lists())
        self.lam = 0.0  # final score = cosine + lam * idf-weighted word overlap


def network_scores(m: Model, t: Text, data: C.qa.QaData) -> list:
    """The network's cosine for every pair, in batches of 64."""
    session = C.Session(m.cosine)  # compiled once for all the batches
    scores = []
    for start in range(0, len(data), 64):
        batch = C.qa.make_qa_minibatch(data, t.vocabulary, range(start, min(start + 64, len(data))), t.idf)
        scores.extend(session.eval(m.inputs(batch, labels=False))[:, 0].tolist())
    return scores


def train(o: argparse.Namespace) -> int:
    if o.train is None:
        train_data, eval_data = synthetic(o.questions, o.seed), synthetic(o.questions // 4, o.seed + 1000)
    else:
        train_data = C.qa.read_qa_text(o.train)
        eval_data = C.qa.read_qa_text(o.eval) if o.eval else C.qa.QaData()
    if len(eval_data) and eval_data.num_positives() == 0:
        raise C.DataError(f"{eval_data.source}: no pair is labelled 1, so MAP and MRR are undefined")
    # Every 10th question chooses when to stop and the final score's weight, never the evaluation file.
    held = train_data.hold_out(10)
    # One training step is one question: the listwise loss compares all its candidates at once.
    questions = train_data.by_question(True)
    if not questions:
        raise C.DataError(f"{train_data.source}: no question has both a true (1) and a wrong (0) sentence")
    t = Text(train_data)
    m = Model(t.vocabulary.size(), o.embed, o.hidden, o.dense)
    parameters = m.cosine.parameters
    print(f"data: {len(questions)} training questions of {train_data.source}, {len(held)} pairs held out"
          f"{'; wrong answers copy question words' if o.train is None else ''}\n"
          f"model: per side embedding {o.embed} (vocabulary {t.vocabulary.size()}) + 6 match numbers, "
          f"BiLSTM {o.hidden}+{o.hidden}, dense {o.dense}; {sum(int(np.prod(p.shape)) for p in parameters)} "
          "parameters", flush=True)

    learner = C.adam(parameters, lr=1e-3, momentum=0.9, variance_momentum=0.999, epsilon=1e-8,
                     gradient_clipping_threshold_per_sample=5.0, lazy_sparse_rows=True)
    trainer = C.Trainer(None, m.listwise_loss, learner)
    order = C.io.Batcher(len(questions), batch_size=1, sort_window=0, seed=o.seed)
    epoch_order: dict = {}

    def minibatch(epoch: int, index: int) -> dict:
        if epoch not in epoch_order:
            epoch_order.clear()
            epoch_order[epoch] = order.epoch_batches(epoch)
        items = questions[epoch_order[epoch][index][0]]
        return m.inputs(C.qa.make_qa_minibatch(train_data, t.vocabulary, items, t.idf))

    # The network kept: the mean parameters of all evaluations (the best one's held-out MAP is noise).
    average = C.ParameterAverage(parameters)

    def evaluate() -> tuple:
        average.add()
        held_map = held.rank(network_scores(m, t, held)).map
        dev = eval_data.rank(network_scores(m, t, eval_data)) if len(eval_data) else None
        return held_map, f"held-out MAP {held_map:.4f}; dev MAP {dev.map if dev else 0:.4f} " \
                         f"MRR {dev.mrr if dev else 0:.4f}"

    per_epoch = len(questions)
    C.fit(trainer, minibatch, epochs=o.epochs, minibatches_per_epoch=per_epoch, samples_per_epoch=per_epoch,
          evaluate=evaluate if len(held) else None, evaluate_every=(per_epoch + 1) // 2, patience=3,
          restore_best=False, progress_printer=C.logging.ProgressPrinter(num_epochs=o.epochs))
    if average.count > 0:
        average.assign()
    # The final score adds idf-weighted word overlap only where that beats the network alone on the
    # held-out questions beyond their noise (a paired-bootstrap interval above zero).
    if len(held):
        idf_overlap = [C.qa.word_overlap(p.question, p.answer, t.idf) for p in held.pairs]
        t.lam = C.qa.significant_weight(held.groups(), held.labels(), network_scores(m, t, held), idf_overlap,
                                        [0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0])
    if not len(eval_data):
        return 0
    cos = network_scores(m, t, eval_data)
    pairs = eval_data.pairs
    overlap = [C.qa.word_overlap(p.question, p.answer) for p in pairs]
    final = [c + t.lam * C.qa.word_overlap(p.question, p.answer, t.idf) for p, c in zip(pairs, cos)]
    base, net, fin = eval_data.rank(overlap), eval_data.rank(cos), eval_data.rank(final)
    print(f"{net.questions} questions of {eval_data.source}; MAP, MRR, MAP - overlap (95 % interval):\n"
          f"  {'word overlap (shared words)':<36} {base.map:.4f}  {base.mrr:.4f}")

    def row(name: str, x: C.qa.RankingMetrics) -> None:
        d = C.qa.paired_bootstrap(x.average_precision, base.average_precision)
        print(f"  {name:<36} {x.map:.4f}  {x.mrr:.4f}  {d.mean:+.4f} ({d.low:+.4f} .. {d.high:+.4f})")

    row("network (cosine)", net)
    if t.lam > 0:  # with a weight of 0 the final score is the network's
        row("final: cosine + " + f"{t.lam:f}"[:5] + " x idf overlap", fin)
    if o.train is None:
        print("real data (SelQA, README): qa_similarity.py --train selqa-ass-test.tsv --eval selqa-ass-dev.tsv")
    return 0


def main(argv=None) -> int:
    def count(most: int):
        def parse(text: str) -> int:
            n = int(text)
            if not 1 <= n <= most:
                raise argparse.ArgumentTypeError(f"{n} is not in [1, {most}]")
            return n
        return parse

    p = argparse.ArgumentParser(description="Train the seed's question/answer similarity model from Python")
    p.add_argument("--train", help="question<TAB>sentence<TAB>label file; default: synthetic data")
    p.add_argument("--eval", help="file of the same form: MAP and MRR")
    p.add_argument("--epochs", type=count(100000), default=3, help="training epochs at most")
    p.add_argument("--embed", type=count(4096), default=50, help="embedding dimension")
    p.add_argument("--hidden", type=count(4096), default=64, help="LSTM size per direction")
    p.add_argument("--dense", type=count(4096), default=64, help="Dense output (attention) dimension")
    p.add_argument("--questions", type=count(10000000), default=600, help="synthetic data: training questions")
    p.add_argument("--seed", type=int, default=1, help="seed for the data order and the initial weights")
    p.add_argument("--threads", type=count(64), default=1, help="independent steps of the model run at once")
    o = p.parse_args(argv)
    try:
        C.set_blas_threads(1)  # independent steps run side by side instead (bench/README.md)
        C.set_inter_op_threads(o.threads)
        C.set_seed(o.seed)
        return train(o)
    except C.UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
