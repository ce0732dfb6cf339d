#!/usr/bin/env python3
"""Renders the results table of the README (or, with --unix-times, of docs/BENCH_SPEED.md)
from a `bench speed --export-json` file.

    python3 scripts/speed_table.py docs/results/ext4-virtio-2vcpu/speed.json
    python3 scripts/speed_table.py --unix-times docs/results/ext4-virtio-2vcpu/speed.json

One row per test: the paired median of time ÷ `unix` with its 95 % interval for each of
`io_uring` and `sync` in each journal mode (bold: faster beyond the noise, italic:
slower), and the VFS's kernel entries against `unix`'s VFS I/O calls (with --unix-times:
`unix`'s median time in each mode instead); then the geometric mean of the paired
medians per column.
"""

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from filesystems_tables import cell  # noqa: E402  (one rendering of a paired cell)

MODES = [("delete", "rollback"), ("wal", "WAL")]
TARGETS = ["io_uring", "sync"]


def calls(record):
    return sum(record.get(k) or 0 for k in ("read_calls", "write_calls", "sync_calls"))


def main(path, unix_times=False):
    records = json.load(open(path))
    by = defaultdict(dict)
    names = {}
    for r in records:
        names[r["test"]] = r["name"]
        by[r["test"]][(r["target"], r["journal"])] = r
    present = [t for t in TARGETS if any((t, m) in by[test] for test in by for m, _ in MODES)]
    header = ["#", "test"]
    for mode, label in MODES:
        if unix_times:
            header.append(f"`unix` {label}")
        header += [f"`{t}` {label}" for t in present]
    if not unix_times:
        header.append("kernel entries / `unix` calls")
    print("| " + " | ".join(header) + " |")
    last = "---:" if unix_times else "---"
    print("|" + "|".join(["---", "---"] + ["---:"] * (len(header) - 3) + [last]) + "|")
    logs = defaultdict(list)
    for test in sorted(by):
        row = [str(test), names[test]]
        for mode, _ in MODES:
            unix = by[test].get(("unix", mode))
            if unix_times:
                row.append(f"{unix['median_s'] * 1000:.1f} ms" if unix else "–")
            for t in present:
                r = by[test].get((t, mode))
                row.append(cell(r) if r else "–")
                if r and r.get("paired_median"):
                    logs[(t, mode)].append(math.log(r["paired_median"]))
        entries = []
        for mode, _ in MODES if not unix_times else []:
            ours = by[test].get(("io_uring", mode))
            unix = by[test].get(("unix", mode))
            if ours and unix and ours.get("kernel_entries") is not None:
                entries.append(f"{round(ours['kernel_entries'])} / {round(calls(unix))}")
            else:
                entries.append("–")
        if not unix_times:
            row.append(" · ".join(entries))
        print("| " + " | ".join(row) + " |")
    geo = ["", "geometric mean of time ÷ `unix`"]
    for mode, _ in MODES:
        if unix_times:
            geo.append("")
        for t in present:
            values = logs[(t, mode)]
            geo.append(f"{math.exp(sum(values) / len(values)):.3f}" if values else "–")
    if not unix_times:
        geo.append("")
    print("| " + " | ".join(geo) + " |")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    with_times = "--unix-times" in arguments
    files = [a for a in arguments if a != "--unix-times"]
    if len(files) != 1:
        sys.exit("usage: speed_table.py [--unix-times] SPEED.json")
    main(files[0], with_times)
