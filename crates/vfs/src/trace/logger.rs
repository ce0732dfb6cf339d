//! [`TraceLogger`]: a small `log` logger for the places where nobody else can install
//! one — the loadable extension (its own copy of `log`'s statics) and
//! `sqlite-uring bench --trace FILE`. A `RUST_LOG`-style [`Filter`] and one [`Sink`].

use std::ffi::c_void;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use log::{LevelFilter, Log, Metadata, Record};

use super::targets::{LOG_DESTINATION_ENV, TARGET_IO, TARGET_RING, TARGET_VFS};
use crate::api::SqliteApi;
use crate::ffi::SQLITE_NOTICE;

/// The directives of a `RUST_LOG` value, as env_logger reads them: comma-separated
/// `level`, `target` (= trace) or `target=level`; the most specific target that is a
/// prefix of a record's target decides, else the bare level, else off. A `/regex`
/// suffix is ignored; unknown levels are skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    directives: Vec<(Option<String>, LevelFilter)>,
}

impl Filter {
    pub fn parse(spec: &str) -> Filter {
        let spec = spec.split('/').next().unwrap_or_default();
        let mut directives = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let directive = match part.split_once('=') {
                Some((target, level)) => level
                    .trim()
                    .parse()
                    .ok()
                    .map(|level| (Some(target.trim().to_string()), level)),
                None => Some(match part.parse() {
                    Ok(level) => (None, level),
                    Err(_) => (Some(part.to_string()), LevelFilter::Trace),
                }),
            };
            directives.extend(directive);
        }
        Filter { directives }
    }

    /// The level enabled for records of `target`.
    pub fn level_for(&self, target: &str) -> LevelFilter {
        let mut best: Option<(usize, LevelFilter)> = None;
        let mut default = LevelFilter::Off;
        for (name, level) in &self.directives {
            match name {
                None => default = *level,
                Some(name) if target.starts_with(name.as_str()) => {
                    let longer = match best {
                        None => true,
                        Some((length, _)) => name.len() >= length,
                    };
                    if longer {
                        best = Some((name.len(), *level));
                    }
                }
                Some(_) => {}
            }
        }
        best.map_or(default, |(_, level)| level)
    }

    /// The most verbose level any directive enables.
    pub fn max_level(&self) -> LevelFilter {
        self.directives
            .iter()
            .map(|(_, level)| *level)
            .max()
            .unwrap_or(LevelFilter::Off)
    }

    /// The most verbose level enabled for this crate's targets.
    pub fn sqlite_uring_level(&self) -> LevelFilter {
        [TARGET_VFS, TARGET_IO, TARGET_RING]
            .iter()
            .map(|target| self.level_for(target))
            .max()
            .unwrap_or(LevelFilter::Off)
    }
}

/// Where a [`TraceLogger`] writes.
pub struct Sink(SinkKind);

enum SinkKind {
    Discard,
    Stderr,
    File {
        writer: BufWriter<File>,
        flush_each_record: bool,
    },
    Sqlite3Log(SqliteApi),
}

impl Sink {
    /// Drops every record.
    pub fn discard() -> Sink {
        Sink(SinkKind::Discard)
    }

    /// One line per record on standard error.
    pub fn stderr() -> Sink {
        Sink(SinkKind::Stderr)
    }

    /// One line per record, buffered: written out by `log::logger().flush()`, by
    /// [`TraceLogger::set_sink`], or when the buffer fills.
    pub fn file(file: File) -> Sink {
        Sink(SinkKind::File {
            writer: BufWriter::with_capacity(1 << 20, file),
            flush_each_record: false,
        })
    }

    /// One `write` per record, so processes appending to one file (opened with
    /// `O_APPEND`) never split each other's lines, and nothing is lost at exit.
    pub fn file_line_by_line(file: File) -> Sink {
        Sink(SinkKind::File {
            writer: BufWriter::with_capacity(16 << 10, file),
            flush_each_record: true,
        })
    }

    /// `sqlite3_log(SQLITE_NOTICE, "target: message")` through the SQLite that handed the
    /// extension `api_routines`.
    ///
    /// # Safety
    /// `api_routines` must be the pointer SQLite passed to the extension entry point.
    #[doc(hidden)]
    pub unsafe fn sqlite3_log(api_routines: *const c_void) -> Option<Sink> {
        // SAFETY: forwarded caller contract.
        unsafe { SqliteApi::from_routines(api_routines) }.map(|api| Sink(SinkKind::Sqlite3Log(api)))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.0 {
            SinkKind::File { writer, .. } => writer.flush(),
            SinkKind::Stderr => std::io::stderr().flush(),
            SinkKind::Discard | SinkKind::Sqlite3Log(_) => Ok(()),
        }
    }
}

/// A `log` logger: records its [`Filter`] enables go to its [`Sink`] as
/// `<unix time s.µs> <pid>:<tid> <LEVEL> <target>: <message>` lines (or, for
/// `sqlite3_log`, `<target>: <message>`).
pub struct TraceLogger {
    filter: Filter,
    sink: Mutex<Sink>,
}

impl TraceLogger {
    pub fn new(filter: Filter, sink: Sink) -> TraceLogger {
        TraceLogger {
            filter,
            sink: Mutex::new(sink),
        }
    }

    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// Replaces the sink; the old one is flushed (its error returned) and dropped.
    pub fn set_sink(&self, sink: Sink) -> std::io::Result<()> {
        let mut old = std::mem::replace(&mut *self.lock(), sink);
        old.flush()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sink> {
        self.sink
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

thread_local! {
    static THREAD_ID: libc::pid_t = crate::sys::thread_id();
}

fn line_of(record: &Record<'_>) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let tid = THREAD_ID.with(|tid| *tid);
    format!(
        "{}.{:06} {}:{tid} {:<5} {}: {}\n",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        record.level(),
        record.target(),
        record.args()
    )
}

/// sqlite3_log formats into a fixed 210-byte buffer (`SQLITE_PRINT_BUF_SIZE` × 3) and
/// cuts what does not fit, so a long record goes out in pieces that fit; every piece
/// after the first starts with `… `.
const SQLITE3_LOG_PIECE_BYTES: usize = 200;

fn sqlite3_log_pieces(message: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = message;
    loop {
        let prefix = if pieces.is_empty() { "" } else { "… " };
        let room = SQLITE3_LOG_PIECE_BYTES - prefix.len();
        if rest.len() <= room {
            pieces.push(format!("{prefix}{rest}"));
            return pieces;
        }
        let mut cut = room;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        pieces.push(format!("{prefix}{}", &rest[..cut]));
        rest = &rest[cut..];
    }
}

impl Log for TraceLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.filter.level_for(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut sink = self.lock();
        match &mut sink.0 {
            SinkKind::Discard => {}
            SinkKind::Stderr => {
                let _ = std::io::stderr().write_all(line_of(record).as_bytes());
            }
            SinkKind::File {
                writer,
                flush_each_record,
            } => {
                let _ = writer.write_all(line_of(record).as_bytes());
                if *flush_each_record {
                    let _ = writer.flush();
                }
            }
            SinkKind::Sqlite3Log(api) => {
                let api = *api;
                // The host's callback runs without our lock held.
                drop(sink);
                let message = format!("{}: {}", record.target(), record.args());
                for piece in sqlite3_log_pieces(&message) {
                    api.log(SQLITE_NOTICE, &piece);
                }
            }
        }
    }

    fn flush(&self) {
        let _ = self.lock().flush();
    }
}

/// Makes `logger` the process's `log` logger (leaked: `log` keeps it for the rest of the
/// process) with `log::max_level()` set to what its filter enables.
pub fn install(logger: TraceLogger) -> Result<&'static TraceLogger, log::SetLoggerError> {
    let max_level = logger.filter.max_level();
    install_with_max_level(logger, max_level)
}

fn install_with_max_level(
    logger: TraceLogger,
    max_level: LevelFilter,
) -> Result<&'static TraceLogger, log::SetLoggerError> {
    let logger: &'static TraceLogger = Box::leak(Box::new(logger));
    log::set_logger(logger)?;
    log::set_max_level(max_level);
    Ok(logger)
}

static EXTENSION_LOGGING_DONE: AtomicBool = AtomicBool::new(false);

/// See `trace::init_extension_logging`.
///
/// # Safety
/// `api_routines` must be the pointer SQLite passed to the extension entry point.
pub(super) unsafe fn init_extension_logging(api_routines: *const c_void) -> Result<(), String> {
    if EXTENSION_LOGGING_DONE.load(Ordering::Acquire) {
        return Ok(());
    }
    let Ok(spec) = std::env::var("RUST_LOG") else {
        EXTENSION_LOGGING_DONE.store(true, Ordering::Release);
        return Ok(());
    };
    let filter = Filter::parse(&spec);
    let level = filter.sqlite_uring_level();
    if level == LevelFilter::Off {
        EXTENSION_LOGGING_DONE.store(true, Ordering::Release);
        return Ok(());
    }
    let destination = std::env::var(LOG_DESTINATION_ENV).unwrap_or_default();
    let sink = match destination.as_str() {
        "" | "stderr" => Sink::stderr(),
        // SAFETY: forwarded caller contract.
        "sqlite3_log" => unsafe { Sink::sqlite3_log(api_routines) }.ok_or_else(|| {
            format!("{LOG_DESTINATION_ENV}=sqlite3_log: the extension was handed no sqlite3_api_routines")
        })?,
        path => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| {
                    format!(
                        "{LOG_DESTINATION_ENV}={path}: cannot open the file for appending trace \
                         records ({error}); use stderr, sqlite3_log or a writable path"
                    )
                })?;
            Sink::file_line_by_line(file)
        }
    };
    EXTENSION_LOGGING_DONE.store(true, Ordering::Release);
    // Fails only if a logger is already installed in this copy of `log`: keep that one.
    if install_with_max_level(TraceLogger::new(filter, sink), level).is_ok() {
        log::debug!(
            target: TARGET_VFS,
            "sqlite-uring {}: trace logging (RUST_LOG={spec}) to {}",
            env!("CARGO_PKG_VERSION"),
            if destination.is_empty() { "stderr" } else { &destination }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_reads_rust_log_like_env_logger() {
        let filter = Filter::parse("info,sqlite_uring=trace,sqlite_uring::ring=off");
        assert_eq!(filter.level_for("sqlite_uring::vfs"), LevelFilter::Trace);
        assert_eq!(filter.level_for("sqlite_uring::ring"), LevelFilter::Off);
        assert_eq!(filter.level_for("rusqlite"), LevelFilter::Info);
        assert_eq!(filter.sqlite_uring_level(), LevelFilter::Trace);
        assert_eq!(filter.max_level(), LevelFilter::Trace);

        assert_eq!(
            Filter::parse("sqlite_uring").level_for("sqlite_uring::io"),
            LevelFilter::Trace
        );
        assert_eq!(
            Filter::parse("TRACE/regex").level_for("sqlite_uring::io"),
            LevelFilter::Trace
        );
        assert_eq!(
            Filter::parse("warn").sqlite_uring_level(),
            LevelFilter::Warn
        );
        assert_eq!(
            Filter::parse("other=trace,sqlite_uring=bogus").sqlite_uring_level(),
            LevelFilter::Off
        );
        assert_eq!(Filter::parse("").max_level(), LevelFilter::Off);
    }

    #[test]
    fn long_records_reach_sqlite3_log_in_pieces_that_fit() {
        let message = "é".repeat(300);
        let pieces = sqlite3_log_pieces(&message);
        assert!(pieces.len() > 1);
        assert!(pieces.iter().all(|p| p.len() <= SQLITE3_LOG_PIECE_BYTES));
        assert!(pieces[1].starts_with("… "));
        let joined: String = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    p.as_str()
                } else {
                    &p["… ".len()..]
                }
            })
            .collect();
        assert_eq!(joined, message);
        assert_eq!(sqlite3_log_pieces("short"), ["short"]);
    }

    #[test]
    fn file_sink_writes_filtered_lines() {
        let dir =
            std::env::temp_dir().join(format!("sqlite-uring-trace-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.log");
        let logger = TraceLogger::new(
            Filter::parse("sqlite_uring::vfs=trace"),
            Sink::file(File::create(&path).unwrap()),
        );
        for target in [TARGET_VFS, TARGET_RING] {
            logger.log(
                &Record::builder()
                    .target(target)
                    .level(log::Level::Trace)
                    .args(format_args!("xWrite offset=0"))
                    .build(),
            );
        }
        logger.set_sink(Sink::discard()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(
            lines[0].ends_with(" TRACE sqlite_uring::vfs: xWrite offset=0"),
            "{text}"
        );
    }
}
