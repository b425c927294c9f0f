"""Question answering (qa/ in C++): QA files (SelQA's layout), word-overlap baselines and match
features, ranking metrics (MAP, MRR) with paired-bootstrap intervals, synthetic data with a known
signal, and the minibatch of a QA model's inputs built in C++. Not in CNTK.

    import loom as C
    train = C.qa.read_qa_text("selqa-ass-test.tsv")        # a loom.DataError names file:line
    vocab = C.text.Vocabulary.build(train.token_lists())
    idf = C.text.IdfTable.fit(train.token_lists())
    mb = C.qa.make_qa_minibatch(train, vocab, [0, 1, 2], idf)  # ids, labels, match features
    train.rank(scores).map                                  # MAP of one score per pair

samples/python/qa_similarity.py trains the QA sample's model with them.
"""

from __future__ import annotations

from . import _loom
from .text import IdfTable, Vocabulary

_qa = _loom.qa
(QaData, QaMinibatch, QaPair, PairedInterval, RankingMetrics, TieBreak) = (
    _qa.QaData, _qa.QaMinibatch, _qa.QaPair, _qa.PairedInterval, _qa.RankingMetrics, _qa.TieBreak)
(make_qa_minibatch, make_synthetic_qa, match_features, paired_bootstrap, ranking_metrics, read_qa_text,
 read_qa_tsv, significant_weight, word_overlap) = (
    _qa.make_qa_minibatch, _qa.make_synthetic_qa, _qa.match_features, _qa.paired_bootstrap, _qa.ranking_metrics,
    _qa.read_qa_text, _qa.read_qa_tsv, _qa.significant_weight, _qa.word_overlap)
#: The numbers per token match_features gives.
match_feature_count: int = _qa.match_feature_count

__all__ = ["IdfTable", "PairedInterval", "QaData", "QaMinibatch", "QaPair", "RankingMetrics", "TieBreak",
           "Vocabulary", "make_qa_minibatch", "make_synthetic_qa", "match_feature_count", "match_features",
           "paired_bootstrap", "ranking_metrics", "read_qa_text", "read_qa_tsv", "significant_weight",
           "word_overlap"]
