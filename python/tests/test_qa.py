"""loom.qa, loom.text, loom.io.Batcher, loom.batch, ParameterAverage, Session and the training options
the QA sample needs, each against an independent computation: ranking metrics by a reference written
here (ties included), idf and overlap by hand, features and ids by hand, batch ops in numpy, and the
errors (a missing file or a malformed row is a loom.DataError naming file:line)."""

import math

import numpy as np
import pytest

import loom as C


def reference_ranking(groups, scores, labels, ties="input_order"):
    """MAP and MRR as the definitions say, in plain Python: rank each group by decreasing score."""
    aps, rrs = [], []
    for g in dict.fromkeys(groups):  # groups in order of first appearance
        members = [i for i in range(len(groups)) if groups[i] == g]
        if not any(labels[i] for i in members):
            continue
        tie = {"input_order": lambda i: 0, "pessimistic": lambda i: labels[i],
               "optimistic": lambda i: -labels[i]}[ties]
        ranked = sorted(members, key=lambda i: (-scores[i], tie(i), i))
        hits, precisions, first = 0, [], None
        for rank, i in enumerate(ranked, 1):
            if labels[i]:
                hits += 1
                precisions.append(hits / rank)
                first = first or rank
        aps.append(sum(precisions) / len(precisions))
        rrs.append(1 / first)
    return sum(aps) / len(aps), sum(rrs) / len(rrs), aps


GROUPS = [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3]
SCORES = [0.9, 0.5, 0.7, 0.2, 0.8, 0.8, 0.1, 0.3, 0.3, 0.4, 0.6]
LABELS = [0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 0]  # group 2 has no true candidate


def test_ranking_metrics_match_a_reference_and_a_hand_count():
    m = C.qa.ranking_metrics(GROUPS, SCORES, LABELS)
    # By hand: group 0 ranks 0.9(0) 0.7(1) 0.5(1): AP (1/2 + 2/3) / 2, RR 1/2; group 1 ranks the tie
    # 0.8(0) 0.8(1) in input order, then 0.2(1): AP (1/2 + 2/3) / 2, RR 1/2; group 3: AP 1/2, RR 1/2.
    ap = (0.5 + 2 / 3) / 2
    assert m.map == pytest.approx((ap + ap + 0.5) / 3)
    assert m.mrr == pytest.approx(0.5)
    assert m.questions == 3 and m.skipped_no_positive == 1
    assert m.average_precision == pytest.approx([ap, ap, 0.5])


@pytest.mark.parametrize("ties", ["input_order", "pessimistic", "optimistic"])
def test_ties_follow_the_tie_break(ties):
    m = C.qa.ranking_metrics(GROUPS, SCORES, LABELS, getattr(C.qa.TieBreak, ties))
    want_map, want_mrr, want_aps = reference_ranking(GROUPS, SCORES, LABELS, ties)
    assert (m.map, m.mrr) == pytest.approx((want_map, want_mrr))
    assert m.average_precision == pytest.approx(want_aps)


def test_ties_move_the_metrics():
    low = C.qa.ranking_metrics(GROUPS, SCORES, LABELS, C.qa.TieBreak.pessimistic)
    high = C.qa.ranking_metrics(GROUPS, SCORES, LABELS, C.qa.TieBreak.optimistic)
    assert low.map < high.map  # group 1's tie: the true one second or first


def test_ranking_metrics_refuse_bad_input():
    with pytest.raises(C.UserError, match="one entry per candidate"):
        C.qa.ranking_metrics([0, 0], [0.1], [1, 0])
    with pytest.raises(C.UserError, match="label"):
        C.qa.ranking_metrics([0, 0], [0.1, 0.2], [1, 2])


def test_paired_bootstrap_and_significant_weight():
    a = [0.5, 1.0, 0.25, 1.0, 0.5]
    b = [0.5, 0.5, 0.25, 0.5, 0.5]
    d = C.qa.paired_bootstrap(a, b)
    assert d.mean == pytest.approx(np.mean(np.subtract(a, b)))
    assert d.low <= d.mean <= d.high and d.low >= 0 and d.high <= 0.5  # resampled means of {0, 0.5}
    same = C.qa.paired_bootstrap([0.3] * 4, [0.1] * 4)
    assert (same.low, same.mean, same.high) == pytest.approx((0.2, 0.2, 0.2))
    with pytest.raises(C.UserError):
        C.qa.paired_bootstrap([1.0, 2.0], [1.0])

    # 40 questions of two candidates; a ranks the true one second, b first: any weight that lets b
    # decide is significant, and the first such in the list is chosen (ties: the first).
    groups = [q for q in range(40) for _ in range(2)]
    labels = [1, 0] * 40
    a = [0.0, 0.1] * 40
    b = [1.0, 0.0] * 40
    assert C.qa.significant_weight(groups, labels, a, b, [0.01, 0.5, 2.0]) == 0.5  # 0.01 * 1 < 0.1
    assert C.qa.significant_weight(groups, labels, a, [0.0, 0.0] * 40, [0.5, 2.0]) == 0.0  # b adds nothing


def test_word_overlap_idf_and_stopwords_by_hand():
    docs = [["who", "wrote", "hamlet"], ["hamlet", "is", "a", "play"], ["paris", "is", "big"]]
    idf = C.text.IdfTable.fit(docs)
    assert idf.documents == 3
    assert idf("hamlet") == pytest.approx(math.log(3 / 2))
    assert idf("paris") == pytest.approx(math.log(3))
    assert idf("unseen") == pytest.approx(math.log(4))
    q, a = ["who", "wrote", "hamlet", "?"], ["shakespeare", "wrote", "hamlet", "."]
    assert C.text.is_stopword("who") and not C.text.is_stopword("hamlet")
    assert C.qa.word_overlap(q, a) == 2  # wrote, hamlet; who is a stopword
    assert C.qa.word_overlap(q, a, idf) == pytest.approx(math.log(3 / 1) + math.log(3 / 2))
    assert C.text.crude_stem("games") == C.text.crude_stem("game")


def test_match_features_by_hand():
    idf = C.text.IdfTable.fit([["founded", "in", "1999"], ["rome"]])
    f = C.qa.match_features(["rome", "was", "founding", "1999"], ["founded", "in", "1999", "rome"], idf)
    assert f.shape == (4, C.qa.match_feature_count) == (4, 6)
    largest = math.log(3)
    # rome: shared, idf log(2/1); was: stopword; founding: stem shared only; 1999: shared, a digit.
    np.testing.assert_allclose(f[:, 0], [1, 0, 0, 1])
    np.testing.assert_allclose(f[:, 1], [math.log(2) / largest, 0, 0, math.log(2) / largest], rtol=1e-6)
    np.testing.assert_allclose(f[:, 3], [1, 0, 1, 1])
    np.testing.assert_allclose(f[:, 5], [0, 0, 0, 1])


def test_vocabulary_ids_text_round_trip_and_errors(tmp_path):
    v = C.text.Vocabulary.build([["b", "a", "c"], ["a", "c"], ["c"]])
    assert v.size() == len(v) == 5
    assert [v.word(i) for i in range(5)] == ["<pad>", "<unk>", "c", "a", "b"]  # by count, ties by byte
    assert v.ids(["a", "zzz", "c"]) == [3, 1, 2] and "a" in v and "zzz" not in v
    again = C.text.Vocabulary.parse(v.to_text())
    assert [again.word(i) for i in range(5)] == [v.word(i) for i in range(5)]
    assert C.text.Vocabulary.build([["a", "b", "b"]], min_count=2).ids(["a", "b"]) == [1, 2]
    with pytest.raises(C.UserError):
        v.word(5)
    with pytest.raises(C.DataError, match="vocab.txt"):
        C.text.Vocabulary.parse("not a vocabulary\n", "vocab.txt")
    with pytest.raises(C.DataError, match="nope.txt"):
        C.text.Vocabulary.load(str(tmp_path / "nope.txt"))


def qa_file(tmp_path, text, name="qa.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


QA_TEXT = ("Who wrote Hamlet ?\tShakespeare wrote Hamlet .\t1\n"
           "Who wrote Hamlet ?\tIt is long .\t0\n"
           "Where is Paris ?\tIn France .\t1\n"
           "Where is Paris ?\tParis is big .\t1\n"
           "What is 2 + 2 ?\tFour .\t0\n")


def test_read_qa_files_group_and_split(tmp_path):
    for read in (C.qa.read_qa_tsv, C.qa.read_qa_text):
        d = read(qa_file(tmp_path, QA_TEXT))
        assert len(d) == 5 and d.num_groups == 3 and d.num_positives() == 3
        assert d.groups() == [0, 0, 1, 1, 2] and d.labels() == [1, 0, 1, 1, 0]
        assert d.pairs[0].question == ["who", "wrote", "hamlet", "?"] and d.pairs[4].line == 5
        assert d.by_question() == [[0, 1], [2, 3], [4]]
        assert d.by_question(mixed_only=True) == [[0, 1]]
        assert d.token_lists()[0] == ["who", "wrote", "hamlet", "?"]  # each question once, then answers
        assert len(d.token_lists()) == 3 + 5
        assert d.rank([0.9, 0.1, 0.5, 0.4, 0.0]).map == pytest.approx(1.0)
        held = d.hold_out(2)  # every 2nd question: group 1
        assert held.groups() == [1, 1] and d.groups() == [0, 0, 2] and held.source == "held-out questions"
    with pytest.raises(C.UserError):
        d.hold_out(1)


def test_bad_files_are_data_errors_naming_file_and_line(tmp_path):
    missing = str(tmp_path / "missing.tsv")
    for read in (C.qa.read_qa_tsv, C.qa.read_qa_text):
        with pytest.raises(C.DataError, match="missing.tsv"):
            read(missing)
    bad = qa_file(tmp_path, "q one ?\ta one .\t1\nq two ?\ta two .\tmaybe\n", "bad.tsv")
    for read in (C.qa.read_qa_tsv, C.qa.read_qa_text):
        with pytest.raises(C.DataError, match="bad.tsv:2"):
            read(bad)
    columns = qa_file(tmp_path, "q one ?\ta one .\t1\nonly one column\n", "columns.tsv")
    with pytest.raises(C.DataError, match="columns.tsv:2"):
        C.qa.read_qa_tsv(columns)
    assert isinstance(C.DataError("x"), OSError)


def test_minibatch_ids_labels_and_features(tmp_path):
    d = C.qa.read_qa_tsv(qa_file(tmp_path, QA_TEXT))
    vocab = C.text.Vocabulary.build(d.token_lists())
    idf = C.text.IdfTable.fit(d.token_lists())
    mb = C.qa.make_qa_minibatch(d, vocab, [2, 0], idf)
    assert mb.items == [2, 0]
    questions = mb.questions.to_numpy()
    assert [q.reshape(-1).tolist() for q in questions] == [vocab.ids(d.pairs[i].question) for i in (2, 0)]
    answers = mb.answers.to_numpy()
    assert [a.reshape(-1).tolist() for a in answers] == [vocab.ids(d.pairs[i].answer) for i in (2, 0)]
    np.testing.assert_array_equal(mb.labels.to_numpy(), [[1], [1]])
    for k, i in enumerate((2, 0)):
        p = d.pairs[i]
        np.testing.assert_array_equal(mb.question_features.to_numpy()[k],
                                      C.qa.match_features(p.question, p.answer, idf))
        np.testing.assert_array_equal(mb.answer_features.to_numpy()[k],
                                      C.qa.match_features(p.answer, p.question, idf))
    # Pair 0 by hand: "who wrote hamlet ?" against "shakespeare wrote hamlet .": wrote and hamlet shared.
    np.testing.assert_array_equal(mb.question_features.to_numpy()[1][:, 0], [0, 1, 1, 0])
    assert C.qa.make_qa_minibatch(d, vocab, [1]).question_features.to_numpy() is None  # no idf, no features
    with pytest.raises(C.UserError, match="out of range"):
        C.qa.make_qa_minibatch(d, vocab, [5], idf)
    with pytest.raises(C.UserError, match="empty"):
        C.qa.make_qa_minibatch(d, vocab, [], idf)
    with pytest.raises(C.UserError, match="-1"):
        C.qa.make_qa_minibatch(d, vocab, [-1], idf)


def test_synthetic_qa_has_one_true_answer_per_question():
    d = C.qa.make_synthetic_qa(questions=30, candidates=5, vocab=300, seed=4)
    assert d.num_groups == 30 and len(d) == 150 and d.num_positives() == 30
    assert all(t.startswith("w") for p in d.pairs[:5] for t in p.question + p.answer)
    again = C.qa.make_synthetic_qa(questions=30, candidates=5, vocab=300, seed=4)
    assert [p.answer for p in again.pairs] == [p.answer for p in d.pairs]
    with pytest.raises(C.UserError):
        C.qa.make_synthetic_qa(topics=1)


def test_batcher_orders():
    b = C.io.Batcher(10, batch_size=1, sort_window=0, seed=3)
    e0, e1 = b.epoch_batches(0), b.epoch_batches(1)
    assert sorted(x[0] for x in e0) == list(range(10)) and e0 != e1
    assert C.io.Batcher(10, batch_size=1, sort_window=0, seed=3).epoch_batches(0) == e0
    b.set_position(1, 2)
    assert b.next() == e1[2]
    assert C.io.Batcher(5, batch_size=2, shuffle=False, sort_window=0).epoch_batches(0) == [[0, 1], [2, 3], [4]]
    with pytest.raises(C.UserError):
        C.io.Batcher(0)


def test_batch_ops_against_numpy():
    x = C.input_variable(2, name="x")
    data = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 0.0]])
    np.testing.assert_allclose(C.batch.reduce_sum(x).eval(data), data.sum(0))
    np.testing.assert_allclose(C.batch.reduce_mean(x).eval(data), data.mean(0))
    np.testing.assert_allclose(C.batch.reduce_max(x).eval(data), data.max(0))
    e = np.exp(data - data.max(0))
    np.testing.assert_allclose(C.batch.softmax(x).eval(data), e / e.sum(0))
    # The listwise loss of the QA sample: -sum(label * log softmax(10 cos)) over the batch.
    cos, label = C.input_variable(1, name="cos"), C.input_variable(1, name="label")
    loss = C.negate(C.batch.reduce_sum(label * C.log(C.batch.softmax(cos * C.constant(10.0)))))
    c, l = np.array([[0.2], [0.9], [-0.1]]), np.array([[0.0], [1.0], [0.0]])
    z = 10 * c[:, 0]
    assert float(loss.eval({cos: c, label: l})) == pytest.approx(-(z[1] - np.log(np.exp(z).sum())), rel=1e-6)


def test_parameter_average_and_session():
    w = C.parameter((2,), init=np.array([1.0, 2.0]), name="w")
    avg = C.ParameterAverage([w])
    with pytest.raises(C.UserError):
        avg.assign()
    avg.add()
    w.value = np.array([3.0, 6.0], np.float32)
    avg.add()
    w.value = np.array([100.0, 100.0], np.float32)
    avg.assign()
    assert avg.count == 2
    np.testing.assert_allclose(w.value, [2.0, 4.0])

    x = C.sequence.input_variable(2, name="x")
    f = C.sequence.reduce_sum(C.dropout(x, 0.5) * w)
    s = C.Session(f)
    for n in (1, 3):
        data = [np.full((t + 1, 2), 1.0 + t, np.float32) for t in range(n)]
        want = [np.sum(d * np.array([2.0, 4.0]), 0) for d in data]  # dropout: the identity
        np.testing.assert_allclose(s.eval({x: data}), want)
        np.testing.assert_allclose(f.eval({x: data}), want)
    with pytest.raises(C.UserError, match="Session"):
        C.Session([f, 3])


def _one_row_model():
    """A 3-row embedding table and a loss of the row its id reads: sum((row - 1)^2)."""
    ids = C.input_variable(1, name="ids")
    emb = C.layers.Embedding(2, init=0.5, vocabulary=3, name="e")
    loss = C.reduce_sum(C.square(emb(ids) - C.constant(1.0)))
    return ids, loss, loss.parameters[0]


@pytest.mark.parametrize("lazy", [False, True])
def test_adam_lazy_sparse_rows_keeps_untouched_rows(lazy):
    ids, loss, table = _one_row_model()
    trainer = C.Trainer(None, loss, C.adam([table], lr=0.1, momentum=0.9, lazy_sparse_rows=lazy))
    trainer.train_minibatch({ids: np.array([[0.0]])})
    after_first = np.array(table.value)
    trainer.train_minibatch({ids: np.array([[1.0]])})  # row 0 has no gradient now
    moved = not np.array_equal(table.value[0], after_first[0])
    # Exact Adam moves row 0 on its momentum: m/(sqrt(v)+eps) with m, v decayed, about lr.
    assert moved != lazy
    if lazy:  # row 2 was never read: it keeps its initial value
        np.testing.assert_array_equal(table.value[2], [0.5, 0.5])


def test_fit_restore_best_and_evaluation_text(capsys):
    def run(restore_best):
        w = C.parameter((1,), init=np.array([5.0]), name="w")
        x = C.input_variable(1, name="x")
        loss = C.reduce_sum(C.square(C.times(x, C.reshape(w, (1, 1)))))
        trainer = C.Trainer(None, loss, C.sgd([w], lr=0.1))
        seen = []

        def evaluate():
            seen.append(float(w.value[0]))
            return -len(seen), f"evaluation number {len(seen)}"  # the first is the best

        C.fit(trainer, [{x: np.array([[1.0]])}], epochs=3, evaluate=evaluate,
              progress_printer=C.logging.ProgressPrinter(), restore_best=restore_best)
        return float(w.value[0]), seen

    kept, seen = run(True)
    assert kept == pytest.approx(seen[0])
    last, seen = run(False)
    assert last == pytest.approx(seen[-1]) and last != pytest.approx(seen[0])
    assert "evaluation number 3" in capsys.readouterr().out
