//! Helpers shared by the integration tests.
#![allow(dead_code)]

use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// Registers the `io_uring` VFS once (registration is idempotent).
pub fn register() {
    sqlite_uring::register(sqlite_uring::Options::default()).expect("io_uring VFS registers");
}

pub fn open(path: &Path, vfs: &str) -> Connection {
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
        .unwrap_or_else(|e| panic!("open {} with vfs {vfs}: {e}", path.display()))
}

/// Every row of `sql` as text, columns joined with `|`.
pub fn rows(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("prepare {sql}: {e}"));
    let columns = statement.column_count();
    let mut out = Vec::new();
    let mut rows = statement.query([]).unwrap();
    while let Some(row) = rows.next().unwrap_or_else(|e| panic!("step {sql}: {e}")) {
        let mut fields = Vec::with_capacity(columns);
        for i in 0..columns {
            let value: rusqlite::types::Value = row.get(i).unwrap();
            fields.push(match value {
                rusqlite::types::Value::Null => "NULL".to_string(),
                rusqlite::types::Value::Integer(v) => v.to_string(),
                rusqlite::types::Value::Real(v) => format!("{v:?}"),
                rusqlite::types::Value::Text(v) => v,
                rusqlite::types::Value::Blob(v) => format!("blob:{}:{:x}", v.len(), fnv(&v)),
            });
        }
        out.push(fields.join("|"));
    }
    out
}

pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    })
}

pub fn integrity_ok(conn: &Connection) {
    assert_eq!(rows(conn, "PRAGMA integrity_check"), vec!["ok".to_string()]);
}

/// The SQLite extended result code of a rusqlite error.
pub fn extended_code(error: &rusqlite::Error) -> i32 {
    match error {
        rusqlite::Error::SqliteFailure(e, _) => e.extended_code,
        other => panic!("not a SQLite failure: {other:?}"),
    }
}
