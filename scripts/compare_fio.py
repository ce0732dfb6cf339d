#!/usr/bin/env python3
"""Compare `sqlite-uring bench io` with fio, method by method, in one session.

Usage:
  python3 scripts/compare_fio.py BINARY DIR [ROUNDS] > table.md
  python3 scripts/compare_fio.py --combine RUNS.json... > table.md
  python3 scripts/compare_fio.py --reads [--size 1GiB] [--reads-per-run 16384]
      [--queue-depths 1,4,32,128] [--cache buffered,direct] BINARY DIR [ROUNDS] > table.md

Writes (the default). For each scenario (buffered / O_DIRECT appending / O_DIRECT
preallocated) and round, every method runs as a pair, sqlite-uring then fio (fio first in
odd rounds), so both tools of a pair see the same load on a shared machine.
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
tool, decides O_DIRECT throughput on a virtio disk. COMPARE_SIZE overrides every
write scenario's size (for a quick check of the script).

Reads (--reads): random 4 KiB reads of one file of --size, which fio lays out once
(written and fsynced) and both tools read (`bench io --reads --read-file`), so both read
the same blocks of the same extents. Per round and per (cache, method, queue depth) the
two tools run as a pair, in alternating order. Both drop the file's page cache before
each run (sqlite-uring: posix_fadvise DONTNEED; fio: invalidate=1, its default) and both
use POSIX_FADV_RANDOM on buffered descriptors (fio: fadvise_hint, its default).
fio equivalents: io_uring QD N = ioengine=io_uring iodepth=N with the same batching flags
as the writes' refill, one job over the whole file; pread QD N = ioengine=psync
numjobs=N, job i on the i-th N-th of the file (--offset_increment); each run reads
--reads-per-run distinct blocks (fio's random map: io_size per job), the seed changes per
round (sqlite-uring --seed, fio --randseed). The table shows IOPS of both tools and each
tool's ratio of a queue depth's IOPS to its QD 1 IOPS; raw numbers go to stderr as JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

BIN, DIR, ROUNDS = None, None, 3
# COMPARE_SIZE overrides every write scenario's size (for a quick check of the script).
SIZE_OVERRIDE = os.environ.get("COMPARE_SIZE")
BLOCK = 4096

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
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
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


def write_cells(ours, theirs):
    """The cells both write tables share, from each tool's bytes/s per round: each tool's
    MB/s mean (min–max), the difference of the means and of the medians, and whether the
    means agree within 15 %."""
    a = statistics.mean(ours) / 1e6
    b = statistics.mean(theirs) / 1e6
    diff = (a - b) / b * 100
    median_diff = (statistics.median(ours) / statistics.median(theirs) - 1) * 100
    ok = "yes" if abs(diff) <= 15 else "**no**"
    return (f"{a:.1f} ({min(ours) / 1e6:.0f}–{max(ours) / 1e6:.0f}) "
            f"| {b:.1f} ({min(theirs) / 1e6:.0f}–{max(theirs) / 1e6:.0f}) "
            f"| {diff:+.0f} % | {median_diff:+.0f} % | {ok}")


def main_writes():
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
            print(f"| {scenario} ({size}) | {label} | {write_cells(ours[label], theirs[label])} "
                  f"| {fmt_merge(merge_ours[label])} / {fmt_merge(merge_fio[label])} "
                  f"| {min(loads[label]):.1f}–{max(loads[label]):.1f} |", flush=True)
            raw.append({"scenario": scenario, "size": size, "method": label,
                        "sqlite_uring_bytes_per_s": ours[label], "fio_bytes_per_s": theirs[label],
                        "load_avg_1min": loads[label],
                        "sqlite_uring_writes_per_device_request": merge_ours[label],
                        "fio_writes_per_device_request": merge_fio[label]})
    json.dump(raw, sys.stderr, indent=1)



# --- random reads -------------------------------------------------------------------


def read_file_path():
    return os.path.join(DIR, "fio-compare-read.tmp")


def lay_out_read_file(size):
    """The file both tools read: written by fio once, fsynced."""
    path = read_file_path()
    if os.path.exists(path):
        os.unlink(path)
    subprocess.run(["fio", "--name=layout", f"--filename={path}", "--rw=write", "--bs=1M",
                    f"--size={size}", "--end_fsync=1", "--output-format=json"],
                   check=True, capture_output=True, text=True)
    return path


def run_ours_read(path, cache, method, depth, reads, seed):
    cmd = [BIN, "bench", "io", "--reads", "--dir", DIR, "--read-file", path, "--rounds", "1",
           "--read-methods", method, "--read-cache", cache, "--queue-depths", str(depth),
           "--reads-per-run", str(reads), "--block-size", str(BLOCK), "--seed", str(seed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # stdout is one row per run: method,seconds,bytes_per_sec
    return float(out.strip().splitlines()[-1].split(",")[2]) / BLOCK


def fio_read_command(path, size, cache, method, depth, reads, seed):
    """fio's equivalent of one `bench io --reads` case."""
    cmd = ["fio", "--name=r", f"--filename={path}", "--rw=randread", f"--bs={BLOCK}",
           f"--direct={1 if cache == 'direct' else 0}", "--thread", "--group_reporting",
           "--output-format=json", f"--randseed={seed}"]
    if method == "io_uring":
        cmd += ["--ioengine=io_uring", "--numjobs=1", f"--iodepth={depth}",
                f"--iodepth_batch_submit={depth}", "--iodepth_batch_complete_min=1",
                f"--iodepth_batch_complete_max={depth}", f"--size={size}",
                f"--io_size={reads * BLOCK}"]
    else:
        # One region per job, so the jobs' random maps never pick the same block.
        region = size // depth // BLOCK * BLOCK
        cmd += ["--ioengine=psync", f"--numjobs={depth}", f"--size={region}",
                f"--offset_increment={region}", f"--io_size={reads // depth * BLOCK}"]
    return cmd


def parse_fio_read(out):
    """IOPS of a group-reported fio run (the JSON may follow fio's warnings)."""
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["read"]["iops"]


def run_fio_read(path, size, cache, method, depth, reads, seed):
    cmd = fio_read_command(path, size, cache, method, depth, reads, seed)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return parse_fio_read(out)


def spread(values):
    return f"{min(values):.0f}–{max(values):.0f}"


def main_reads(args):
    size = size_bytes(args.size)
    depths = [int(d) for d in args.queue_depths.split(",")]
    caches = args.cache.split(",")
    methods = ["io_uring", "pread"]
    base = min(depths)
    for depth in depths:
        if args.reads_per_run % depth:
            sys.exit(f"--reads-per-run {args.reads_per_run} is not a multiple of queue depth "
                     f"{depth}: fio's pread jobs would read fewer blocks; pick a multiple")
        if args.reads_per_run // depth > size // depth // BLOCK:
            sys.exit(f"--reads-per-run {args.reads_per_run} is more than {depth} pread jobs "
                     f"can read without repeating a block in their shares of --size "
                     f"{args.size}; raise --size or lower --reads-per-run")
    cases = [(c, m, d) for c in caches for m in methods for d in depths]
    ours = {case: [] for case in cases}
    theirs = {case: [] for case in cases}
    loads = {case: [] for case in cases}
    path = lay_out_read_file(args.size)
    try:
        for round_index in range(ROUNDS):
            seed = round_index + 1
            order = cases if round_index % 2 == 0 else list(reversed(cases))
            for case in order:
                cache, method, depth = case
                loads[case].append(round(os.getloadavg()[0], 2))
                pair = [(run_ours_read, ours), (run_fio_read, theirs)]
                if round_index % 2 == 1:
                    pair.reverse()
                for run, results in pair:
                    if run is run_ours_read:
                        iops = run(path, cache, method, depth, args.reads_per_run, seed)
                    else:
                        iops = run(path, size, cache, method, depth, args.reads_per_run, seed)
                    results[case].append(iops)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    print(f"| cache | method | QD | sqlite-uring IOPS mean (min–max) | fio IOPS mean (min–max) "
          f"| difference of means | of medians | within 15 % | × QD{base} sqlite-uring / fio "
          "| load avg |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    raw = []
    for case in cases:
        cache, method, depth = case
        a, b = statistics.mean(ours[case]), statistics.mean(theirs[case])
        diff = (a - b) / b * 100
        median_diff = (statistics.median(ours[case]) / statistics.median(theirs[case]) - 1) * 100
        base_case = (cache, method, base)
        ratio_ours = a / statistics.mean(ours[base_case])
        ratio_fio = b / statistics.mean(theirs[base_case])
        ok = "yes" if abs(diff) <= 15 else "**no**"
        print(f"| {cache} | {method} | {depth} | {a:.0f} ({spread(ours[case])}) "
              f"| {b:.0f} ({spread(theirs[case])}) | {diff:+.0f} % | {median_diff:+.0f} % | {ok} "
              f"| {ratio_ours:.2f} / {ratio_fio:.2f} "
              f"| {min(loads[case]):.1f}–{max(loads[case]):.1f} |", flush=True)
        raw.append({"cache": cache, "method": method, "queue_depth": depth, "size": args.size,
                    "reads_per_run": args.reads_per_run, "sqlite_uring_iops": ours[case],
                    "fio_iops": theirs[case], "load_avg_1min": loads[case]})
    json.dump(raw, sys.stderr, indent=1)


def main_combine(paths):
    """The table of BENCH_IO.md: the write runs of several result files (stderr JSON of
    earlier runs) taken together, method by method."""
    runs = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = (row["scenario"], row["size"], row["method"])
                ours, theirs = runs.setdefault(key, ([], []))
                ours.extend(row["sqlite_uring_bytes_per_s"])
                theirs.extend(row["fio_bytes_per_s"])
    counts = {len(ours) for ours, _ in runs.values()} | {len(theirs) for _, theirs in runs.values()}
    if len(counts) != 1 or 0 in counts:
        sys.exit("--combine: the files hold different numbers of rounds per method; "
                 "combine files of the same scenarios and methods")
    n = counts.pop()
    print(f"| scenario | method | sqlite-uring MB/s, mean of {n} (min–max) | fio MB/s, mean of {n} (min–max) "
          "| difference of means | of medians | within 15 % |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (scenario, size, method), (ours, theirs) in runs.items():
        print(f"| {scenario} ({size}) | {method} | {write_cells(ours, theirs)} |")


def main():
    global BIN, DIR, ROUNDS
    if len(sys.argv) > 1 and sys.argv[1] == "--combine":
        if len(sys.argv) < 3:
            sys.exit("usage: compare_fio.py --combine RUNS.json... (the stderr JSON of earlier runs)")
        main_combine(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description="Compare `sqlite-uring bench io` with fio (docs/BENCH_IO.md).")
    parser.add_argument("binary", help="the sqlite-uring binary (a release build)")
    parser.add_argument("dir", help="directory on the filesystem to measure")
    parser.add_argument("rounds", nargs="?", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--reads", action="store_true",
                        help="random reads by queue depth instead of the write methods")
    parser.add_argument("--size", default="1GiB", help="--reads: file size (default 1GiB)")
    parser.add_argument("--reads-per-run", type=int, default=16384,
                        help="--reads: distinct 4 KiB reads per run (default 16384)")
    parser.add_argument("--queue-depths", default="1,4,32,128",
                        help="--reads: queue depths (default 1,4,32,128)")
    parser.add_argument("--cache", default="buffered,direct",
                        help="--reads: buffered, direct or both (default both)")
    args = parser.parse_args()
    BIN, DIR, ROUNDS = args.binary, args.dir, args.rounds
    if args.reads:
        main_reads(args)
    else:
        main_writes()


if __name__ == "__main__":
    main()
