"""The seed program: CNTK's "How do I express things in Python" attention, as CNTK wrote it, with
`import loom as C`. Attention weights over a variable-length sequence are a softmax over its steps,
whose normalizer is a cumulative log-sum-exp computed by a recurrence closed with
replace_placeholders; the cosine of the attended question and answer scores the pair.

The seed runs its inputs through BiLSTM towers first (C.layers, not in loom's Python yet); here the
question's and answer's own vectors stand in for q_embed and a_embed.

    PYTHONPATH=build/python python3 samples/python/seed_attention.py
"""

import numpy as np

import loom as C


def attention_weights(zq):
    """exp(zq - log-sum-exp over the steps of each sequence), as the seed writes it."""
    p = C.placeholder_variable((1))
    prev_zq_or_tiny = C.element_select(C.sequence.is_first(zq), -1e+30, C.past_value(p))
    log_cumsum_exp = C.log_add_exp(zq, prev_zq_or_tiny)
    actual_log_cumsum_exp = log_cumsum_exp.replace_placeholders({p: log_cumsum_exp.output})
    log_sum_exp = C.sequence.last(actual_log_cumsum_exp)
    return C.exp(zq - C.sequence.broadcast_as(log_sum_exp, zq))


def seed_model(dim, dtype=np.float32):
    """The seed's graph over sequences of `dim`-vectors: (question, answer, attn_q, cosine_dst)."""
    question = C.sequence.input_variable(dim, name="question")
    answer = C.sequence.input_variable(dim, name="answer")
    q_embed, a_embed = question, answer
    w_q = C.parameter((dim, 1), init=C.glorot_normal(), dtype=dtype, name="w_q")
    w_a = C.parameter((dim, 1), init=C.glorot_normal(), dtype=dtype, name="w_a")
    zq = C.times(q_embed, w_q)
    za = C.times(a_embed, w_a)
    attn_q = attention_weights(zq)
    attn_a = attention_weights(za)
    attended_q = C.sequence.reduce_sum(attn_q * q_embed)
    attended_a = C.sequence.reduce_sum(attn_a * a_embed)
    cosine_dst = C.cosine_distance(attended_q, attended_a)
    return question, answer, attn_q, cosine_dst


def main():
    C.set_seed(1)
    question, answer, attn_q, cosine_dst = seed_model(4)
    rng = np.random.default_rng(0)
    # A ragged batch: questions of 3, 1 and 5 steps, answers of 2, 4 and 1.
    questions = [rng.normal(size=(n, 4)).astype(np.float32) for n in (3, 1, 5)]
    answers = [rng.normal(size=(n, 4)).astype(np.float32) for n in (2, 4, 1)]
    data = {question: questions, answer: answers}
    for n, w in enumerate(attn_q.eval({question: questions})):
        print(f"attention over question {n}: {np.round(w[:, 0], 3)} (sum {w.sum():.3f})")
    print("cosine of each pair:", np.round(cosine_dst.eval(data)[:, 0], 4))
    w_q = cosine_dst.parameters[0]
    print("d sum(cosine) / d w_q:", np.round(cosine_dst.grad(data, wrt=[w_q])[:, 0], 4))


if __name__ == "__main__":
    main()
