#!/usr/bin/python3
"""Whole training steps of the QA model from loom's Python package: bench/qa_train_bench (its C++
counterpart) written with `import loom as C`, for bench/compare --python. The same model (per side
Embedding 500 -> BiRecurrence(LSTM 300, LSTM 300) -> Dense 200 -> attention as a log-sum-exp
recurrence; the cosine of the two sides; (cos - label)^2 averaged over the batch; Adam 1e-3), its
parameters made with the C++ model's names, shapes, initializers and order, so one seed starts both
from the same weights and their losses can be compared step by step. Every batch is made into loom
Values before timing (as the C++ bench and the peer do); the first --warmup steps are not timed.
Prints one JSON line with qa_train_bench's main fields.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_qa_train_bench.py --batches-from FILE
        [--threads N] [--steps 30] [--warmup 3] [--seed 1] [--batch 32] [--lazy-adam]

FILE is what `bench/compare --dump-batches FILE` writes (the peer's batches); its format is in
bench/qa_batches.hpp.
"""
import argparse
import importlib.util
import json
import os
import resource
import sys
import time

import numpy as np

import loom as C


def read_batches(path, vocab):
    """The batches of a `loom-qa-batches 1` file: (questions, answers, labels) each."""
    batches = []
    with open(path, encoding="ascii") as f:
        if f.readline().strip() != "loom-qa-batches 1":
            sys.exit(f"python_qa_train_bench: {path}:1: expected the header 'loom-qa-batches 1'")
        for number, line in enumerate(f, start=2):
            if not line.strip():
                continue
            if line.startswith("batch "):
                batches.append(([], [], []))
                continue
            label, rest = line.split(" ", 1)
            question, answer = rest.split(" | ")
            q, a = [int(t) for t in question.split()], [int(t) for t in answer.split()]
            if not q or not a or max(q + a) >= vocab:
                sys.exit(f"python_qa_train_bench: {path}:{number}: a pair needs ids below {vocab} on both sides")
            batches[-1][0].append(np.array(q, np.float32)[:, None])
            batches[-1][1].append(np.array(a, np.float32)[:, None])
            batches[-1][2].append(float(label))
    return batches


def sample_model():
    """samples/python/qa_similarity.py, whose Tower this bench trains (as qa_train_bench links the C++
    sample's model)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "python",
                        "qa_similarity.py")
    spec = importlib.util.spec_from_file_location("qa_similarity_sample", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches-from", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--embed", type=int, default=500)
    p.add_argument("--hidden", type=int, default=300)
    p.add_argument("--dense", type=int, default=200)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--lazy-adam", action="store_true")
    a = p.parse_args()
    if min(a.threads, a.steps, a.batch, a.embed, a.hidden, a.dense, a.vocab) < 1 or a.warmup < 0:
        p.error("sizes, --threads and --steps must be at least 1, --warmup at least 0")
    C.set_inter_op_threads(a.threads)  # independent plan steps at once, as qa_train_bench's "steps"
    if a.threads == 1:
        C.set_blas_threads(1)
    C.set_seed(a.seed)
    needed = a.warmup + a.steps
    batches = read_batches(a.batches_from, a.vocab)
    if len(batches) < needed:
        sys.exit(f"python_qa_train_bench: {a.batches_from} holds {len(batches)} batches, --warmup + --steps need {needed}")

    question, answer = C.sequence.input_variable(1, name="question"), C.sequence.input_variable(1, name="answer")
    label = C.input_variable(1, name="label")
    # The C++ tower of qa::ModelOptions' defaults: no overlap features, no dropout.
    Tower = sample_model().Tower
    towers = [Tower(a.vocab, a.embed, a.hidden, a.dense, side, dropout=0, features=False)
              for side in ("question", "answer")]
    cosine = C.cosine_distance(towers[0](question)[0], towers[1](answer)[0], name="cosine")
    loss = C.square(cosine - label)
    learner = C.adam(cosine.parameters, lr=1e-3, momentum=0.9, variance_momentum=0.999, epsilon=1e-8,
                     lazy_sparse_rows=a.lazy_adam)
    trainer = C.Trainer(cosine, loss, [learner])
    inputs = [{question: C.Value.sequences(qs), answer: C.Value.sequences(ans),
               label: np.array(labels, np.float32)[:, None]} for qs, ans, labels in batches[:needed]]

    losses = []
    for data in inputs[:a.warmup]:
        trainer.train_minibatch(data)
        losses.append(trainer.previous_minibatch_loss_average)
    step_ms, real = [], 0
    cpu0, begin = time.process_time(), time.perf_counter()
    for (qs, ans, _), data in zip(batches[a.warmup:needed], inputs[a.warmup:]):
        t0 = time.perf_counter()
        trainer.train_minibatch(data)
        step_ms.append(1e3 * (time.perf_counter() - t0))
        losses.append(trainer.previous_minibatch_loss_average)
        real += sum(len(x) for x in qs) + sum(len(x) for x in ans)
    elapsed, cpu = time.perf_counter() - begin, time.process_time() - cpu0
    print(json.dumps({
        "bench": "loom_python_qa", "threads": a.threads, "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
        "seed": a.seed, "lazy_adam": a.lazy_adam, "params": sum(p.value.size for p in cosine.parameters),
        "elapsed_s": round(elapsed, 4), "steps_per_s": a.steps / elapsed, "pairs_per_s": a.steps * a.batch / elapsed,
        "tokens_per_s": real / elapsed, "tokens_per_step": real / a.steps,
        "step_ms_median": float(np.median(step_ms)), "step_ms_min": min(step_ms), "step_ms_max": max(step_ms),
        "first_loss": losses[0], "final_loss": float(np.mean(losses[-10:])),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "cpu_ms_per_step": 1e3 * cpu / a.steps, "losses": losses}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
