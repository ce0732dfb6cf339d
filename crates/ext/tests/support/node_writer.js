// A Node.js application writing through the io_uring VFS with better-sqlite3.
//
//   node node_writer.js EXT DB TRANSFERS HALFWAY_FILE RESUME_FILE
//
// better-sqlite3 opens plain paths (no URI filenames), so the extension is loaded with
// its default entry point, which makes io_uring the process's default VFS; every
// database opened afterwards uses it. The writer keeps 100 accounts whose balances start
// at 1000 and runs TRANSFERS transactions, each moving an amount between two accounts
// and logging it (every 50th also writes a 1 MB batch of notes, through a 32-page cache
// so SQLite spills into the WAL before the commit). Halfway it writes HALFWAY_FILE and
// waits for RESUME_FILE, so the test can read a known state from another process. It
// prints one JSON line: PRAGMA io_uring_stats before closing and the final state as it
// sees it (the format of tests/common/transfers.rs, shared with the Go and Java examples).
'use strict';

const fs = require('fs');
const Database = require('better-sqlite3');

const [ext, dbPath, transfersArg, halfwayFile, resumeFile] = process.argv.slice(2);
const transfers = Number(transfersArg);
const WAIT_FOR_RESUME_MS = 600000; // a hang guard, not a measurement

const loader = new Database(':memory:');
loader.loadExtension(ext, 'sqlite3_sqliteuring_default_init');
loader.close();

const db = new Database(dbPath, { timeout: 30000 });
// Only the io_uring VFS answers this pragma: no row means another VFS has the file.
const ioUringStats = () => {
  const stats = db.pragma('io_uring_stats', { simple: true });
  if (stats === undefined) throw new Error('the database is not on io_uring');
  return JSON.parse(stats);
};
ioUringStats();
if (db.pragma('journal_mode = WAL', { simple: true }) !== 'wal') {
  throw new Error('WAL mode refused');
}
db.pragma('cache_size = 32');
db.exec(`
  CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
  CREATE TABLE log(seq INTEGER PRIMARY KEY, src INTEGER NOT NULL, dst INTEGER NOT NULL,
                   amount INTEGER NOT NULL);
  CREATE TABLE note(id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL);
`);
const open = db.prepare('INSERT INTO acct(id, balance) VALUES (?, 1000)');
db.transaction(() => {
  for (let id = 1; id <= 100; id++) open.run(id);
})();

const debit = db.prepare('UPDATE acct SET balance = balance - ? WHERE id = ?');
const credit = db.prepare('UPDATE acct SET balance = balance + ? WHERE id = ?');
const log = db.prepare('INSERT INTO log(seq, src, dst, amount) VALUES (?, ?, ?, ?)');
const note = db.prepare('INSERT INTO note(seq, body) VALUES (?, randomblob(4096))');
// A deterministic sequence (no Math.random), so a failure can be replayed.
let state = 12345;
const next = (bound) => {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state % bound;
};
const transfer = db.transaction((seq) => {
  const src = 1 + next(100);
  const dst = 1 + ((src + next(99)) % 100);
  const amount = 1 + next(50);
  debit.run(amount, src);
  credit.run(amount, dst);
  log.run(seq, src, dst, amount);
  if (seq % 50 === 0) {
    for (let i = 0; i < 256; i++) note.run(seq);
  }
});

for (let seq = 1; seq <= transfers; seq++) {
  transfer(seq);
  if (seq === Math.floor(transfers / 2)) {
    fs.writeFileSync(halfwayFile, String(seq));
    const deadline = Date.now() + WAIT_FOR_RESUME_MS;
    while (!fs.existsSync(resumeFile)) {
      if (Date.now() > deadline) throw new Error('the test never created RESUME_FILE');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

const final = {
  stats: ioUringStats(), // the VFS's counters include the WAL writes of every transfer
  log: db.prepare('SELECT count(*) AS n, sum(amount * seq) AS weighted FROM log').get(),
  balances: db.prepare("SELECT group_concat(balance, ',') AS b FROM (SELECT balance FROM acct ORDER BY id)").get().b,
  notes: db.prepare('SELECT count(*) AS n FROM note').get().n,
};
db.close();
console.log(JSON.stringify(final));
