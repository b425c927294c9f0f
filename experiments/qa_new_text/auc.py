#!/usr/bin/env python3
"""AUC of a saved QA model's scores against word overlap, on labelled pairs of raw text.

    auc.py detok SELQA.tsv > RAW.tsv          SelQA's tokenised text turned back into raw text
    auc.py auc PAIRS.tsv SCORES.tsv           AUC of final, network and word-overlap scores, and the
                                              final's AUC minus word overlap's with a 95 % interval

SCORES.tsv is `qa_similarity --model M --score PAIRS.tsv` output (final<TAB>network per pair);
the word-overlap count is computed here as the sample does (distinct shared non-stopwords), on
lower-cased words with punctuation stripped; the idf-weighted one sums log(N / df) of the shared
words, N and df counted over the file's distinct questions and sentences. AUC counts ties as one
half. The interval resamples whole questions with replacement (2,000 times), so that a small set
says how much its difference could move.
"""
import math
import random
import re
import sys
from collections import Counter

STOP = set("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours out over own same she should so some such than
that the their theirs them then there these they this those through to too under until up very was we were
what when where which while who whom whose why will with would you your yours one many much may might must
shall yet via""".split())


def detok(line):
    s = " " + line + " "
    s = re.sub(r" ([.,;:?!%)\]}])", r"\1", s)
    s = re.sub(r"([(\[{$]) ", r"\1", s)
    s = re.sub(r" ('s|n't|'re|'ve|'ll|'d|'m)\b", r"\1", s)
    return s.strip()


def words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def auc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = 0.0
    neg_sorted = sorted(neg)
    import bisect
    for p in pos:
        lo = bisect.bisect_left(neg_sorted, p)
        hi = bisect.bisect_right(neg_sorted, p)
        wins += lo + 0.5 * (hi - lo)
    return wins / (len(pos) * len(neg))


def paired_interval(questions, labels, a, b, resamples=2000, seed=1):
    """95 % interval of AUC(a) - AUC(b) over questions resampled with replacement."""
    by_question = {}
    for i, q in enumerate(questions):
        by_question.setdefault(q, []).append(i)
    groups = list(by_question.values())
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        pick = [i for g in (rng.choice(groups) for _ in groups) for i in g]
        y = [labels[i] for i in pick]
        if 0 < sum(y) < len(y):
            diffs.append(auc([a[i] for i in pick], y) - auc([b[i] for i in pick], y))
    diffs.sort()
    return diffs[int(0.025 * len(diffs))], diffs[int(0.975 * len(diffs)) - 1]


def main():
    if sys.argv[1] == "detok":
        for line in open(sys.argv[2], encoding="utf-8"):
            q, a, y = line.rstrip("\n").split("\t")
            print(f"{detok(q)}\t{detok(a)}\t{y}")
        return
    rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2], encoding="utf-8")]
    if rows and rows[0][0].lower() == "question":
        rows = rows[1:]
    scores = [tuple(map(float, l.split("\t"))) for l in open(sys.argv[3])]
    assert len(rows) == len(scores), (len(rows), len(scores))
    labels = [int(r[2]) for r in rows]
    overlap = [len(words(r[0]) & words(r[1])) for r in rows]
    # idf over the file's own documents (each distinct question and sentence once), as a reader
    # of the file without a model would have it
    documents = {r[0] for r in rows} | {r[1] for r in rows}
    df = Counter(w for d in documents for w in words(d))
    weighted = [sum(math.log(len(documents) / df[w]) for w in words(r[0]) & words(r[1])) for r in rows]
    print(f"{len(rows)} pairs, {sum(labels)} positive: AUC final {auc([s[0] for s in scores], labels):.4f}, "
          f"network {auc([s[1] for s in scores], labels):.4f}, word overlap {auc(overlap, labels):.4f}, "
          f"idf-weighted overlap {auc(weighted, labels):.4f}")
    final = [s[0] for s in scores]
    low, high = paired_interval([r[0].lower() for r in rows], labels, final, overlap)
    print(f"final - word overlap: {auc(final, labels) - auc(overlap, labels):+.4f} "
          f"(95 % interval over questions {low:+.4f} .. {high:+.4f})")


if __name__ == "__main__":
    main()
