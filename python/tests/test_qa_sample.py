"""samples/python/qa_similarity.py run as a user runs it: on small synthetic data it learns what
counting shared words cannot (the network's MAP above word overlap's), on small files it trains and
prints the C++ sample's table, its parameters are the C++ model's (names, shapes, creation order), and
bad input is a clear error."""

import os
import re
import subprocess
import sys

import pytest

import loom as C

HERE = os.path.dirname(__file__)
SAMPLES = os.path.join(HERE, "..", "..", "samples", "python")
SAMPLE = os.path.join(SAMPLES, "qa_similarity.py")


def run(*args):
    return subprocess.run([sys.executable, SAMPLE, *args], capture_output=True, text=True, env=dict(os.environ),
                          timeout=300)


def table(out):
    """{row name: (MAP, MRR)} of the printed results."""
    return {m.group(1).strip(): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^  (.+?)\s+(\d\.\d{4})  (\d\.\d{4})", out, re.M)}


def test_learns_more_than_word_overlap_on_synthetic_data():
    r = run("--questions", "300", "--epochs", "1", "--seed", "2")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    overlap, network = rows["word overlap (shared words)"], rows["network (cosine)"]
    # The wrong answers repeat question words, the true one does not: overlap is misled.
    assert network[0] > overlap[0] + 0.03, r.stdout
    assert "data: 270 training questions of synthetic data" in r.stdout
    assert len(re.findall(r"evaluation at step \d+ \(epoch 1\): held-out MAP", r.stdout)) == 2, r.stdout


def test_the_same_seed_gives_the_same_figures():
    a, b = run("--questions", "60", "--epochs", "1", "--hidden", "8", "--embed", "8", "--dense", "8"), \
        run("--questions", "60", "--epochs", "1", "--hidden", "8", "--embed", "8", "--dense", "8")
    assert a.returncode == 0, a.stderr
    assert table(a.stdout) == table(b.stdout) and table(a.stdout)


def test_trains_on_files(tmp_path):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    data = C.qa.make_synthetic_qa(questions=40, vocab=200, seed=5)
    rows = [f"{' '.join(p.question)}\t{' '.join(p.answer)}\t{p.label}" for p in data.pairs]
    train.write_text("\n".join(rows[:120]) + "\n")
    dev.write_text("\n".join(rows[120:]) + "\n")
    r = run("--train", str(train), "--eval", str(dev), "--epochs", "1", "--hidden", "8", "--embed", "8",
            "--dense", "8")
    assert r.returncode == 0, r.stderr
    assert f"10 questions of {dev}" in r.stdout and "network (cosine)" in table(r.stdout)


def test_bad_input_is_a_clear_error(tmp_path):
    r = run("--train", str(tmp_path / "missing.tsv"))
    assert r.returncode == 1 and "missing.tsv" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.tsv"
    bad.write_text("q ?\ta .\t1\nq ?\tb .\tyes\n")
    r = run("--train", str(bad))
    assert r.returncode == 1 and "bad.tsv:2" in r.stderr and "Traceback" not in r.stderr
    r = run("--epochs", "0")
    assert r.returncode == 2 and "--epochs" in r.stderr


def test_parameters_are_the_cpp_models():
    """Names, shapes and creation order of samples/qa_similarity/model.cpp's parameters, written out
    here from that file: eager ones at construction (each LSTM's U, the backward one first; Dense's b;
    attention_w), question tower then answer tower;
    then those made at the first call (embedding E, each LSTM's W and b, Dense's W)."""
    sys.path.insert(0, SAMPLES)
    try:
        import qa_similarity as sample
    finally:
        sys.path.remove(SAMPLES)
    m = sample.Model(100, 50, 64, 64)

    def eager(s):
        return [(f"{s}.backward.U", (64, 256)), (f"{s}.forward.U", (64, 256)), (f"{s}.dense.b", (64,)),
                (f"{s}.attention_w", (64, 1))]

    def lazy(s):  # W of [50 embedded + 6 features, 4 x 64]; dense W of [2 x 64, 64]
        return [(f"{s}.embedding.E", (100, 50)), (f"{s}.forward.W", (56, 256)), (f"{s}.forward.b", (256,)),
                (f"{s}.backward.W", (56, 256)), (f"{s}.backward.b", (256,)), (f"{s}.dense.W", (128, 64))]

    want = eager("question") + eager("answer") + lazy("question") + lazy("answer")
    assert [(p.name, tuple(p.shape)) for p in m.cosine.parameters] == want
