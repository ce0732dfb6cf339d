#!/usr/bin/env python3
"""Renders the README's results table from a `bench speed --export-json` file.

    python3 scripts/speed_table.py docs/results/ext4-virtio-2vcpu/speed.json

One row per test: the paired median of time ÷ `unix` with its 95 % interval for each of
`io_uring` and `sync` in each journal mode (bold: faster beyond the noise, italic:
slower), and the VFS's kernel entries against `unix`'s VFS I/O calls; then the geometric
mean of the paired medians per column.
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


def main(path):
    records = json.load(open(path))
    by = defaultdict(dict)
    names = {}
    for r in records:
        names[r["test"]] = r["name"]
        by[r["test"]][(r["target"], r["journal"])] = r
    present = [t for t in TARGETS if any((t, m) in by[test] for test in by for m, _ in MODES)]
    header = ["#", "test"]
    for mode, label in MODES:
        header += [f"`{t}` {label}" for t in present]
    header.append("kernel entries / `unix` calls")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---", "---"] + ["---:"] * (len(header) - 3) + ["---"]) + "|")
    logs = defaultdict(list)
    for test in sorted(by):
        row = [str(test), names[test]]
        for mode, _ in MODES:
            for t in present:
                r = by[test].get((t, mode))
                row.append(cell(r) if r else "–")
                if r and r.get("paired_median"):
                    logs[(t, mode)].append(math.log(r["paired_median"]))
        entries = []
        for mode, _ in MODES:
            ours = by[test].get(("io_uring", mode))
            unix = by[test].get(("unix", mode))
            if ours and unix and ours.get("kernel_entries") is not None:
                entries.append(f"{round(ours['kernel_entries'])} / {round(calls(unix))}")
            else:
                entries.append("–")
        row.append(" · ".join(entries))
        print("| " + " | ".join(row) + " |")
    geo = ["", "geometric mean of time ÷ `unix`"]
    for mode, _ in MODES:
        for t in present:
            values = logs[(t, mode)]
            geo.append(f"{math.exp(sum(values) / len(values)):.3f}" if values else "–")
    geo.append("")
    print("| " + " | ".join(geo) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
