//! The names trace records and their configuration use: log targets, the environment
//! variable choosing the extension's sink. A leaf.

/// Target of the records of VFS calls.
pub const TARGET_VFS: &str = "sqlite_uring::vfs";
/// Target of the records of batches performed by the engine (any backend).
pub const TARGET_IO: &str = "sqlite_uring::io";
/// Target of the records of io_uring submissions.
pub const TARGET_RING: &str = "sqlite_uring::ring";
/// Whether this build has the trace hooks (cargo feature `trace`).
pub const COMPILED_IN: bool = cfg!(feature = "trace");
/// Environment variable choosing where the extension's trace goes: `stderr` (default),
/// `sqlite3_log`, or a file path (appended to, one `write` per record).
pub const LOG_DESTINATION_ENV: &str = "SQLITE_URING_LOG";
