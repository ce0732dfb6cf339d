# sqlite-uring in a container, for macOS and Windows (Docker Desktop runs it in a Linux VM)
# and for Linux hosts without a Rust toolchain. UNTESTED: no Docker engine runs on this
# project's machines; the steps are the README's own set-up commands, which CI runs.
#
#   docker build -t sqlite-uring .
#   docker run --rm --security-opt seccomp=unconfined sqlite-uring
#
# `--security-opt seccomp=unconfined` (or a seccomp profile that allows io_uring_setup,
# io_uring_enter and io_uring_register) is required: Docker's default seccomp profile
# blocks io_uring since Docker Engine 25, and the VFS then refuses to run (README,
# "Docker (macOS, Windows)").

# README "Two commands": Rust (1.80+) and a C compiler (both in this image), Debian's sqlite3.
FROM rust:1-bookworm

# The Debian packages .ci/run installs for the tests: sqlite3, python3 (with venv and
# pytest, for the Python package's tests), e2fsprogs, binutils, mount, btrfs-progs, make,
# g++ and gcc, a JDK and Maven (the Java example). The replication, Node and Go tests also
# need Go (Litestream by `go install`, the Go example) and Node with npm (better-sqlite3),
# which this image lacks.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      sqlite3 python3 python3-venv python3-pytest e2fsprogs binutils mount btrfs-progs make g++ \
      gcc default-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /sqlite-uring
COPY . .

# Compile what the README's main command runs, so `docker run` starts measuring at once
# (building needs no io_uring, so the default seccomp profile of `docker build` is fine).
RUN cargo build --release -p sqlite-uring-cli

# The README's main command. --dir /var/tmp is inside the container: mount a volume there
# (`-v sqlite-uring-data:/var/tmp`) to measure a Docker volume instead of the overlay layer.
CMD ["cargo", "run", "--release", "-p", "sqlite-uring-cli", "--", "bench", "speed", "--scale", "0.1", "--dir", "/var/tmp"]
