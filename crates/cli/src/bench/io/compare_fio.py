#!/usr/bin/env python3
"""Compare `sqlite-uring bench io` with fio, method by method, in one session.

Usage: python3 crates/cli/src/bench/io/compare_fio.py BINARY DIR [ROUNDS] > table.md

For each scenario (buffered / O_DIRECT appending / O_DIRECT preallocated) and
round, every method runs as a pair, sqlite-uring then fio (fio first in even
rounds), so both tools of a pair see the same load on a shared machine.
fio equivalents: blocking = ioengine=sync; pwrite T = psync with T jobs on
disjoint offsets of one file (--thread --offset_increment); io_uring refill E =
ioengine=io_uring iodepth=E iodepth_batch_submit=E iodepth_batch_complete_min=1
iodepth_batch_complete_max=E (when the ring is full, wait for one completion, reap
every completion that is there, refill all free slots and submit them with one
io_uring_enter, as sqlite-uring's refill does; fio's defaults instead reap one
completion and submit one write per io_uring_enter, see docs/BENCH_IO.md "Why
the two gaps"); io_uring batch E = iodepth_batch_submit=E
iodepth_batch_complete_min=E. durability end = end_fsync=1 (fio counts the
fsync in its runtime). Raw numbers (and the 1-minute load average before each
run) go to stderr as JSON. The table also shows how many 4 KiB writes the block
layer merged into one device write request (from /sys/dev/block/M:m/stat of
DIR's device, which other processes' IO also counts): batched O_DIRECT
submission lets the block layer merge sequential writes, and that, not the
tool, decides O_DIRECT throughput on a virtio disk.
"""
import json
import os
import statistics
import subprocess
import sys

BIN, DIR = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
# COMPARE_SIZE overrides every scenario's size (for a quick check of the script).
SIZE_OVERRIDE = os.environ.get("COMPARE_SIZE")

# (label, sqlite-uring method name stem, threads, entries, strategy)
METHODS = [
    ("blocking", "blocking", 1, None, None),
    ("pwrite, 1 thread", "1_threads_pwrite", 1, None, None),
    ("pwrite, 10 threads", "10_threads_pwrite", 10, None, None),
    ("io_uring refill, E=1, 1 thread", "1_threads_io_uring_refill_1_entries", 1, 1, "refill"),
    ("io_uring batch, E=128, 1 thread", "1_threads_io_uring_batch_128_entries", 1, 128, "batch"),
    ("io_uring refill, E=128, 1 thread", "1_threads_io_uring_refill_128_entries", 1, 128, "refill"),
    ("io_uring refill, E=128, 10 threads", "10_threads_io_uring_refill_128_entries", 10, 128, "refill"),
]

# (name, size, extra sqlite-uring flags, fio flags, register ring resources)
SCENARIOS = [
    ("buffered, file grows", "256MiB", [], ["--fallocate=none"], False),
    ("O_DIRECT, file grows", "128MiB", ["--direct"], ["--direct=1", "--fallocate=none"], True),
    ("O_DIRECT, preallocated", "128MiB", ["--direct", "--preallocate"], ["--direct=1", "--fallocate=native"], True),
]


def size_bytes(text):
    units = {"MiB": 1 << 20, "GiB": 1 << 30}
    for unit, scale in units.items():
        if text.endswith(unit):
            return int(text[: -len(unit)]) * scale
    return int(text)


def device_stat_path():
    dev = os.stat(DIR).st_dev
    path = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat"
    return path if os.path.exists(path) else None


DEVICE_STAT = None


def device_write_requests():
    """Write requests completed by DIR's device so far (None if unknown)."""
    if DEVICE_STAT is None:
        return None
    with open(DEVICE_STAT) as f:
        return int(f.read().split()[4])


def measured(run, size, *args):
    """(bytes/s, 4 KiB writes per device write request or None) of one run."""
    before = device_write_requests()
    bps = run(size, *args)
    after = device_write_requests()
    if before is None or after is None:
        return bps, None
    return bps, size_bytes(size) / 4096 / max(1, after - before)


def run_ours(size, flags, registered, threads, entries, strategy, label):
    if label == "blocking":
        methods = ["--methods", "blocking"]
    elif entries is None:
        methods = ["--methods", "pwrite", "--threads", str(threads)]
    else:
        methods = ["--methods", "io_uring", "--threads", str(threads), "--entries", str(entries),
                   "--strategy", strategy]
        if registered:
            methods += ["--register-buffers", "--register-files"]
    cmd = [BIN, "bench", "io", "--dir", DIR, "--size", size, "--rounds", "1"] + methods + flags
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # stdout is IO Playground's row: method,seconds,bytes_per_sec
    return float(out.strip().split(",")[2])


def run_fio(size, fio_flags, registered, threads, entries, strategy, label):
    # Per-job size rounded down to 4 KiB (O_DIRECT); at most 40 KiB less in total.
    per_job = size_bytes(size) // threads // 4096 * 4096
    path = os.path.join(DIR, "fio-compare.tmp")
    if os.path.exists(path):
        os.unlink(path)
    cmd = ["fio", "--name=w", f"--filename={path}", "--rw=write", "--bs=4k", "--end_fsync=1",
           "--thread", f"--numjobs={threads}", f"--size={per_job}",
           f"--offset_increment={per_job}", "--group_reporting", "--output-format=json"]
    if label == "blocking":
        cmd += ["--ioengine=sync"]
    elif entries is None:
        cmd += ["--ioengine=psync"]
    else:
        cmd += ["--ioengine=io_uring", f"--iodepth={entries}", f"--iodepth_batch_submit={entries}"]
        if strategy == "batch":
            cmd += [f"--iodepth_batch_complete_min={entries}"]
        else:
            cmd += ["--iodepth_batch_complete_min=1", f"--iodepth_batch_complete_max={entries}"]
        if registered:
            cmd += ["--fixedbufs=1", "--registerfiles=1"]
    cmd += fio_flags
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        if os.path.exists(path):
            os.unlink(path)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["write"]["bw_bytes"]


def fmt_merge(values):
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.1f}" if values else "–"


def main():
    global DEVICE_STAT
    DEVICE_STAT = device_stat_path()
    raw = []
    print("| scenario | method | sqlite-uring MB/s mean (min–max) | fio MB/s mean (min–max) | difference of means | of medians | within 15 % | writes per device request, median (ours / fio) | load avg |")
    print("|---|---|---:|---:|---:|---:|---|---:|---|")
    for scenario, size, flags, fio_flags, registered in SCENARIOS:
        size = SIZE_OVERRIDE or size
        ours = {label: [] for label, *_ in METHODS}
        theirs = {label: [] for label, *_ in METHODS}
        loads = {label: [] for label, *_ in METHODS}
        merge_ours = {label: [] for label, *_ in METHODS}
        merge_fio = {label: [] for label, *_ in METHODS}
        for round_index in range(ROUNDS):
            for label, _stem, threads, entries, strategy in METHODS:
                args = (threads, entries, strategy, label)
                loads[label].append(round(os.getloadavg()[0], 2))
                pair = [(run_ours, flags, ours, merge_ours), (run_fio, fio_flags, theirs, merge_fio)]
                if round_index % 2 == 1:
                    pair.reverse()
                for run, tool_flags, results, merges in pair:
                    bps, merge = measured(run, size, tool_flags, registered, *args)
                    results[label].append(bps)
                    merges[label].append(merge)
        for label, *_ in METHODS:
            a = statistics.mean(ours[label]) / 1e6
            b = statistics.mean(theirs[label]) / 1e6
            diff = (a - b) / b * 100
            median_diff = (statistics.median(ours[label]) / statistics.median(theirs[label]) - 1) * 100
            spread_a = f"{min(ours[label]) / 1e6:.0f}–{max(ours[label]) / 1e6:.0f}"
            spread_b = f"{min(theirs[label]) / 1e6:.0f}–{max(theirs[label]) / 1e6:.0f}"
            ok = "yes" if abs(diff) <= 15 else "**no**"
            print(f"| {scenario} ({size}) | {label} | {a:.1f} ({spread_a}) | {b:.1f} ({spread_b}) "
                  f"| {diff:+.0f} % | {median_diff:+.0f} % | {ok} "
                  f"| {fmt_merge(merge_ours[label])} / {fmt_merge(merge_fio[label])} "
                  f"| {min(loads[label]):.1f}–{max(loads[label]):.1f} |", flush=True)
            raw.append({"scenario": scenario, "size": size, "method": label,
                        "sqlite_uring_bytes_per_s": ours[label], "fio_bytes_per_s": theirs[label],
                        "load_avg_1min": loads[label],
                        "sqlite_uring_writes_per_device_request": merge_ours[label],
                        "fio_writes_per_device_request": merge_fio[label]})
    json.dump(raw, sys.stderr, indent=1)


if __name__ == "__main__":
    main()
