#!/usr/bin/env python3
"""Tables of `bench io --wal` results (wal-dsync.json) for docs/FILESYSTEMS.md.

Usage: scripts/wal_dsync_tables.py RESULT_DIR [RESULT_DIR ...]

For each directory's wal-dsync.json it prints two Markdown tables: per commit size and
space, the median over the rounds of each method's run time (then of each run's median
commit time, which ignores the slow tail other users of a shared disk add) divided by
another method's in the same round, with the sign test's distribution-free 95 % interval (the same
statistics as `bench io`'s "paired time ratio"). A ratio below 1 is faster; a ratio is
marked bold when its whole interval lies below or above 1. Besides every method against
`unix`, two comparisons isolate the effects: `direct_dsync` against `coalesced` (O_DIRECT
+ RWF_DSYNC against what the io_uring VFS does today: the commit as one buffered write +
fdatasync) and `direct_dsync` against `direct_fdatasync` (RWF_DSYNC itself: the same
O_DIRECT write, with the flush folded into it or as a separate fdatasync).
"""
import json
import math
import sys
from pathlib import Path

CONFIDENCE = 0.95


def binomial_half_cdf(n, k):
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2**n


def paired(samples, baseline):
    ratios = sorted(s / b for s, b in zip(samples, baseline))
    n = len(ratios)
    mid = n // 2
    median = ratios[mid] if n % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    tail = (1 - CONFIDENCE) / 2
    k = 0
    while k < n // 2 and binomial_half_cdf(n, k) <= tail:
        k += 1
    if k == 0:
        return median, None
    return median, (ratios[k - 1], ratios[n - k])


def cell(samples, baseline):
    median, interval = paired(samples, baseline)
    if interval is None:
        return f"{median:.2f}"
    low, high = interval
    text = f"{median:.2f} [{low:.2f}, {high:.2f}]"
    if high < 1 or low > 1:
        text = f"**{text}**"
    return text


def table(path, metric):
    report = json.loads(path.read_text())[0]
    runs = report["runs"]
    times = {}
    for run in runs:
        key = (run["wal_method"], run["commit_frames"], run["space"])
        times.setdefault(key, []).append((run["round"], run[metric]))
    for key in times:
        times[key] = [t for _, t in sorted(times[key])]
    methods = []
    for run in runs:
        if run["wal_method"] not in methods:
            methods.append(run["wal_method"])
    groups = []
    for run in runs:
        group = (run["commit_frames"], run["space"])
        if group not in groups:
            groups.append(group)
    groups.sort(key=lambda g: (g[1] != "reused", g[0]))
    others = [m for m in methods if m != "unix"]
    extra = [("direct_dsync", "coalesced"), ("direct_dsync", "direct_fdatasync")]
    extra = [(a, b) for a, b in extra if a in methods and b in methods]
    header = ["frames", "space", "unix p50 commit"] + [f"{m} / unix" for m in others]
    header += [f"{a} / {b}" for a, b in extra]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for frames, space in groups:
        base = times[("unix", frames, space)]
        p50s = sorted(
            r["commit_p50_us"]
            for r in runs
            if r["wal_method"] == "unix" and r["commit_frames"] == frames and r["space"] == space
        )
        row = [str(frames), space, f"{p50s[len(p50s) // 2]:.0f} µs"]
        row += [cell(times[(m, frames, space)], base) for m in others]
        row += [cell(times[(a, frames, space)], times[(b, frames, space)]) for a, b in extra]
        lines.append("| " + " | ".join(row) + " |")
    rounds = report["rounds"]
    commits = report["commits"]
    what = "run time" if metric == "seconds" else "median commit time of the run"
    return f"{rounds} rounds × {commits} commits per run; ratios of the {what}\n\n" + "\n".join(lines)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for directory in sys.argv[1:]:
        path = Path(directory) / "wal-dsync.json"
        print(f"#### {Path(directory).name}\n")
        for metric in ("seconds", "commit_p50_us"):
            print(table(path, metric))
            print()


if __name__ == "__main__":
    main()
