#!/usr/bin/python3
"""Scoring throughput of the PyTorch peer's QA model (torch_qa.py) under torch.no_grad().

  /usr/bin/python3 bench/torch_score.py --batches-from FILE [--pairs 10000] [--threads 1]
                                        [--torch-threads N] [--peer /work/shared/peer] [--rnn packed]

The counterpart of qa_score_bench: the same pairs (FILE is written by bench/compare --dump-batches),
the peer's own model and initialisation, model.eval(), forward only, every input tensor built before
timing, one untimed pass over the first batch. Prints one JSON line (pairs_per_s, peak RSS, ...).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches-from", required=True)
    p.add_argument("--pairs", type=int, default=10000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--torch-threads", type=int, default=None)
    p.add_argument("--peer", default="/work/shared/peer")
    p.add_argument("--rnn", default="packed", choices=["packed", "padded"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1)
    return p.parse_args()


def read_batches(path, limit):
    batches, pairs = [], 0
    with open(path) as f:
        if not f.readline().startswith("loom-qa-batches 1"):
            sys.exit("torch_score: %s: expected the header 'loom-qa-batches 1'" % path)
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("batch "):
                if pairs >= limit:
                    break
                batches.append([])
                continue
            if pairs >= limit:
                continue
            label, rest = line.split(" ", 1)
            q, a = rest.split(" | ")
            batches[-1].append((float(label), [int(t) for t in q.split()], [int(t) for t in a.split()]))
            pairs += 1
    if pairs < limit:
        sys.exit("torch_score: %s holds %d pairs, --pairs asks for %d" % (path, pairs, limit))
    return batches, pairs


def main():
    a = parse_args()
    # torch_qa parses sys.argv when imported and sizes the thread pools before importing torch.
    sys.path.insert(0, a.peer)
    sys.argv = ["torch_qa.py", "--threads", str(a.threads), "--seed", str(a.seed), "--rnn", a.rnn]
    if a.torch_threads:
        sys.argv += ["--torch-threads", str(a.torch_threads)]
    import torch_qa
    import torch

    args = torch_qa.ARGS
    torch.manual_seed(args.seed)
    raw, pairs = read_batches(a.batches_from, a.pairs)

    def tensors(batch):
        q, ql = torch_qa.SyntheticQA._pad([p[1] for p in batch])
        an, al = torch_qa.SyntheticQA._pad([p[2] for p in batch])
        return dict(q=q, ql=ql, qmask=torch.arange(q.shape[1])[None, :] < ql[:, None], a=an, al=al,
                    amask=torch.arange(an.shape[1])[None, :] < al[:, None])

    batches = [tensors(b) for b in raw]
    tokens = sum(len(p[1]) + len(p[2]) for b in raw for p in b)
    model = torch_qa.QAModel(args)
    model.eval()
    batch_ms, cos_sum = [], 0.0
    with torch.no_grad():
        model(batches[0])
        start = time.perf_counter()
        for _ in range(a.repeats):
            for b in batches:
                t0 = time.perf_counter()
                cos_sum += float(model(b).sum())
                batch_ms.append(1e3 * (time.perf_counter() - t0))
        elapsed = time.perf_counter() - start
    scored = pairs * a.repeats
    print(json.dumps({
        "bench": "torch_qa_score", "torch": torch.__version__, "threads": a.threads,
        "torch_threads": torch_qa.TORCH_THREADS, "rnn": a.rnn, "pairs": pairs, "batch": len(raw[0]),
        "repeats": a.repeats, "elapsed_s": round(elapsed, 4), "pairs_per_s": round(scored / elapsed, 1),
        "tokens_per_s": round(tokens * a.repeats / elapsed, 1), "tokens_per_pair": round(tokens / pairs, 2),
        "batch_ms_median": round(statistics.median(batch_ms), 3), "mean_cosine": round(cos_sum / scored, 6),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
    }))


if __name__ == "__main__":
    main()
