#!/usr/bin/env python3
"""Markdown tables of one filesystem's results, as docs/FILESYSTEMS.md shows them.

Usage: filesystems_tables.py RESULT_DIR > RESULT_DIR/summary.md

RESULT_DIR holds what scripts/filesystems.sh wrote there: probe.txt, io-buffered.json,
io-direct.json, speed.json. Every number printed comes from those files.
"""

import json
import math
import sys
from pathlib import Path

TARGET_LABELS = {
    "io_uring": "`io_uring`",
    "sync": "`sync`",
    "io_uring?uring_writes=ring": "writes=ring",
    "io_uring?uring_reads=ring": "reads=ring",
    "io_uring?uring_syncs=ring": "syncs=ring",
    "io_uring?uring_direct=on": "direct=on",
}
JOURNALS = [("delete", "rollback"), ("wal", "WAL")]


def probe_section(directory: Path) -> list[str]:
    path = directory / "probe.txt"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("directory:"))
    return ["`sqlite-uring probe --dir`:", "", "```", *lines[start + 1 :], "```", ""]


def io_section(directory: Path) -> list[str]:
    out = []
    for mode in ("buffered", "direct"):
        path = directory / f"io-{mode}.json"
        if not path.exists():
            continue
        run = json.loads(path.read_text())[0]
        size_mib = run["size_bytes"] / (1 << 20)
        title = "O_DIRECT, preallocated, registered buffers" if run["direct"] else "buffered"
        out += [
            f"`bench io`, {title}: {size_mib:.0f} MiB in 4 KiB writes, one thread, "
            f"`fdatasync` at the end, {run['rounds']} rounds (MB/s = 10⁶ B/s):",
            "",
            "| method | MB/s, mean (min–max) | speed-up vs `pwrite` (mean times) | most `iou-wrk` seen |",
            "|---|---:|---:|---:|",
        ]
        for summary in run["summaries"]:
            rate = summary["throughput_bytes_per_s"]
            method = (
                "pwrite"
                if summary["kind"] == "pwrite"
                else f"io_uring refill, E={summary['entries']}"
            )
            ratio = summary["speedup_vs_baseline"]["ratio"]
            out.append(
                f"| {method} | {rate['mean'] / 1e6:.1f} ({rate['min'] / 1e6:.1f}–"
                f"{rate['max'] / 1e6:.1f}) | {ratio:.2f} | {summary['io_wq_workers_max']} |"
            )
        out.append("")
    return out


def cell(record) -> str:
    median = record["paired_median"]
    low, high = record["paired_ci_low"], record["paired_ci_high"]
    if median is None:
        return "–"
    if low is None:
        return f"{median:.2f}"
    text = f"{median:.2f} [{low:.2f}, {high:.2f}]"
    if high < 1:
        return f"**{text}**"
    if low > 1:
        return f"_{text}_"
    return text


def speed_section(directory: Path, name: str) -> list[str]:
    path = directory / name
    if not path.exists():
        return []
    records = json.loads(path.read_text())
    targets = [t for t in TARGET_LABELS if any(r["target"] == t for r in records)]
    runs = max(r["runs"] for r in records)
    scale = records[0]["scale"]
    synchronous = records[0]["synchronous"]
    out = [
        f"`bench speed` ({name}), `synchronous={synchronous}`, scale {scale}, {runs} measured "
        "runs per test and target, each in a "
        "fresh process: paired median of time ÷ `unix` time [95 % interval]; **bold** "
        "faster beyond the noise, _italic_ slower (unrounded bounds). `unix`: its median "
        "time.",
        "",
    ]
    for journal, label in JOURNALS:
        rows = [r for r in records if r["journal"] == journal]
        if not rows:
            continue
        header = ["#", f"`unix` {label}"] + [TARGET_LABELS[t] for t in targets]
        out += [
            f"{label}:",
            "",
            "| " + " | ".join(header) + " |",
            "|---|" + "---:|" * (len(header) - 1),
        ]
        by_key = {(r["test"], r["target"]): r for r in rows}
        tests = sorted({r["test"] for r in rows})
        for test in tests:
            unix = by_key.get((test, "unix"))
            line = [str(test), f"{unix['median_s'] * 1e3:.1f} ms" if unix else "–"]
            line += [cell(by_key[(test, t)]) if (test, t) in by_key else "–" for t in targets]
            out.append("| " + " | ".join(line) + " |")
        geo = ["geo. mean", ""]
        verdicts = ["faster / slower", ""]
        for target in targets:
            ratios = [by_key[(t, target)]["paired_median"] for t in tests if (t, target) in by_key]
            ratios = [x for x in ratios if x]
            geo.append(f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}" if ratios else "–")
            faster = sum(
                1
                for t in tests
                if (t, target) in by_key
                and by_key[(t, target)]["paired_ci_high"] is not None
                and by_key[(t, target)]["paired_ci_high"] < 1
            )
            slower = sum(
                1
                for t in tests
                if (t, target) in by_key
                and by_key[(t, target)]["paired_ci_low"] is not None
                and by_key[(t, target)]["paired_ci_low"] > 1
            )
            verdicts.append(f"{faster} / {slower}")
        out.append("| " + " | ".join(geo) + " |")
        out.append("| " + " | ".join(verdicts) + " |")
        out.append("")
    out.append(
        "Geometric mean: of the paired medians over the tests. Faster / slower: tests "
        "whose whole interval lies below / above 1."
    )
    out.append("")
    return out


def verdicts(records, target, journal):
    """(geometric mean of paired medians, tests faster, tests slower, tests)."""
    rows = [r for r in records if r["target"] == target and r["journal"] == journal]
    ratios = [r["paired_median"] for r in rows if r["paired_median"]]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    faster = sum(1 for r in rows if r["paired_ci_high"] is not None and r["paired_ci_high"] < 1)
    slower = sum(1 for r in rows if r["paired_ci_low"] is not None and r["paired_ci_low"] > 1)
    return geo, faster, slower, len(rows)


def overview_section(directory: Path) -> list[str]:
    """One table: every target of both `bench speed` files against `unix`."""
    out = [
        "| `bench speed` | target | rollback: geo. mean | faster / slower / tests "
        "| WAL: geo. mean | faster / slower / tests |",
        "|---|---|---:|---:|---:|---:|",
    ]
    any_rows = False
    for name in ("speed.json", "speed-sync-off.json"):
        path = directory / name
        if not path.exists():
            continue
        records = json.loads(path.read_text())
        synchronous = records[0]["synchronous"]
        runs = max(r["runs"] for r in records)
        for target in TARGET_LABELS:
            if not any(r["target"] == target for r in records):
                continue
            cells = []
            for journal, _ in JOURNALS:
                geo, faster, slower, tests = verdicts(records, target, journal)
                cells += [f"{geo:.3f}", f"{faster} / {slower} / {tests}"]
            out.append(
                f"| `synchronous={synchronous}`, {runs} runs | {TARGET_LABELS[target]} | "
                + " | ".join(cells)
                + " |"
            )
            any_rows = True
    if not any_rows:
        return []
    return out + [
        "",
        "Geometric mean of the per-test paired medians (time ÷ `unix`); faster / slower: "
        "tests whose whole 95 % interval lies below / above 1.",
        "",
    ]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = Path(sys.argv[1])
    lines = (
        overview_section(directory)
        + probe_section(directory)
        + io_section(directory)
        + speed_section(directory, "speed.json")
        + speed_section(directory, "speed-sync-off.json")
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
