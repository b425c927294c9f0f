#!/usr/bin/python3
"""The PyTorch peer's QA training step under DistributedDataParallel (gloo), for bench/compare --distributed.

  torch_ddp_qa.py --procs 2 [torch_qa.py options: --steps --warmup --seed --batch --rnn ...] [--peer DIR]

Starts --procs processes on this machine (127.0.0.1), each with 1 torch thread and 1 BLAS thread.
Every process draws the same global batches with the peer's own generator (torch_qa.SyntheticQA,
same seed) and trains on its contiguous share of each (pairs [n r / P, n (r + 1) / P), padding trimmed to the
share's longest sequence), the model wrapped in DistributedDataParallel: gradients are averaged
over processes by gloo's allreduce, in buckets, while backward runs. Rank 0 prints one JSON line,
the peer's fields with the global pairs/s plus "procs".
"""
import os
import sys
import time

PEER = "/work/shared/peer"
PROCS = 2
argv = sys.argv[1:]
for flag in ("--peer", "--procs"):
    if flag in argv:
        k = argv.index(flag)
        if flag == "--peer":
            PEER = argv[k + 1]
        else:
            PROCS = int(argv[k + 1])
        del argv[k : k + 2]
# torch_qa parses sys.argv when imported: one thread per process.
sys.argv = ["torch_qa.py", "--threads", "1"] + argv
sys.path.insert(0, PEER)
import torch_qa  # noqa: E402

import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def share(b, rank, procs):
    n = b["q"].shape[0]
    lo, hi = n * rank // procs, n * (rank + 1) // procs
    out = {k: v[lo:hi] for k, v in b.items()}
    tq, ta = int(out["ql"].max()), int(out["al"].max())
    for k, t in (("q", tq), ("qmask", tq), ("a", ta), ("amask", ta)):
        out[k] = out[k][:, :t].contiguous()
    return out


def worker(rank, procs, port, queue):
    a = torch_qa.ARGS
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=procs)
    torch.manual_seed(a.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    data = torch_qa.SyntheticQA(a, a.seed)
    batches = [data.batch(a.batch) for _ in range(a.steps + a.warmup)]
    shares = [share(b, rank, procs) for b in batches]
    model = DistributedDataParallel(torch_qa.QAModel(a), find_unused_parameters=False)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    def step(b):
        opt.zero_grad(set_to_none=True)
        loss = torch_qa.loss_fn(model(b), b["y"], a)
        loss.backward()
        opt.step()
        return loss.item()

    losses = [step(shares[i]) for i in range(a.warmup)]
    dist.barrier()
    times = []
    cpu = time.process_time()  # every thread of the process, gloo's included
    start = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.steps):
        t0 = time.perf_counter()
        losses.append(step(shares[i]))
        times.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        real = sum(int(b["ql"].sum() + b["al"].sum()) for b in batches[a.warmup :])
        queue.put({
            "bench": "torch_qa_ddp", "torch": torch.__version__, "procs": procs, "threads": 1,
            "batch": a.batch, "steps": a.steps, "warmup": a.warmup, "rnn": a.rnn,
            "elapsed_s": round(elapsed, 4), "pairs_per_s": round(a.steps * a.batch / elapsed, 2),
            "tokens_per_step": round(real / a.steps, 1),
            "step_ms_median": round(1e3 * statistics.median(times), 3),
            "cpu_ms_per_step": round(1e3 * cpu / a.steps, 3),
            "first_loss": round(losses[0], 5), "final_loss": round(statistics.fmean(losses[-10:]), 5),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        })
    dist.destroy_process_group()


def main():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, PROCS, port, queue)) for r in range(PROCS)]
    for p in procs:
        p.start()
    result = queue.get()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit("torch_ddp_qa: a process failed (%d)" % p.exitcode)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
