"""A character-level GPT trained on a text and sampled from, in one file: nanoGPT's train.py and
sample.py for its Shakespeare-char configuration, over loom's engine from Python. The C++ sample
samples/lm trains the same model with the same recipe (`lm --train FILE`); the two agree in sizes,
schedule, decay groups, clipping and held-out part, so their figures compare.

    PYTHONPATH=build/python python3 samples/python/char_gpt.py \\
        --train ../shared/data/tinyshakespeare/train.txt --minutes 30 --threads 2 --save gpt.safetensors
    PYTHONPATH=build/python python3 samples/python/char_gpt.py \\
        --train ../shared/data/tinyshakespeare/train.txt --load gpt.safetensors --generate 500 --prompt "ROMEO:"
"""

import argparse
import math
import sys
import time

import numpy as np

import loom as C


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--train", required=True, help="UTF-8 text; its characters are the vocabulary")
    p.add_argument("--holdout", type=float, default=0.05, help="the end of --train kept out of training, scored")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--width", type=int, default=192)
    p.add_argument("--block", type=int, default=128, help="context length in characters")
    p.add_argument("--batch", type=int, default=12, help="windows per iteration")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--iterations", type=int, default=2000, help="training iterations (unless --minutes)")
    p.add_argument("--untimed-iterations", type=int, default=0, help="first iterations left out of trained: (benches)")
    p.add_argument("--minutes", type=float, default=0, help="train for this long; the schedule spans the time")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--min-learning-rate", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=2000, help="score the held-out part (0: at the end only)")
    p.add_argument("--eval-windows", type=int, default=0, help="held-out windows scored (0: all of it)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--matmul-precision", choices=["highest", "medium"], default="medium")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save", help="write the trained weights (the best-scoring) here, as safetensors")
    p.add_argument("--load", help="start from these weights (safetensors) instead of training")
    p.add_argument("--generate", type=int, default=300, help="characters to sample after the prompt")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=0)
    return p.parse_args()


def windows(ids, starts, block):
    """Inputs and next-character targets of the windows at `starts`, as padded [N, block, 1] ids."""
    rows = np.stack([ids[s:s + block + 1] for s in starts]).astype(np.float32)
    lengths = [block] * len(starts)
    return (C.Value.item_major_sequences(rows[:, :-1, None], lengths),
            C.Value.item_major_sequences(rows[:, 1:, None], lengths))


def held_out_nats(trainer, symbols, targets, ids, block, limit):
    """Mean nats per character over consecutive windows of the held-out ids, the last one shorter,
    each character predicted from the earlier ones of its window (as `lm` scores), products in float."""
    starts = list(range(0, len(ids) - 1, block))[:limit or None]
    total, count = 0.0, 0
    with C.matmul_precision("highest"):
        for i in range(0, len(starts), 32):
            pieces = [ids[s:min(s + block, len(ids) - 1) + 1].astype(np.float32)[:, None] for s in starts[i:i + 32]]
            steps = sum(len(p) - 1 for p in pieces)
            mean = trainer.test_minibatch({symbols: C.Value.sequences([p[:-1] for p in pieces]),
                                           targets: C.Value.sequences([p[1:] for p in pieces])})
            total, count = total + mean * steps, count + steps
    return total / count


def main():
    a = arguments()
    text = open(a.train, encoding="utf-8").read()
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    held = int(len(ids) * a.holdout)
    train, valid = ids[:len(ids) - held], ids[len(ids) - held:]
    if len(train) <= a.block + 1 or len(valid) <= a.block + 1:
        sys.exit(f"char_gpt: --train {a.train} holds {len(ids)} characters: too few for --block {a.block} "
                 f"and --holdout {a.holdout}")
    unknown = sorted(set(a.prompt) - set(alphabet))
    if a.generate and unknown:
        sys.exit(f"char_gpt: --prompt holds characters the text has not: {unknown}")
    C.set_seed(a.seed)
    C.set_inter_op_threads(a.threads)
    C.set_matmul_precision(a.matmul_precision)

    model = C.layers.TransformerLM(len(alphabet), C.layers.TransformerOptions.gpt(
        a.layers, a.heads, a.width, a.block, a.dropout))
    steps = C.SequenceAxis()
    symbols = C.sequence.input_variable(1, sequence_axis=steps, name="symbols")
    targets = C.sequence.input_variable(1, sequence_axis=steps, name="targets")
    logits = model(symbols)
    loss = C.cross_entropy_with_softmax(logits, C.one_hot(targets, len(alphabet)))
    print(f"data: {len(ids)} characters ({len(alphabet)} distinct), {held} held out; model: {a.layers} layers "
          f"of {a.width}, {a.heads} heads, context {a.block}, "
          f"{sum(p.value.size for p in model.parameters)} parameters")

    # nanoGPT's recipe: AdamW (decay on matrices only), linear warm-up, then a cosine to the minimum
    # rate over the iterations or the time budget (counted from the first iteration, as lm's).
    begin = math.nan

    def rate(step):
        if step < a.warmup:
            return a.learning_rate * (step + 1) / a.warmup
        done = ((time.monotonic() - begin) / (60 * a.minutes) if a.minutes else
                (step - a.warmup) / max(1, a.iterations - a.warmup))
        cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, done)))
        return a.min_learning_rate + (a.learning_rate - a.min_learning_rate) * cosine

    learner = C.adamw(model.parameters, C.LearningRate(rate), beta1=0.9, beta2=a.beta2, weight_decay=a.weight_decay,
                      gradient_clipping_threshold_per_sample=a.clip or math.inf, decay_matrices_only=True)
    trainer = C.Trainer(logits, loss, learner)

    best, best_weights = math.inf, []
    if a.load:
        C.load_safetensors(a.load, model.parameters)
    else:
        draw = np.random.default_rng(a.seed)
        iteration, eval_seconds = 0, 0.0
        begin = timed_from = time.monotonic()
        while (time.monotonic() - begin < 60 * a.minutes) if a.minutes else iteration < a.iterations:
            x, y = windows(train, draw.integers(0, len(train) - a.block - 1, a.batch), a.block)
            trainer.train_minibatch({symbols: x, targets: y})
            iteration += 1
            if iteration == a.untimed_iterations:
                timed_from, eval_seconds = time.monotonic(), 0.0
            if iteration % 100 == 0:
                print(f"iteration {iteration} ({(time.monotonic() - begin) / 60:.1f} min): loss "
                      f"{trainer.previous_minibatch_loss_average:.4f}, learning rate {learner.learning_rate():.2e}",
                      flush=True)
            if a.eval_every and iteration % a.eval_every == 0:
                started = time.monotonic()
                nats = held_out_nats(trainer, symbols, targets, valid, a.block, a.eval_windows)
                print(f"iteration {iteration}: held-out {nats:.4f} nats per character", flush=True)
                if nats < best:  # nanoGPT's train.py keeps the best-scoring weights, as lm does
                    best, best_weights = nats, [p.value.copy() for p in model.parameters]
                eval_seconds += time.monotonic() - started
        seconds = time.monotonic() - timed_from - eval_seconds  # training's own time, as lm reports it
        timed = max(0, iteration - a.untimed_iterations)
        tokens = timed * a.batch * a.block
        print(f"trained: {timed} iterations, {tokens} tokens in {seconds:.3f} s, "
              f"{tokens / seconds if timed else 0.0:.1f} tokens/s")
    nats = held_out_nats(trainer, symbols, targets, valid, a.block, a.eval_windows)
    if nats > best:
        for p, w in zip(model.parameters, best_weights):
            p.value = w
        nats = best
    print(f"held-out: {nats:.4f} nats per character ({nats / math.log(2):.4f} bits)")
    if a.save:
        C.save_safetensors(a.save, model.parameters)

    if a.generate:
        prompt = [index[c] for c in a.prompt]
        sys.stdout.write(a.prompt)
        for symbol in model.stream(prompt, a.generate, sample=True, temperature=a.temperature, top_k=a.top_k,
                                   seed=a.seed):
            sys.stdout.write(alphabet[symbol])
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
