//! Standard output that never panics when its reader goes away.
//!
//! `println!` panics on a closed pipe (`llmchain demo | head -1`): Rust ignores SIGPIPE,
//! so a write fails with `BrokenPipe`, and the panic ended a run before its messages
//! were stored. Through [`out!`] and [`outln!`] a closed stdout is noted once and later
//! output is dropped, so the run goes on to its end and everything is stored; the
//! process then exits as it would have.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout and flushes it; after a write error nothing more is written.
pub(crate) fn write(args: fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    if out.write_fmt(args).and_then(|()| out.flush()).is_err() {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes raw bytes to stdout (a request body); a reader that went away is not an
/// error, any other failure is.
pub(crate) fn write_bytes(bytes: &[u8]) -> io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        other => other,
    }
}

/// `print!` that survives a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

/// `println!` that survives a closed stdout.
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {out, outln};
