#!/usr/bin/python3
"""What a call costs from Python beyond the same call from C++: f.eval({x: data}) and
f.grad({x: data}) of y = x * x + x over one sample (or one sequence) of a few numbers, timed in this
process and, alternating with it, by build/bench/call_bench (the same graph and data through
loom's evaluate() and gradients() in C++). A graph this small does almost no work, so the
difference is the package's own cost per call: converting the dict and the arrays, checking them,
and making numpy arrays of the results.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call_bench.py [--calls 20000] [--repeats 3]
        [--call-bench build/bench/call_bench]

Prints a markdown table: per kind (one sample; one sequence of 5 steps) and call, the median
(min-max) microseconds per call of each side over the repeats, and Python's added microseconds.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import loom as C

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LINE = re.compile(r"^(eval|grad): ([0-9.]+) us per call", re.M)


def python_side(length, width, calls, warmup):
    """Microseconds per eval and per grad call from Python."""
    x = C.sequence.input_variable(width, name="x") if length else C.input_variable(width, name="x")
    y = x * x + x
    data = [np.random.default_rng(1).standard_normal((length, width)).astype(np.float32)] if length else \
        np.random.default_rng(1).standard_normal((1, width)).astype(np.float32)
    out = {}
    for kind, call in (("eval", lambda: y.eval({x: data})), ("grad", lambda: y.grad({x: data}, wrt=[x]))):
        for _ in range(warmup):
            call()
        begin = time.perf_counter()
        for _ in range(calls):
            call()
        out[kind] = 1e6 * (time.perf_counter() - begin) / calls
    return out


def cpp_side(binary, length, width, calls, warmup):
    """Microseconds per eval and per grad call from C++ (call_bench)."""
    text = subprocess.run([binary, "--calls", str(calls), "--warmup", str(warmup), "--width", str(width),
                           "--length", str(length)], check=True, capture_output=True, text=True).stdout
    return {kind: float(us) for kind, us in LINE.findall(text)}


def summary(values):
    return "%.2f (%.2f-%.2f)" % (statistics.median(values), min(values), max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--call-bench", default=os.path.join(ROOT, "build", "bench", "call_bench"))
    a = p.parse_args()
    if not os.access(a.call_bench, os.X_OK):
        p.error("no C++ program at %s (build the call_bench target, or give --call-bench)" % a.call_bench)
    if min(a.calls, a.repeats, a.width) < 1 or a.warmup < 0:
        p.error("--calls, --repeats and --width must be at least 1, --warmup at least 0")
    C.set_blas_threads(1)
    print("| data | call | C++ us per call | Python us per call | Python's added us | load before |")
    print("|---|---|---|---|---|---|")
    for length, what in ((0, "one sample of %d" % a.width), (5, "one sequence of 5 x %d" % a.width)):
        runs = {"cpp": {"eval": [], "grad": []}, "python": {"eval": [], "grad": []}}
        loads = []
        for r in range(a.repeats):
            loads.append(os.getloadavg()[0])
            sides = [("cpp", lambda: cpp_side(a.call_bench, length, a.width, a.calls, a.warmup)),
                     ("python", lambda: python_side(length, a.width, a.calls, a.warmup))]
            for name, run in (sides if r % 2 == 0 else sides[::-1]):  # who goes first alternates
                for kind, us in run().items():
                    runs[name][kind].append(us)
        for kind in ("eval", "grad"):
            cpp, py = runs["cpp"][kind], runs["python"][kind]
            print("| %s | %s | %s | %s | %.2f | %s |" % (what, kind, summary(cpp), summary(py),
                                                         statistics.median(py) - statistics.median(cpp),
                                                         ", ".join("%.2f" % x for x in loads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
