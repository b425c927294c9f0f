"""The seed program: CNTK's "How do I express things in Python" attention, as CNTK wrote it, with
`import loom as C`. Question and answer pass through the seed's towers (Embedding, a BiLSTM,
Dense); attention weights over each variable-length sequence are a softmax over its steps, whose
normalizer is a cumulative log-sum-exp computed by a recurrence closed with replace_placeholders;
the cosine of the attended question and answer scores the pair.

One difference from CNTK: the words are ids of shape (1,) and Embedding is told the vocabulary's
size, where CNTK feeds one-hot vectors to a sparse input (loom has no sparse inputs).

    PYTHONPATH=build/python python3 samples/python/seed_attention.py
"""

import numpy as np

import loom as C


def tower(vocabulary, embed=500, hidden=300, dense=200):
    """The seed's pipeline for one side: Sequential([Embedding(500), BiRecurrence(LSTM(300),
    LSTM(300)), Dense(200)])."""
    return C.layers.Sequential([C.layers.Embedding(embed, vocabulary=vocabulary, name="embedding"),
                                C.layers.BiRecurrence(C.layers.LSTM(hidden, name="forward"),
                                                      C.layers.LSTM(hidden, name="backward")),
                                C.layers.Dense(dense, name="dense")])


def attention_weights(zq):
    """exp(zq - log-sum-exp over the steps of each sequence), as the seed writes it."""
    p = C.placeholder_variable((1))
    prev_zq_or_tiny = C.element_select(C.sequence.is_first(zq), -1e+30, C.past_value(p))
    log_cumsum_exp = C.log_add_exp(zq, prev_zq_or_tiny)
    actual_log_cumsum_exp = log_cumsum_exp.replace_placeholders({p: log_cumsum_exp.output})
    log_sum_exp = C.sequence.last(actual_log_cumsum_exp)
    return C.exp(zq - C.sequence.broadcast_as(log_sum_exp, zq))


def seed_model(vocabulary, embed=500, hidden=300, dense=200, dtype=np.float32):
    """The seed's graph over sequences of word ids: a dict of its inputs (question, answer), the
    towers (q_lstm, a_lstm), their outputs (q_embed, a_embed), w_q, w_a, attn_q and cosine_dst."""
    question = C.sequence.input_variable(1, name="question")
    answer = C.sequence.input_variable(1, name="answer")
    q_lstm, a_lstm = tower(vocabulary, embed, hidden, dense), tower(vocabulary, embed, hidden, dense)
    q_embed = q_lstm(question)
    a_embed = a_lstm(answer)
    w_q = C.parameter((dense, 1), init=C.glorot_normal(), name="w_q")
    w_a = C.parameter((dense, 1), init=C.glorot_normal(), name="w_a")
    zq = C.times(q_embed, w_q)
    za = C.times(a_embed, w_a)
    attn_q = attention_weights(zq)
    attn_a = attention_weights(za)
    attended_q = C.sequence.reduce_sum(attn_q * q_embed)
    attended_a = C.sequence.reduce_sum(attn_a * a_embed)
    cosine_dst = C.cosine_distance(attended_q, attended_a)
    if dtype == np.float64:
        C.to_precision(cosine_dst.parameters, np.float64)
    return dict(question=question, answer=answer, q_lstm=q_lstm, a_lstm=a_lstm, q_embed=q_embed, a_embed=a_embed,
                w_q=w_q, w_a=w_a, attn_q=attn_q, cosine_dst=cosine_dst)


def main():
    C.set_seed(1)
    m = seed_model(vocabulary=1000)
    question, answer, cosine_dst = m["question"], m["answer"], m["cosine_dst"]
    rng = np.random.default_rng(0)
    # A ragged batch of word ids: questions of 3, 1 and 5 words, answers of 2, 4 and 1.
    questions = [rng.integers(0, 1000, size=n) for n in (3, 1, 5)]
    answers = [rng.integers(0, 1000, size=n) for n in (2, 4, 1)]
    data = {question: questions, answer: answers}
    for n, w in enumerate(m["attn_q"].eval({question: questions})):
        print(f"attention over question {n}: {np.round(w[:, 0], 3)} (sum {w.sum():.3f})")
    print("cosine of each pair:", np.round(cosine_dst.eval(data)[:, 0], 4))
    g = cosine_dst.grad(data, wrt=[m["w_q"]])
    print("d sum(cosine) / d w_q, its first 4:", np.round(g[:4, 0], 4))


if __name__ == "__main__":
    main()
