// A Java program writing through the io_uring VFS with org.xerial:sqlite-jdbc.
//
//   java -cp sqlite-jdbc-3.54.1.0.jar src/main/java/Example.java \
//       EXTENSION DATABASE [TRANSFERS [HALFWAY_FILE RESUME_FILE]]
//
// EXTENSION is the built extension (target/release/libsqlite_uring, with or without .so);
// DATABASE must not exist yet. The program keeps 100 accounts whose balances start at 1000
// and runs TRANSFERS (default 3000) transactions in WAL mode, each moving an amount
// between two accounts and logging it; every 50th also writes a 1 MB batch of notes,
// through a 32-page cache, so SQLite spills into the WAL before the commit. Any other
// process (a stock sqlite3, on the unix VFS) may read the database meanwhile and always
// sees whole transactions: the sum of the balances stays 100000.
//
// With HALFWAY_FILE and RESUME_FILE, it creates HALFWAY_FILE after half of the transfers
// and waits for RESUME_FILE to appear before going on (the repository's test reads a
// known state from another process then).
//
// It prints one JSON line: what PRAGMA io_uring_stats says (the VFS that carries the
// database and its I/O counters) and the final state as it sees it.

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import org.sqlite.SQLiteConfig;

public final class Example {
    private static final int ACCOUNTS = 100;
    private static final int INITIAL_BALANCE = 1000;
    private static final int NOTES_EVERY = 50; // transfers
    private static final int NOTES_PER_BATCH = 256; // 4 KiB each
    private static final Duration WAIT_FOR_RESUME = Duration.ofMinutes(10);

    public static void main(String[] args) throws Exception {
        if (args.length != 2 && args.length != 3 && args.length != 5) {
            System.err.println("usage: EXTENSION DATABASE [TRANSFERS [HALFWAY_FILE RESUME_FILE]]");
            System.exit(2);
        }
        String extension = args[0];
        Path path = Path.of(args[1]).toAbsolutePath();
        int transfers = args.length >= 3 ? Integer.parseInt(args[2]) : 3000;
        if (Files.exists(path)) {
            throw new IllegalArgumentException(path + " exists: give the name of a new database");
        }

        // The extension registers the io_uring VFS when it is loaded into a connection, so
        // that connection itself cannot be opened on io_uring. A throwaway in-memory
        // connection, the only one allowed to load extensions, loads it; the VFS then stays
        // registered for the whole process (the extension stays loaded after that
        // connection closes).
        SQLiteConfig loading = new SQLiteConfig();
        loading.enableLoadExtension(true);
        try (Connection bootstrap = DriverManager.getConnection("jdbc:sqlite::memory:", loading.toProperties());
                PreparedStatement load = bootstrap.prepareStatement("SELECT load_extension(?)")) {
            load.setString(1, extension);
            load.executeQuery().close();
        }

        // A URI filename names the VFS: vfs=io_uring.
        SQLiteConfig config = new SQLiteConfig();
        config.setJournalMode(SQLiteConfig.JournalMode.WAL);
        config.setBusyTimeout(30000);
        config.setCacheSize(32);
        config.setTransactionMode(SQLiteConfig.TransactionMode.IMMEDIATE);
        String url = "jdbc:sqlite:" + path.toUri() + "?vfs=io_uring";
        try (Connection db = DriverManager.getConnection(url, config.toProperties())) {
            // Only the io_uring VFS answers this pragma: no row means another VFS has the file.
            ioUringStats(db);
            if (!"wal".equals(queryString(db, "PRAGMA journal_mode"))) {
                throw new SQLException("WAL mode refused");
            }
            try (Statement schema = db.createStatement()) {
                schema.executeUpdate("CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)");
                schema.executeUpdate("CREATE TABLE log(seq INTEGER PRIMARY KEY, src INTEGER NOT NULL,"
                        + " dst INTEGER NOT NULL, amount INTEGER NOT NULL)");
                schema.executeUpdate(
                        "CREATE TABLE note(id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL)");
            }
            db.setAutoCommit(false);
            try (PreparedStatement open = db.prepareStatement("INSERT INTO acct(id, balance) VALUES (?, ?)")) {
                for (int id = 1; id <= ACCOUNTS; id++) {
                    open.setInt(1, id);
                    open.setInt(2, INITIAL_BALANCE);
                    open.executeUpdate();
                }
            }
            db.commit();

            try (PreparedStatement debit = db.prepareStatement("UPDATE acct SET balance = balance - ? WHERE id = ?");
                    PreparedStatement credit =
                            db.prepareStatement("UPDATE acct SET balance = balance + ? WHERE id = ?");
                    PreparedStatement log =
                            db.prepareStatement("INSERT INTO log(seq, src, dst, amount) VALUES (?, ?, ?, ?)");
                    PreparedStatement note =
                            db.prepareStatement("INSERT INTO note(seq, body) VALUES (?, randomblob(4096))")) {
                // A deterministic sequence (no java.util.Random), so a failure can be replayed.
                Sequence next = new Sequence(12345);
                for (int seq = 1; seq <= transfers; seq++) {
                    long src = 1 + next.below(ACCOUNTS);
                    long dst = 1 + (src + next.below(ACCOUNTS - 1)) % ACCOUNTS;
                    long amount = 1 + next.below(50);
                    try {
                        run(debit, amount, src);
                        run(credit, amount, dst);
                        run(log, seq, src, dst, amount);
                        if (seq % NOTES_EVERY == 0) {
                            for (int i = 0; i < NOTES_PER_BATCH; i++) {
                                run(note, seq);
                            }
                        }
                        db.commit();
                    } catch (SQLException e) {
                        try {
                            db.rollback();
                        } catch (SQLException rollback) {
                            e.addSuppressed(rollback); // SQLite may have rolled back already
                        }
                        throw new SQLException("transfer " + seq + ": " + e.getMessage(), e);
                    }
                    if (args.length == 5 && seq == transfers / 2) {
                        pauseHalfway(Path.of(args[3]), Path.of(args[4]), seq);
                    }
                }
            }
            db.setAutoCommit(true);

            // Read before closing: the counters (this file's, and the whole VFS's in this
            // process) include the WAL writes of every transfer.
            String stats = ioUringStats(db);
            String json;
            try (Statement query = db.createStatement();
                    ResultSet log = query.executeQuery("SELECT count(*), sum(amount * seq) FROM log")) {
                log.next();
                json = "{\"stats\":" + stats + ",\"log\":{\"n\":" + log.getLong(1) + ",\"weighted\":"
                        + log.getLong(2) + "}";
            }
            json += ",\"balances\":\""
                    + queryString(db, "SELECT group_concat(balance, ',') FROM (SELECT balance FROM acct ORDER BY id)")
                    + "\",\"notes\":" + queryString(db, "SELECT count(*) FROM note") + "}";
            System.out.println(json);
        }
    }

    /** PRAGMA io_uring_stats: JSON naming the VFS, with its I/O counters. */
    private static String ioUringStats(Connection db) throws SQLException {
        String stats = queryString(db, "PRAGMA io_uring_stats");
        if (stats == null) {
            throw new SQLException("PRAGMA io_uring_stats returned no row: the database is not on io_uring");
        }
        return stats;
    }

    /** The first column of the first row, or null without a row. */
    private static String queryString(Connection db, String sql) throws SQLException {
        try (Statement query = db.createStatement();
                ResultSet rows = query.executeQuery(sql)) {
            return rows.next() ? rows.getString(1) : null;
        }
    }

    private static void run(PreparedStatement statement, long... values) throws SQLException {
        for (int i = 0; i < values.length; i++) {
            statement.setLong(i + 1, values[i]);
        }
        statement.executeUpdate();
    }

    /** Creates halfway and waits until resume exists. */
    private static void pauseHalfway(Path halfway, Path resume, int seq) throws Exception {
        Files.writeString(halfway, Integer.toString(seq));
        Instant deadline = Instant.now().plus(WAIT_FOR_RESUME);
        while (!Files.exists(resume)) {
            if (Instant.now().isAfter(deadline)) {
                throw new IllegalStateException(resume + " did not appear within " + WAIT_FOR_RESUME);
            }
            Thread.sleep(10);
        }
    }

    /** A linear congruential generator: the same numbers on every run. */
    private static final class Sequence {
        private long state;

        Sequence(long seed) {
            state = seed;
        }

        long below(long bound) {
            state = (state * 1103515245L + 12345L) % 2147483648L;
            return state % bound;
        }
    }
}
