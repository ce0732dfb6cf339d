#!/usr/bin/env bash
# Measures the io_uring VFS on ext4, XFS and btrfs (each a fresh image file on a loop
# device) and on tmpfs: `sqlite-uring probe --dir` (do ring writes and fsyncs complete
# inline or on io-wq workers?), `bench io` (buffered and O_DIRECT, 1 to 128 writes in
# flight) and `bench speed` (every routing choice as a target, paired against `unix`).
# Each filesystem's tables (docs/FILESYSTEMS.md shows them) go to <results>/<where>/summary.md,
# made by scripts/filesystems_tables.py from the result files beside it.
# docs/FILESYSTEMS.md explains the results and how to measure a real filesystem instead.
#
# Usage (as root; mkfs.xfs and mkfs.btrfs are installed with apt-get when missing):
#   scripts/filesystems.sh [options] MOUNT_DIR
# Options:
#   --fs LIST        filesystems, comma-separated (default ext4,xfs,btrfs,tmpfs)
#   --results DIR    where result directories go (default docs/results); each
#                    filesystem's is <fs>-loop-<N>vcpu (tmpfs: tmpfs-<N>vcpu)
#   --steps LIST     what to measure, comma-separated (default probe,io,speed,speed-off):
#                    probe: `probe --dir` -> probe.txt; io: `bench io` buffered and
#                    O_DIRECT -> io-buffered.*, io-direct.*; speed: `bench speed` with
#                    every routing choice as a target -> speed.*; speed-off: `bench speed`
#                    with synchronous=OFF, default routing against ring writes, twice the
#                    runs -> speed-sync-off.* (no fsync: the submission cost alone, without
#                    the device's noise)
#   --runs N         measured runs per test and target of `bench speed` (default 10)
#   --scale F        `bench speed --scale` (default 0.1)
#   --io-size SIZE   bytes per `bench io` run (default 64MiB)
#   --io-rounds N    `bench io --rounds` (default 3)
#   --wal-rounds N   `bench io --wal --rounds` (default 16)
#   --probe-only     the same as --steps probe
#   --keep           after measuring, keep the
#                    filesystems mounted until Ctrl-C, for other commands to use
#   --bin PATH       the sqlite-uring binary (default: build target/release/sqlite-uring)
# Everything it mounted is unmounted, its loop devices detached and its image files
# removed on exit, also on error or Ctrl-C.
set -euo pipefail

fs_list=ext4,xfs,btrfs,tmpfs
results=docs/results
runs=10
scale=0.1
io_size=64MiB
io_rounds=3
wal_rounds=16
steps=probe,io,speed,speed-off
keep=0
bin=
mount_dir=

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --fs) fs_list=$2; shift 2 ;;
        --results) results=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --scale) scale=$2; shift 2 ;;
        --io-size) io_size=$2; shift 2 ;;
        --io-rounds) io_rounds=$2; shift 2 ;;
        --wal-rounds) wal_rounds=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --probe-only) steps=probe; shift ;;
        --keep) keep=1; shift ;;
        --bin) bin=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "error: unknown option $1" >&2; usage ;;
        *) [ -z "$mount_dir" ] || { echo "error: one MOUNT_DIR only ($mount_dir, $1)" >&2; usage; }
           mount_dir=$1; shift ;;
    esac
done
[ -n "$mount_dir" ] || { echo "error: MOUNT_DIR is missing" >&2; usage; }
[ "$(id -u)" = 0 ] || { echo "error: mounting loop devices needs root; run with sudo" >&2; exit 1; }

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -p sqlite-uring-cli >&2)
    bin=$repo/target/release/sqlite-uring
fi
[ -x "$bin" ] || { echo "error: --bin $bin is not an executable" >&2; exit 1; }

need_tool() { # command debian-package
    command -v "$1" >/dev/null && return
    echo "installing $2 (for $1)" >&2
    apt-get install -y "$2" >&2 || { apt-get update >&2 && apt-get install -y "$2" >&2; }
}
IFS=, read -r -a filesystems <<<"$fs_list"
for fs in "${filesystems[@]}"; do
    case "$fs" in
        ext4) need_tool mkfs.ext4 e2fsprogs ;;
        xfs) need_tool mkfs.xfs xfsprogs ;;
        btrfs) need_tool mkfs.btrfs btrfs-progs ;;
        tmpfs) ;;
        *) echo "error: --fs: unknown filesystem $fs (use ext4, xfs, btrfs, tmpfs)" >&2; exit 2 ;;
    esac
done

mkdir -p "$mount_dir"
mount_dir=$(cd "$mount_dir" && pwd)
images=$mount_dir/images
mounted=()
loops=()
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" || true; rmdir "$m" 2>/dev/null || true; done
    for l in "${loops[@]}"; do losetup -d "$l" || true; done
    rm -rf "$images"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A 2 GiB sparse image per filesystem, on a loop device with direct I/O so that the
# filesystem's writes and flushes reach the disk under it rather than its page cache.
mkdir -p "$images"
for fs in "${filesystems[@]}"; do
    dir=$mount_dir/$fs
    mkdir -p "$dir"
    if [ "$fs" = tmpfs ]; then
        mount -t tmpfs -o size=2g tmpfs "$dir"
    else
        image=$images/$fs.img
        truncate -s 2G "$image"
        loop=$(losetup --find --show --direct-io=on "$image")
        loops+=("$loop")
        case "$fs" in
            ext4) mkfs.ext4 -q -F "$loop" ;;
            xfs) mkfs.xfs -q -f "$loop" ;;
            btrfs) mkfs.btrfs -q -f "$loop" ;;
        esac
        mount "$loop" "$dir"
    fi
    mounted+=("$dir")
done

cpus=$(nproc)
for fs in "${filesystems[@]}"; do
    dir=$mount_dir/$fs
    if [ "$fs" = tmpfs ]; then where=tmpfs-${cpus}vcpu; else where=$fs-loop-${cpus}vcpu; fi
    out=$results/$where
    mkdir -p "$out"
    echo "== $fs ($dir) -> $out" >&2
    step() { [[ ",$steps," == *",$1,"* ]]; }
    if step probe; then
        "$bin" probe --dir "$dir" | tee "$out/probe.txt"
    fi
    if step io; then
        for mode in buffered direct; do
            flags=()
            [ "$mode" = direct ] && flags=(--direct --preallocate --register-buffers)
            "$bin" bench io --dir "$dir" --size "$io_size" --rounds "$io_rounds" \
                --methods pwrite,io_uring --threads 1 --entries 1,8,32,128 --strategy refill \
                "${flags[@]}" --export-json "$out/io-$mode.json" \
                --export-markdown "$out/io-$mode.md" >/dev/null
        done
    fi
    if step speed; then
        "$bin" bench speed --dir "$dir" --scale "$scale" --warmup 1 --runs "$runs" \
            --journal delete,wal \
            --targets 'unix,io_uring,sync,io_uring?uring_writes=ring,io_uring?uring_reads=ring,io_uring?uring_syncs=ring,io_uring?uring_direct=on' \
            --export-json "$out/speed.json" --export-markdown "$out/speed.md" >/dev/null
    fi
    if step speed-off; then
        "$bin" bench speed --dir "$dir" --scale "$scale" --warmup 1 --runs $((2 * runs)) \
            --journal delete,wal --synchronous off \
            --targets 'unix,io_uring,io_uring?uring_writes=ring' \
            --export-json "$out/speed-sync-off.json" \
            --export-markdown "$out/speed-sync-off.md" >/dev/null
    fi
    if step wal; then
        "$bin" bench io --wal --dir "$dir" --rounds "$wal_rounds" --commits 150 \
            --commit-frames 1,4,16 --wal-space reused,grows \
            --export-json "$out/wal-dsync.json" --export-markdown "$out/wal-dsync.md" >/dev/null
    fi
    python3 "$repo/scripts/filesystems_tables.py" "$out" > "$out/summary.md"
done

if [ "$keep" = 1 ]; then
    echo "mounted: ${mounted[*]} (Ctrl-C unmounts and removes them)" >&2
    while :; do sleep 3600; done
fi
