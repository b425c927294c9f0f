#!/usr/bin/python3
"""PyTorch's counterpart of long_sequence_bench: nn.LSTM(input, hidden) over ONE sequence of
--length steps (batch 1), forward and backward of the sum of its outputs, float32, one thread.
PyTorch keeps every step's gates and states for backward. Prints one JSON line: ms per step
(median of --iters timed runs after --warmup), forward alone, process CPU time per step, and the
process's peak RSS (VmHWM).
Run one process per length: the peak RSS is the process's.

    /usr/bin/python3 bench/torch_long_lstm.py --length 100000 [--input 100] [--hidden 300] [--iters 3]
"""
import argparse
import json
import statistics
import time

import torch


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--input", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=300)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(a.input, a.hidden)
    x = torch.randn(a.length, 1, a.input)  # [T, batch, input]

    def step():
        t0, c0 = time.perf_counter(), time.process_time()
        out, _ = lstm(x)
        t1 = time.perf_counter()
        lstm.zero_grad(set_to_none=True)
        out.sum().backward()
        return t1 - t0, time.perf_counter() - t0, time.process_time() - c0

    for _ in range(a.warmup):
        step()
    fwd, total, cpu = [], [], []
    for _ in range(a.iters):
        f, t, c = step()
        fwd.append(f)
        total.append(t)
        cpu.append(c)
    print(json.dumps({
        "bench": "torch_long_lstm", "torch": torch.__version__, "length": a.length, "input": a.input,
        "hidden": a.hidden, "iters": a.iters,
        "ms_per_step": round(1e3 * statistics.median(total) / a.length, 5),
        "forward_ms_per_step": round(1e3 * statistics.median(fwd) / a.length, 5),
        "cpu_ms_per_step": round(1e3 * statistics.median(cpu) / a.length, 5),
        "peak_rss_mib": round(peak_rss_mib(), 1),
    }))


if __name__ == "__main__":
    main()
