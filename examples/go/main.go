// A Go program writing through the io_uring VFS with github.com/mattn/go-sqlite3.
//
//	go run . EXTENSION DATABASE [TRANSFERS [HALFWAY_FILE RESUME_FILE]]
//
// EXTENSION is the built extension (target/release/libsqlite_uring, with or without
// .so); DATABASE must not exist yet. The program keeps 100 accounts whose balances start
// at 1000 and runs TRANSFERS (default 3000) transactions in WAL mode, each moving an
// amount between two accounts and logging it; every 50th also writes a 1 MB batch of
// notes, through a 32-page cache, so SQLite spills into the WAL before the commit. Any
// other process (a stock sqlite3, on the unix VFS) may read the database meanwhile and
// always sees whole transactions: the sum of the balances stays 100000.
//
// With HALFWAY_FILE and RESUME_FILE, it creates HALFWAY_FILE after half of the transfers
// and waits for RESUME_FILE to appear before going on (the repository's test reads a
// known state from another process then).
//
// It prints one JSON line: what PRAGMA io_uring_stats says (the VFS that carries the
// database and its I/O counters) and the final state as it sees it.
package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/mattn/go-sqlite3"
)

const (
	accounts       = 100
	initialBalance = 1000
	notesEvery     = 50  // transfers
	notesPerBatch  = 256 // 4 KiB each
	waitForResume  = 10 * time.Minute
)

type report struct {
	Stats json.RawMessage `json:"stats"`
	Log   struct {
		N        int64 `json:"n"`
		Weighted int64 `json:"weighted"`
	} `json:"log"`
	Balances string `json:"balances"`
	Notes    int64  `json:"notes"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 && len(args) != 3 && len(args) != 5 {
		return errors.New("usage: EXTENSION DATABASE [TRANSFERS [HALFWAY_FILE RESUME_FILE]]")
	}
	extension, path := args[0], args[1]
	transfers := 3000
	if len(args) >= 3 {
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 1 {
			return fmt.Errorf("TRANSFERS must be a positive number, not %q", args[2])
		}
		transfers = n
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists: give the name of a new database", path)
	}

	// Every connection this driver opens loads the extension (the driver's extension
	// list, entry point sqlite3_sqliteuring_init), which registers the io_uring VFS.
	sql.Register("sqlite3_uring", &sqlite3.SQLiteDriver{Extensions: []string{extension}})

	// The driver loads the extension only once it has opened the connection, so the very
	// first connection cannot be opened on io_uring: it would fail with "no such vfs".
	// A throwaway in-memory connection loads it first; the VFS then stays registered for
	// the whole process (the extension stays loaded after that connection closes).
	bootstrap, err := sql.Open("sqlite3_uring", ":memory:")
	if err != nil {
		return err
	}
	if err := bootstrap.Ping(); err != nil {
		return fmt.Errorf("loading %s: %w", extension, err)
	}
	bootstrap.Close()

	// vfs=io_uring names the VFS; the _-prefixed settings are the driver's, applied to
	// every connection it opens. One connection is enough for one writer.
	db, err := sql.Open("sqlite3_uring", path+
		"?vfs=io_uring&_journal_mode=WAL&_busy_timeout=30000&_txlock=immediate&_cache_size=32")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	// Only the io_uring VFS answers this pragma: no row means another VFS has the file.
	if _, err := ioUringStats(db); err != nil {
		return err
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("WAL mode refused (journal_mode %q): %v", mode, err)
	}

	if _, err := db.Exec(`
		CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
		CREATE TABLE log(seq INTEGER PRIMARY KEY, src INTEGER NOT NULL, dst INTEGER NOT NULL,
		                 amount INTEGER NOT NULL);
		CREATE TABLE note(id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL);`); err != nil {
		return err
	}
	err = inTransaction(db, func(tx *sql.Tx) error {
		for id := 1; id <= accounts; id++ {
			if _, err := tx.Exec("INSERT INTO acct(id, balance) VALUES (?, ?)", id, initialBalance); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	// A deterministic sequence (no math/rand), so a failure can be replayed.
	state := int64(12345)
	next := func(bound int64) int64 {
		state = (state*1103515245 + 12345) % 2147483648
		return state % bound
	}
	for seq := 1; seq <= transfers; seq++ {
		src := 1 + next(accounts)
		dst := 1 + (src+next(accounts-1))%accounts
		amount := 1 + next(50)
		err := inTransaction(db, func(tx *sql.Tx) error {
			statements := []struct {
				query string
				args  []any
			}{
				{"UPDATE acct SET balance = balance - ? WHERE id = ?", []any{amount, src}},
				{"UPDATE acct SET balance = balance + ? WHERE id = ?", []any{amount, dst}},
				{"INSERT INTO log(seq, src, dst, amount) VALUES (?, ?, ?, ?)", []any{seq, src, dst, amount}},
			}
			for _, s := range statements {
				if _, err := tx.Exec(s.query, s.args...); err != nil {
					return err
				}
			}
			if seq%notesEvery == 0 {
				for i := 0; i < notesPerBatch; i++ {
					if _, err := tx.Exec("INSERT INTO note(seq, body) VALUES (?, randomblob(4096))", seq); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("transfer %d: %w", seq, err)
		}
		if len(args) == 5 && seq == transfers/2 {
			if err := pauseHalfway(args[3], args[4], seq); err != nil {
				return err
			}
		}
	}

	var out report
	// Read before closing: the counters (this file's, and the whole VFS's in this
	// process) include the WAL writes of every transfer.
	if out.Stats, err = ioUringStats(db); err != nil {
		return err
	}
	if err := db.QueryRow("SELECT count(*), sum(amount * seq) FROM log").Scan(&out.Log.N, &out.Log.Weighted); err != nil {
		return err
	}
	if err := db.QueryRow("SELECT group_concat(balance, ',') FROM (SELECT balance FROM acct ORDER BY id)").Scan(&out.Balances); err != nil {
		return err
	}
	if err := db.QueryRow("SELECT count(*) FROM note").Scan(&out.Notes); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	line, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// ioUringStats is PRAGMA io_uring_stats: JSON naming the VFS, with its I/O counters.
func ioUringStats(db *sql.DB) (json.RawMessage, error) {
	var stats string
	if err := db.QueryRow("PRAGMA io_uring_stats").Scan(&stats); err != nil {
		return nil, fmt.Errorf("PRAGMA io_uring_stats (no row: the database is not on io_uring): %w", err)
	}
	return json.RawMessage(stats), nil
}

// inTransaction runs body in one transaction, committed if body succeeds.
func inTransaction(db *sql.DB, body func(*sql.Tx) error) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	if err := body(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// pauseHalfway creates halfway and waits until resume exists.
func pauseHalfway(halfway, resume string, seq int) error {
	if err := os.WriteFile(halfway, []byte(strconv.Itoa(seq)), 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(waitForResume)
	for {
		if _, err := os.Stat(resume); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", resume, waitForResume)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
