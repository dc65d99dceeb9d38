#!/usr/bin/env python3
"""Where each engine step leaves a core idle, from a Go execution trace.

usage: scripts/traceidle.py TRACE STEPLOG

TRACE is a trace of the compiled demo benchmark and STEPLOG its step log:
  go test -c -o /tmp/demo.test ./demo
  ETHSTREAM_BENCH_WORKDIR=/work/seedbench ETHSTREAM_BENCH_STEPLOG=/tmp/steps.log \\
      /tmp/demo.test -test.run '^$' -test.bench 'SeedBackfillFile$' -test.benchtime 1x \\
      -test.trace /tmp/t.out
  scripts/traceidle.py /tmp/t.out /tmp/steps.log

It reads the trace through `go tool trace -d=parsed` and follows the Go
scheduler's Ps (GOMAXPROCS of them) and goroutines. Per step (the
STEPLOG's bounds, and any runtime/trace region a build adds) it prints the
wall, the Ps running on average, and the P-seconds left idle, split in two:

  lone:    no goroutine was runnable: the program had nothing for the P
           to do (a serial part: one goroutine working while the others
           wait for it, or for I/O);
  waking:  a goroutine was runnable but no P ran it yet (the scheduler's
           latency in waking a thread; it grows with the machine's load,
           since a woken thread waits for a CPU before its P counts as
           running).

For the lone time it names the goroutines that ran, each by its entry
function (the outermost frame of this module in its stacks): the serial
parts. Unlike CPU over wall, the "lone" figure is the program's own;
the shared machine's load still stretches everything, so compare runs
at a similar load.
"""
import bisect
import collections
import datetime
import re
import subprocess
import sys

HDR = re.compile(r"^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$")
GOST = re.compile(r"GoID=(\d+) (\w+)->(\w+)")
PST = re.compile(r"ProcID=(\d+) (\w+)->(\w+)")
MODULE = "github.com/ethstream/ethstream/"
# The tracer's own goroutines (and the CPU profiler's) are not the program's.
TOOLING = ("runtime.traceStartReadCPU", "runtime.(*traceAdvancerState)",
           "runtime/trace.(*traceMultiplexer).startLocked.func1", "runtime/pprof.profileWriter")


def wall_ns(rest):
    w = re.search(r"Wall=(\S+)", rest).group(1).rstrip("Z")
    base, _, frac = w.partition(".")
    dt = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp()) * 10**9 + int(frac.ljust(9, "0")[:9])


def parse(trace):
    """Returns the trace's events (time, kind, id, to), GC worker and
    tooling goroutines, each goroutine's entry function, the regions and
    the trace clock's offset to Unix time."""
    p = subprocess.Popen(["go", "tool", "trace", "-d=parsed", trace], stdout=subprocess.PIPE, text=True)
    events, regions, opened = [], [], {}
    gc, tooling, entry = set(), set(), {}
    sync = None
    cur = None  # goroutine whose transition stack is being read
    for line in p.stdout:
        if line.startswith("M="):
            cur = None
            m = HDR.match(line)
            if not m:
                continue
            kind, t, rest, g = m.group(4), int(m.group(5)), m.group(6), int(m.group(3))
            if kind == "Sync" and sync is None:
                sync = wall_ns(rest) - t
            elif kind == "StateTransition":
                s = GOST.search(rest)
                if s:
                    g = int(s.group(1))
                    events.append((t, "g", g, s.group(3)))
                    if s.group(2) == "NotExist":
                        entry.pop(g, None)  # a goroutine's ID may be re-used
                    # The stack is the emitting goroutine's (G=): the waker's
                    # when one goroutine readies another.
                    cur = int(m.group(3)) if int(m.group(3)) >= 0 else None
                    continue
                s = PST.search(rest)
                if s:
                    events.append((t, "p", int(s.group(1)), s.group(3)))
            elif kind == "Label" and 'Label="GC' in rest:
                r = re.search(r"Resource=Goroutine\((\d+)\)", rest)
                if r:
                    gc.add(int(r.group(1)))
            elif kind in ("RegionBegin", "RegionEnd"):
                name = re.search(r'Type="([^"]*)"', rest).group(1)
                if kind == "RegionBegin":
                    opened[(g, name)] = t
                elif (g, name) in opened:
                    regions.append((opened.pop((g, name)), t, name))
        elif cur is not None and " @ " in line:
            fn = line.strip().split(" @ ")[0]
            if fn.startswith(TOOLING):
                tooling.add(cur)
            elif fn.startswith(MODULE):
                entry[cur] = fn[len(MODULE):]  # the outermost one wins
    if p.wait() != 0:
        sys.exit("go tool trace -d=parsed failed")
    if sync is None:
        # The step log is in Unix time; only a Sync event's wall clock ties
        # the trace's clock to it (a trace cut short before its first one).
        sys.exit("the trace has no Sync event with a wall clock: it cannot be aligned with the step log")
    return events, gc, tooling, entry, regions, sync


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    events, gc, tooling, entry, regions, sync = parse(sys.argv[1])
    spans = []
    opened = {}
    with open(sys.argv[2]) as f:
        for line in f:
            ts, step, what = line.split()
            if what == "begin":
                opened[step] = int(ts) - sync
            elif step in opened:
                spans.append((opened.pop(step), int(ts) - sync, step))
    spans += regions
    # Span boundaries in time order: the open spans between two of them are
    # the ones a stretch of time counts for.
    bounds = sorted([(a, 1, n) for a, b, n in spans] + [(b, -1, n) for a, b, n in spans])
    active = collections.Counter()
    procs, gs = {}, {}
    running = set()
    runnable = 0
    nprocs = 0
    width = collections.Counter()  # span name -> P-ns running
    lone = collections.Counter()
    waking = collections.Counter()
    walls = collections.Counter()
    who = collections.defaultdict(collections.Counter)
    for a, b, name in spans:
        walls[name] += b - a

    def account(d):
        busy = sum(1 for v in procs.values() if v == "Running")
        idle = max(0, nprocs - busy)
        for name, k in active.items():
            if k <= 0:
                continue
            width[name] += busy * d
            if idle and runnable:
                waking[name] += idle * d
            elif idle:
                lone[name] += idle * d
                for g in running:
                    fn = entry.get(g, "?")
                    who[name][fn + " (in a syscall)" if gs.get(g) == "Syscall" else fn] += d

    last, bi = None, 0
    for t, what, ident, to in events:
        while bi < len(bounds) and bounds[bi][0] <= t:
            bt, delta, name = bounds[bi]
            if last is not None and bt > last:
                account(bt - last)
                last = bt
            active[name] += delta
            bi += 1
        if last is not None and t > last:
            account(t - last)
        last = t
        if what == "p":
            procs[ident] = to
            nprocs = max(nprocs, len(procs))
            continue
        if ident in tooling:
            continue
        if gs.get(ident) == "Runnable":
            runnable -= 1
        if to == "Runnable":
            runnable += 1
        gs[ident] = to
        running.discard(ident)
        if to in ("Running", "Syscall") and ident not in gc:
            running.add(ident)
    print(f"| step or region | wall s | Ps running (of {nprocs}) | idle P-s, lone | idle P-s, waking | lone: who ran (s) |")
    print("|---|---|---|---|---|---|")
    for name in sorted(walls, key=lambda n: -walls[n]):
        w = walls[name]
        if w < 1e7:
            continue
        top = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in who[name].most_common(3))
        print(f"| {name} | {w / 1e9:.3f} | {width[name] / w:.2f} | {lone[name] / 1e9:.3f} | {waking[name] / 1e9:.3f} | {top} |")


if __name__ == "__main__":
    main()
