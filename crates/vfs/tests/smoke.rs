use rusqlite::{Connection, OpenFlags};

#[test]
fn register_and_roundtrip() {
    let registration = sqlite_uring::register(sqlite_uring::Options::default()).expect("register");
    assert_eq!(registration.vfs_name, "io_uring");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let conn =
        Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "io_uring").unwrap();
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3);")
        .unwrap();
    let sum: i64 = conn
        .query_row("SELECT sum(x) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sum, 6);
    let stats = sqlite_uring::vfs_stats("io_uring").unwrap();
    assert!(stats.write_calls > 0 && stats.fsyncs > 0, "{stats:?}");
}
