//! Catching panics in tool code, with the panic's source location.
//!
//! # How the location is captured
//!
//! `catch_unwind` gives only the payload; the location (`file:line:column`) is only
//! known to the panic hook. We install, once per process, a hook that *chains to the
//! hook that was installed before it* (so an application's own hook, or the default
//! one that prints to stderr, still sees every panic), and that records the location
//! and a [`Backtrace`] into a thread-local slot — but only while the thread is inside
//! [`catch`]. The hook runs on the panicking thread before unwinding, and [`catch`]
//! wraps every poll of a tool future, so the slot is always filled by the panic that
//! [`catch`] then catches, on the same thread, even on a multi-threaded runtime where
//! a future moves between threads across polls.
//!
//! The alternative — spawning each body and using `JoinError::into_panic` — loses the
//! location, costs a task per call and needs `'static` borrows, so it is not used.
//!
//! If the application replaces the hook after ours was installed, panics are still
//! caught but their location is unknown (`None`). The backtrace is captured with
//! [`Backtrace::capture`], so it is only non-empty when `RUST_BACKTRACE` (or
//! `RUST_LIB_BACKTRACE`) enables it.

use std::any::Any;
use std::backtrace::{Backtrace, BacktraceStatus};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

use crate::message::ToolException;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<(Option<String>, Option<String>)>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Installs the location-recording hook (once per process; chains to the previous hook).
pub(crate) fn install_hook() {
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if ARMED.with(Cell::get) {
                let location = info.location().map(ToString::to_string);
                let bt = Backtrace::capture();
                let backtrace = (bt.status() == BacktraceStatus::Captured).then(|| bt.to_string());
                CAUGHT.with(|c| *c.borrow_mut() = Some((location, backtrace)));
            }
            previous(info);
        }));
    });
}

/// Runs `f`, turning a panic into a [`ToolException`].
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, ToolException> {
    let was = ARMED.with(|a| a.replace(true));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    ARMED.with(|a| a.set(was));
    r.map_err(|payload| {
        let (location, backtrace) = CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or_default();
        ToolException {
            message: payload_message(payload.as_ref()),
            location,
            backtrace,
        }
    })
}

fn payload_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic whose payload is not a string".to_owned()
    }
}

/// A future that catches panics raised while it is polled.
pub(crate) struct CatchPanic<F> {
    inner: Option<F>,
}

impl<F> CatchPanic<F> {
    pub(crate) fn new(inner: F) -> Self {
        CatchPanic { inner: Some(inner) }
    }
}

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, ToolException>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            // Polled after completion: stay pending rather than panic.
            return Poll::Pending;
        };
        match catch(|| Pin::new(inner).poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                self.inner = None;
                Poll::Ready(Ok(v))
            }
            Err(e) => {
                // A future that panicked must not be polled again; drop it now.
                self.inner = None;
                Poll::Ready(Err(e))
            }
        }
    }
}

/// The text the model sees for a caught panic: the message and its source location.
/// `during` is empty or starts with a space (" while parsing its arguments").
pub(crate) fn exception_text(tool: &str, during: &str, e: &ToolException) -> String {
    match &e.location {
        Some(loc) => format!(
            "ERROR: tool {tool} panicked{during}: {} at {loc}",
            e.message
        ),
        None => format!("ERROR: tool {tool} panicked{during}: {}", e.message),
    }
}
