"""The application side of the replication tests: a WAL-mode writer, concurrent readers
and a digest of a database, all through Debian's python3 sqlite3 module with the
extension loaded (or through the stock `unix` VFS, the control).

    replication_app.py write  EXT DB VFS COUNT SEED ACK_FILE PAUSE_DIR PAUSE_AT
    replication_app.py read   EXT DB VFS STOP_FILE MAX_CHECKS
    replication_app.py digest EXT DB VFS

The writer runs COUNT transactions (ids 1..COUNT) of varied size and kind; after each
COMMIT returns it appends the id to ACK_FILE, so ACK_FILE lists only transactions the
application saw committed. Every transaction adds exactly one `tx` row (id = its number)
that records how many `item` rows and payload bytes that transaction's items now hold,
which gives readers and the digest an invariant to check at any snapshot:

* `tx` ids are exactly 1..max(id) (no committed transaction missing, none torn),
* for every tx, its items' count and total length equal its recorded `nrows`/`bytes`.

PAUSE_AT is a comma-separated list of transaction ids (or empty): in each, after its
writes and before its COMMIT, the writer creates PAUSE_DIR/paused-ID and waits for
PAUSE_DIR/resume-ID. A test kills a process there at a known point: the writer holds
SQLite's write lock, its uncommitted (spilled) frames are in the WAL, and no commit is
in flight anywhere. Id 0 pauses once the database is in WAL mode with its schema, before
the first transaction and outside any (no lock held): a test starts the stream there
once the replicator has taken the database over.

`digest` prints one JSON line: integrity_check, the tx ids, a SHA-256 over every row of
both tables in primary-key order, and the invariant's violations.
"""

import hashlib
import json
import os
import random
import sqlite3
import sys
import time

BUSY_TIMEOUT_MS = 30000  # a hang guard: Litestream holds the write lock while it checkpoints
SCHEMA = """
CREATE TABLE IF NOT EXISTS tx(
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, nrows INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS item(
    id INTEGER PRIMARY KEY, txid INTEGER NOT NULL, payload BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS item_txid ON item(txid);
"""
# Items per transaction kind, and payload sizes in bytes. A `large` transaction writes
# about 3 MB, far more than the writer's 64-page cache: SQLite spills dirty pages into
# the WAL before the commit frame.
LARGE_ITEMS, LARGE_PAYLOAD_BYTES = 400, 8000
WRITER_CACHE_PAGES = 64
PAUSE_WAIT_S = 600  # a hang guard


def connect(ext, db, vfs):
    """A connection to `db` through `vfs`, with the extension loaded into the process."""
    if vfs != "unix":
        loader = sqlite3.connect(":memory:")
        loader.enable_load_extension(True)
        loader.load_extension(ext)
        loader.close()
    conn = sqlite3.connect(
        f"file:{db}?vfs={vfs}", uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def pause(pause_dir, txid):
    """Announce the pause and wait, by PAUSE_WAIT_S at most, to be resumed (or killed)."""
    open(os.path.join(pause_dir, f"paused-{txid}"), "w").close()
    resume = os.path.join(pause_dir, f"resume-{txid}")
    deadline = time.monotonic() + PAUSE_WAIT_S
    while not os.path.exists(resume):
        if time.monotonic() > deadline:
            sys.exit(f"never resumed at transaction {txid}")
        time.sleep(0.01)


def write(ext, db, vfs, count, seed, ack_path, pause_dir, pause_at):
    conn = connect(ext, db, vfs)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    assert mode == "wal", mode
    conn.execute(f"PRAGMA cache_size={WRITER_CACHE_PAGES}")
    # Checkpoints are Litestream's, as its tips advise for a busy writer: a writer's own
    # checkpoint can restart the WAL while Litestream hands its read lock over, and
    # Litestream v0.5.17 then misses frames (restores came out malformed under `unix` as
    # under `io_uring` with SQLite's default of 1,000 pages).
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript(SCHEMA)
    if 0 in pause_at:
        pause(pause_dir, 0)
    rng = random.Random(seed)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    live = []  # tx ids whose items may be updated or deleted
    for txid in range(1, count + 1):
        roll = rng.random()
        if txid % 150 == 0:
            kind, items, size = "large", LARGE_ITEMS, (LARGE_PAYLOAD_BYTES, LARGE_PAYLOAD_BYTES)
        elif roll < 0.70 or not live:
            kind, items, size = "small", rng.randint(1, 8), (50, 2000)
        elif roll < 0.88:
            kind, items, size = "medium", rng.randint(10, 60), (100, 2000)
        elif roll < 0.97:
            kind, items, size = "update", 0, None
        else:
            kind, items, size = "delete", 0, None
        conn.execute("BEGIN IMMEDIATE")
        if kind in ("update", "delete"):
            target = rng.choice(live)
            if kind == "update":
                conn.execute(
                    "UPDATE item SET payload = randomblob(?) WHERE txid = ?",
                    (rng.randint(50, 3000), target),
                )
            else:
                conn.execute("DELETE FROM item WHERE txid = ?", (target,))
                live.remove(target)
            conn.execute(
                "UPDATE tx SET nrows = (SELECT count(*) FROM item WHERE txid = ?1),"
                " bytes = (SELECT coalesce(sum(length(payload)), 0) FROM item WHERE txid = ?1)"
                " WHERE id = ?1",
                (target,),
            )
        lengths = [rng.randint(*size) for _ in range(items)]
        conn.executemany(
            "INSERT INTO item(txid, payload) VALUES (?, randomblob(?))",
            [(txid, length) for length in lengths],
        )
        conn.execute(
            "INSERT INTO tx(id, kind, nrows, bytes) VALUES (?, ?, ?, ?)",
            (txid, kind, items, sum(lengths)),
        )
        if txid in pause_at:
            pause(pause_dir, txid)
        conn.execute("COMMIT")
        if items:
            live.append(txid)
        os.write(ack, f"{txid}\n".encode())
    os.close(ack)
    conn.close()


def violations(conn, per_tx):
    """Invariant failures visible in the connection's current snapshot."""
    found = []
    n_tx, max_id = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM tx").fetchone()
    if n_tx != max_id:
        found.append(f"tx ids have gaps: {n_tx} rows, max id {max_id}")
    items = conn.execute("SELECT count(*), coalesce(sum(length(payload)), 0) FROM item").fetchone()
    recorded = conn.execute("SELECT coalesce(sum(nrows), 0), coalesce(sum(bytes), 0) FROM tx").fetchone()
    if items != recorded:
        found.append(f"items {items} != recorded {recorded}")
    if per_tx:
        bad = conn.execute(
            "SELECT tx.id, tx.nrows, tx.bytes, count(item.id), coalesce(sum(length(item.payload)), 0)"
            " FROM tx LEFT JOIN item ON item.txid = tx.id GROUP BY tx.id"
            " HAVING count(item.id) != tx.nrows OR coalesce(sum(length(item.payload)), 0) != tx.bytes"
            " LIMIT 5"
        ).fetchall()
        found.extend(f"tx {row[0]}: recorded {row[1:3]}, found {row[3:]}" for row in bad)
        orphans = conn.execute(
            "SELECT count(*) FROM item WHERE txid NOT IN (SELECT id FROM tx)"
        ).fetchone()[0]
        if orphans:
            found.append(f"{orphans} items of no committed tx")
    return found


def read(ext, db, vfs, stop_path, max_checks):
    """Check the invariant in read transactions until STOP_FILE appears."""
    while not os.path.exists(db):
        if os.path.exists(stop_path):
            print(json.dumps({"checks": 0, "max_tx": 0}))
            return
        time.sleep(0.05)
    conn = connect(ext, db, vfs)
    checks, max_tx = 0, 0
    # At least one check of a snapshot holding the tables, however early STOP_FILE appears;
    # MAX_CHECKS bounds the loop (a hang guard), counting snapshots without tables too.
    for _ in range(max_checks):
        if checks and os.path.exists(stop_path):
            break
        try:
            conn.execute("BEGIN")
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'item'").fetchone():
                conn.execute("COMMIT")
                time.sleep(0.05)
                continue
            found = violations(conn, per_tx=checks % 10 == 0)
            snapshot_max = conn.execute("SELECT coalesce(max(id), 0) FROM tx").fetchone()[0]
            conn.execute("COMMIT")
        except sqlite3.OperationalError as error:
            # Busy past the timeout is the only error a reader may see; report it.
            print(json.dumps({"error": str(error), "checks": checks}))
            sys.exit(2)
        if found:
            print(json.dumps({"violations": found, "checks": checks}))
            sys.exit(1)
        if snapshot_max < max_tx:
            print(json.dumps({"violations": [f"snapshot went back from tx {max_tx} to {snapshot_max}"]}))
            sys.exit(1)
        max_tx = snapshot_max
        checks += 1
        time.sleep(0.01)
    print(json.dumps({"checks": checks, "max_tx": max_tx}))


def digest(ext, db, vfs):
    conn = connect(ext, db, vfs)
    integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    conn.execute("BEGIN")
    sha = hashlib.sha256()
    ids = []
    for row in conn.execute("SELECT id, kind, nrows, bytes FROM tx ORDER BY id"):
        ids.append(row[0])
        sha.update(repr(row).encode())
    for row in conn.execute("SELECT id, txid, payload FROM item ORDER BY id"):
        sha.update(repr(row).encode())
    found = violations(conn, per_tx=True)
    conn.execute("COMMIT")
    print(json.dumps({"integrity": integrity, "tx_ids": ids, "sha256": sha.hexdigest(), "violations": found}))


def main(argv):
    command, ext, db, vfs = argv[1:5]
    if command == "write":
        pause_at = {int(txid) for txid in argv[9].split(",") if txid}
        write(ext, db, vfs, int(argv[5]), int(argv[6]), argv[7], argv[8], pause_at)
    elif command == "read":
        read(ext, db, vfs, argv[5], int(argv[6]))
    elif command == "digest":
        digest(ext, db, vfs)
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
