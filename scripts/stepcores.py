#!/usr/bin/env python3
"""Cores each engine step wanted, sampled from outside the process.

usage: scripts/stepcores.py COMMAND [ARG...]

Runs COMMAND (e.g. the compiled demo benchmark:
  go test -c -o /tmp/demo.test ./demo
  ETHSTREAM_BENCH_WORKDIR=/work/seedbench scripts/stepcores.py \
      /tmp/demo.test -test.run '^$' -test.bench SeedBackfillFile -test.benchtime 1x)
with ETHSTREAM_BENCH_STEPLOG set to a temporary file, where the benchmark
logs each step's begin and end, and samples every millisecond or so how
many of its threads are in state R (running, or runnable and waiting for
a CPU) in /proc/PID/task. Per step it prints the mean of those counts,
capped at the CPU count: the cores the step could keep busy. Unlike the
step's CPU over its wall, the shared machine's other load does not lower
it, and unlike a sampler inside the Go process it is not starved when
every P is busy. A thread blocked in I/O (state D, an fsync) is not
counted: a step waiting on the disk wants no core.
"""
import bisect
import collections
import os
import subprocess
import sys
import tempfile
import time


def sample(p):
    task = f"/proc/{p.pid}/task"
    out = []
    while p.poll() is None:
        try:
            tids = os.listdir(task)
        except FileNotFoundError:
            break
        n = 0
        for t in tids:
            try:
                with open(f"{task}/{t}/stat") as f:
                    s = f.read()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if s[s.rfind(")") + 2] == "R":
                n += 1
        out.append((time.time_ns(), n))
        time.sleep(0.001)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cpus = os.cpu_count() or 1
    with tempfile.NamedTemporaryFile("r", suffix=".steps") as log:
        env = dict(os.environ, ETHSTREAM_BENCH_STEPLOG=log.name)
        p = subprocess.Popen(sys.argv[1:], env=env)
        samples = sample(p)
        if p.wait() != 0:
            sys.exit(f"{sys.argv[1]} exited with {p.returncode}")
        bounds = []
        for line in log:
            t, step, what = line.split()
            bounds.append((int(t), step if what == "begin" else "outside steps"))
    if not bounds:
        sys.exit("no step was logged: does the command honour ETHSTREAM_BENCH_STEPLOG?")
    ts = [b[0] for b in bounds]
    total = collections.defaultdict(int)
    count = collections.defaultdict(int)
    for t, n in samples:
        i = bisect.bisect_right(ts, t) - 1
        if i < 0 or i == len(ts) - 1 and bounds[i][1] == "outside steps":
            continue
        total[bounds[i][1]] += min(n, cpus)
        count[bounds[i][1]] += 1
    print(f"| step | samples | cores wanted (threads in state R, at most {cpus}) |")
    print("|---|---|---|")
    for step in sorted(count):
        print(f"| {step} | {count[step]} | {total[step] / count[step]:.2f} |")


if __name__ == "__main__":
    main()
