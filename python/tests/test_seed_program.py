"""The seed program (samples/python/seed_attention.py) on a ragged batch of word ids: its towers,
attention weights and cosine against a numpy reimplementation of the whole program from its own
parameters' values, its gradients by central differences in float64."""

import os
import runpy

import numpy as np

import loom as C
from support import assert_close, lstm_reference, parameter_numeric_gradient

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "python", "seed_attention.py")
seed = runpy.run_path(SAMPLE)


def _tower_reference(tower, ids, hidden):
    """Embedding rows, a forward and a backward LSTM spliced, Dense: the seed's pipeline in numpy."""
    p = {q.name: q.value for q in tower.parameters}
    x = p["embedding.E"][ids]
    h = np.hstack([lstm_reference(x, p["forward.W"], p["forward.U"], p["forward.b"], hidden),
                   lstm_reference(x, p["backward.W"], p["backward.U"], p["backward.b"], hidden, backwards=True)])
    return h @ p["dense.W"] + p["dense.b"]


def _reference(m, questions, answers, hidden):
    def attend(s, w):
        z = s @ w[:, 0]
        e = np.exp(z - z.max())
        a = e / e.sum()
        return a, (a[:, None] * s).sum(0)

    weights, cosines = [], []
    for q, a in zip(questions, answers):
        aq, vq = attend(_tower_reference(m["q_lstm"], q, hidden), m["w_q"].value)
        _, va = attend(_tower_reference(m["a_lstm"], a, hidden), m["w_a"].value)
        weights.append(aq[:, None])
        cosines.append([vq @ va / np.linalg.norm(vq) / np.linalg.norm(va)])
    return weights, np.array(cosines)


def test_the_seed_program_values_and_gradients_in_float64():
    C.set_seed(5)
    m = seed["seed_model"](vocabulary=7, embed=5, hidden=3, dense=4, dtype=np.float64)
    question, answer = m["question"], m["answer"]
    assert (m["w_q"].name, m["w_a"].name) == ("w_q", "w_a")
    assert all(p.value.dtype == np.float64 for p in m["cosine_dst"].parameters)
    rng = np.random.default_rng(1)
    questions = [rng.integers(0, 7, size=n) for n in (3, 1, 6)]
    answers = [rng.integers(0, 7, size=n) for n in (2, 5, 1)]
    data = {question: questions, answer: answers}
    weights, cosines = _reference(m, questions, answers, hidden=3)
    assert_close(m["attn_q"].eval({question: questions}), weights, rtol=1e-9)
    assert_close(m["cosine_dst"].eval(data), cosines, rtol=1e-9)
    # Weighted, so that errors cannot cancel; through the attention, the Dense, both LSTMs and the
    # embedding of each side.
    loss = m["cosine_dst"] * C.constant(np.array([0.7]))
    q_side, a_side = ({p.name: p for p in m[t].parameters} for t in ("q_lstm", "a_lstm"))
    wanted = [m["w_q"], m["w_a"], q_side["embedding.E"], q_side["dense.W"], a_side["forward.W"], a_side["backward.U"]]
    g = loss.grad(data, wrt=wanted)
    for p in wanted:
        assert_close(g[p], parameter_numeric_gradient(loss, data, p), rtol=1e-5, atol=1e-8)


def test_the_seed_program_runs_as_a_script(capsys):
    seed["main"]()
    out = capsys.readouterr().out
    assert "attention over question 2" in out and "sum 1.000" in out
