"""The seed program (samples/python/seed_attention.py) on a ragged batch: its attention weights
against a softmax over each sequence and its cosine against numpy, its gradients by central
differences in float64."""

import os
import runpy
import sys

import numpy as np

import loom as C
from support import assert_close, numeric_gradient, parameter_numeric_gradient, total

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "python", "seed_attention.py")
seed = runpy.run_path(SAMPLE)


def _batch(rng, lengths, dim=4):
    return [rng.normal(size=(n, dim)) for n in lengths]


def _reference(questions, answers, w_q, w_a):
    def attend(s, w):
        z = s @ w[:, 0]
        e = np.exp(z - z.max())
        a = e / e.sum()
        return a, (a[:, None] * s).sum(0)

    weights, cosines = [], []
    for q, a in zip(questions, answers):
        aq, vq = attend(q, w_q)
        _, va = attend(a, w_a)
        weights.append(aq[:, None])
        cosines.append([vq @ va / np.linalg.norm(vq) / np.linalg.norm(va)])
    return weights, np.array(cosines)


def test_the_seed_program_values_and_gradients_in_float64():
    C.set_seed(5)
    question, answer, attn_q, cosine_dst = seed["seed_model"](4, dtype=np.float64)
    w_q, w_a = cosine_dst.parameters
    assert (w_q.name, w_a.name) == ("w_q", "w_a")
    rng = np.random.default_rng(1)
    questions, answers = _batch(rng, [3, 1, 6]), _batch(rng, [2, 5, 1])
    data = {question: questions, answer: answers}
    weights, cosines = _reference(questions, answers, w_q.value, w_a.value)
    assert_close(attn_q.eval({question: questions}), weights, rtol=1e-9)
    assert_close(cosine_dst.eval(data), cosines, rtol=1e-9)
    # Weighted, so that errors cannot cancel.
    loss = cosine_dst * C.constant(np.array([0.7]))
    g = loss.grad(data, wrt=[w_q, w_a, question])
    assert_close(g[w_q], parameter_numeric_gradient(loss, data, w_q), rtol=1e-5, atol=1e-8)
    assert_close(g[w_a], parameter_numeric_gradient(loss, data, w_a), rtol=1e-5, atol=1e-8)
    for i, q in enumerate(questions):
        assert_close(g[question][i], numeric_gradient(lambda: total(loss.eval(data)), q), rtol=1e-5, atol=1e-8)


def test_the_seed_program_runs_as_a_script(capsys):
    seed["main"]()
    out = capsys.readouterr().out
    assert "attention over question 2" in out and "sum 1.000" in out
