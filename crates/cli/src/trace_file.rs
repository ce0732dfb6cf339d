//! `bench speed|blobs --trace FILE`: the VFS's trace records of one benchmark run
//! (every VFS call, engine batch and ring submission; see `sqlite_uring::trace`) written
//! to FILE, with `sqlite_uring::bench` records marking which test, target and run each
//! stretch belongs to.
//!
//! The logger is installed once per process and stays; a session points it at FILE and
//! raises `log::max_level()` to Trace, and [`Session::finish`] (or drop) flushes the file
//! and turns tracing off again, so the measured runs of a later benchmark in the same
//! process are not traced.

use std::path::Path;

/// Target of the records that mark the benchmark's progress in the trace.
#[cfg(feature = "trace")]
const BENCH_TARGET: &str = "sqlite_uring::bench";

/// Writes a progress mark into the trace (nothing unless a session is running).
#[allow(unused_variables)]
pub fn mark(args: std::fmt::Arguments<'_>) {
    #[cfg(feature = "trace")]
    log::info!(target: BENCH_TARGET, "{args}");
}

/// A running trace; tracing stops when it is finished or dropped.
pub struct Session {
    #[cfg(feature = "trace")]
    logger: &'static sqlite_uring::trace::TraceLogger,
    path: std::path::PathBuf,
    stopped: bool,
}

/// Starts tracing into `path` when given; the error names `--trace`.
pub fn start(path: Option<&Path>) -> anyhow::Result<Option<Session>> {
    let Some(path) = path else { return Ok(None) };
    imp::start(path).map(Some)
}

impl Session {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops tracing and writes the rest of the trace out.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        if std::mem::replace(&mut self.stopped, true) {
            return Ok(());
        }
        imp::stop(self)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(feature = "trace")]
mod imp {
    use std::path::Path;
    use std::sync::Mutex;

    use anyhow::Context;
    use sqlite_uring::trace::{Filter, Sink, TraceLogger};

    use super::Session;

    static LOGGER: Mutex<Option<&'static TraceLogger>> = Mutex::new(None);

    pub fn start(path: &Path) -> anyhow::Result<Session> {
        let file = std::fs::File::create(path).with_context(|| {
            format!(
                "--trace {}: cannot create the trace file; choose a writable path",
                path.display()
            )
        })?;
        let mut installed = LOGGER.lock().unwrap_or_else(|p| p.into_inner());
        let logger = match *installed {
            Some(logger) => logger,
            None => {
                let logger = sqlite_uring::trace::install(TraceLogger::new(
                    Filter::parse("sqlite_uring=trace"),
                    Sink::discard(),
                ))
                .map_err(|_| {
                    anyhow::anyhow!("--trace: another logger is already installed in this process")
                })?;
                *installed = Some(logger);
                logger
            }
        };
        logger
            .set_sink(Sink::file(file))
            .context("--trace: flushing the previous trace")?;
        log::set_max_level(log::LevelFilter::Trace);
        Ok(Session {
            logger,
            path: path.to_path_buf(),
            stopped: false,
        })
    }

    pub fn stop(session: &mut Session) -> anyhow::Result<()> {
        log::set_max_level(log::LevelFilter::Off);
        session
            .logger
            .set_sink(Sink::discard())
            .with_context(|| format!("--trace {}: writing the trace", session.path.display()))
    }
}

#[cfg(not(feature = "trace"))]
mod imp {
    use std::path::Path;

    use super::Session;

    pub fn start(_path: &Path) -> anyhow::Result<Session> {
        anyhow::bail!(
            "--trace needs the `trace` feature, and this binary was built without it; \
             rebuild with default features: cargo build --release -p sqlite-uring-cli"
        )
    }

    pub fn stop(_session: &mut Session) -> anyhow::Result<()> {
        Ok(())
    }
}
