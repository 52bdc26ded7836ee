//! What `llmchain run` shows on stderr while it waits: a spinner while the model is
//! thinking, and a line naming the tool calls that run longer than [`TOOL_LINE_AFTER`]
//! (`⠋ running TOOL… 3s`; concurrent ones share the line), cleared when the call ends.
//!
//! [`ProgressSink`] ends a call's line when the chain records the call's final status.
//! Nothing is drawn when stderr is not a terminal. Lines printed with
//! [`Progress::line`] go to stderr either way, without tearing the drawn lines.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use console::Term;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use llmchain::chain::{ChainState, ConversationSink, SinkFuture};
use llmchain::message::{ExecutionStatus, Message};

/// How long a tool call runs before its progress line appears.
pub(crate) const TOOL_LINE_AFTER: Duration = Duration::from_millis(500);

/// A retry wait at least this long is announced on a line.
pub(crate) const LONG_WAIT: Duration = Duration::from_secs(3);

/// The longest progress line, in characters.
pub(crate) const LINE_MAX: usize = 300;

/// A wait as a person reads it: `250ms`, `3s`, `1m 40s`.
fn shown_delay(d: Duration) -> String {
    let d = if d >= Duration::from_secs(1) {
        Duration::from_secs(d.as_secs())
    } else {
        Duration::from_millis(d.as_millis() as u64)
    };
    humantime::format_duration(d).to_string()
}

/// The spinner and the tool line of one run; cheap to clone.
///
/// At most one line is drawn at a time (the model is not waited for while tools run),
/// so a plain [`ProgressBar`] suffices: concurrent long calls share one line.
#[derive(Clone)]
pub(crate) struct Progress {
    inner: Arc<Inner>,
}

struct Inner {
    enabled: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    waiting: Option<ProgressBar>,
    /// Running tool calls by call id: when they started and the tool's name.
    tools: HashMap<String, (Instant, String)>,
    /// The tool line, once a call has run longer than [`TOOL_LINE_AFTER`].
    tool_line: Option<ProgressBar>,
}

impl State {
    /// The message of the tool line: the long-running tools, oldest first.
    fn tool_message(&self) -> Option<(String, Duration)> {
        let mut long: Vec<&(Instant, String)> = self
            .tools
            .values()
            .filter(|(t, _)| t.elapsed() >= TOOL_LINE_AFTER)
            .collect();
        long.sort_by_key(|(t, _)| *t);
        let oldest = long.first()?.0.elapsed();
        let mut names: Vec<&str> = long.iter().map(|(_, n)| n.as_str()).collect();
        names.dedup();
        Some((format!("running {}…", names.join(", ")), oldest))
    }

    /// Draws, updates or clears the tool line.
    fn refresh_tool_line(&mut self) {
        match (self.tool_message(), &self.tool_line) {
            (Some((msg, _)), Some(pb)) => pb.set_message(msg),
            (Some((msg, elapsed)), None) => {
                let pb = spinner(msg, true).with_elapsed(elapsed);
                pb.enable_steady_tick(Duration::from_millis(100));
                self.tool_line = Some(pb);
            }
            (None, _) => {
                if let Some(pb) = self.tool_line.take() {
                    pb.finish_and_clear();
                }
            }
        }
    }
}

/// stderr as indicatif sees it, two columns narrower than it is.
///
/// indicatif pads its line to the full width, leaving the cursor at the right margin;
/// the `^C` a terminal echoes on Ctrl-C then wraps onto a new line, and clearing the
/// progress line would clear that one instead. Two spare columns keep the echo on the
/// progress line, which is then cleared with it.
#[derive(Debug)]
struct Narrow(Term);

impl TermLike for Narrow {
    fn width(&self) -> u16 {
        self.0.size().1.saturating_sub(2).max(1)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn spinner(msg: String, elapsed: bool) -> ProgressBar {
    let template = if elapsed {
        "{spinner} {msg} {elapsed}"
    } else {
        "{spinner} {msg}"
    };
    let target = ProgressDrawTarget::term_like_with_hz(Box::new(Narrow(Term::stderr())), 20);
    let pb = ProgressBar::with_draw_target(None, target);
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style);
    }
    pb.set_message(msg);
    pb
}

impl Progress {
    /// Draws on stderr when it is a terminal.
    pub(crate) fn for_stderr() -> Self {
        Self::new(std::io::stderr().is_terminal())
    }

    /// Draws on stderr when `enabled`; otherwise draws nothing.
    pub(crate) fn new(enabled: bool) -> Self {
        Progress {
            inner: Arc::new(Inner {
                enabled,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Prints one line on stderr (above the drawn line, if any): control characters
    /// shown escaped, at most [`LINE_MAX`] characters (arguments can be megabytes; the
    /// whole text is in `conversations show`).
    pub(crate) fn line(&self, text: &str) {
        let text = crate::shown::inline(text, LINE_MAX);
        let state = lock(&self.inner.state);
        match state.tool_line.as_ref().or(state.waiting.as_ref()) {
            Some(pb) => pb.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    /// A model call failed and is tried again after `retry.delay`: the spinner says so,
    /// and a wait of [`LONG_WAIT`] or more (a provider's `Retry-After`, not the quick
    /// retries of a refused connection) gets a line, which is the only sign of it when
    /// stderr is not a terminal.
    pub(crate) fn retrying(&self, retry: &llmchain::chain::Retry) {
        let wait = shown_delay(retry.delay);
        if retry.delay >= LONG_WAIT {
            let reason = retry.reason.lines().next().unwrap_or_default();
            self.line(&format!(
                "  ↻ the model call failed ({reason}); attempt {} in {wait}",
                retry.attempt + 1
            ));
        }
        self.waiting(&format!("waiting {wait} to try the model again…"));
    }

    /// Shows the waiting spinner with `msg`.
    pub(crate) fn waiting(&self, msg: &str) {
        if !self.inner.enabled {
            return;
        }
        let pb = spinner(msg.to_owned(), false);
        pb.enable_steady_tick(Duration::from_millis(80));
        if let Some(old) = lock(&self.inner.state).waiting.replace(pb) {
            old.finish_and_clear();
        }
    }

    /// Shows `msg` on the waiting spinner (drawn again if it was cleared): what a call's
    /// arguments hold so far, while they stream.
    pub(crate) fn preview(&self, msg: &str) {
        if !self.inner.enabled {
            return;
        }
        let msg = crate::shown::inline(msg, LINE_MAX);
        let mut state = lock(&self.inner.state);
        match &state.waiting {
            Some(pb) => pb.set_message(msg),
            None => {
                let pb = spinner(msg, false);
                pb.enable_steady_tick(Duration::from_millis(80));
                state.waiting = Some(pb);
            }
        }
    }

    /// Clears the waiting spinner.
    pub(crate) fn done_waiting(&self) {
        if let Some(pb) = lock(&self.inner.state).waiting.take() {
            pb.finish_and_clear();
        }
    }

    /// A tool call started; the tool line names it after [`TOOL_LINE_AFTER`] unless it
    /// has ended by then. Needs a tokio runtime for the delay (without one: no line).
    pub(crate) fn tool_started(&self, call_id: &str, name: &str) {
        if !self.inner.enabled {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        lock(&self.inner.state)
            .tools
            .insert(call_id.to_owned(), (Instant::now(), name.to_owned()));
        let this = self.clone();
        let id = call_id.to_owned();
        rt.spawn(async move {
            tokio::time::sleep(TOOL_LINE_AFTER).await;
            let mut state = lock(&this.inner.state);
            if state.tools.contains_key(&id) {
                state.refresh_tool_line();
            }
        });
    }

    /// A tool call ended: the tool line no longer names it (and goes when none is left).
    pub(crate) fn tool_ended(&self, call_id: &str) {
        let mut state = lock(&self.inner.state);
        if state.tools.remove(call_id).is_some() {
            state.refresh_tool_line();
        }
    }

    /// Clears everything drawn (the run ended or was interrupted).
    pub(crate) fn clear(&self) {
        let mut state = lock(&self.inner.state);
        state.tools.clear();
        state.refresh_tool_line();
        if let Some(pb) = state.waiting.take() {
            pb.finish_and_clear();
        }
    }
}

/// A sink that forwards to another and ends a call's progress line as soon as the
/// call's final status is recorded (the chain's callbacks fire per batch, this per call).
pub(crate) struct ProgressSink {
    inner: Arc<dyn ConversationSink>,
    progress: Progress,
}

impl ProgressSink {
    /// Wraps `inner`.
    pub(crate) fn new(inner: Arc<dyn ConversationSink>, progress: Progress) -> Self {
        ProgressSink { inner, progress }
    }
}

impl ConversationSink for ProgressSink {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        self.inner.append_message(position, message)
    }

    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        self.inner.replace_message(position, message)
    }

    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a> {
        if matches!(status, ExecutionStatus::Completed | ExecutionStatus::Failed) {
            self.progress.tool_ended(call_id);
        }
        self.inner.set_tool_status(call_id, status)
    }

    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.inner.save_state(state)
    }

    fn checkpoint<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.inner.checkpoint(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: &Progress) -> Option<String> {
        lock(&p.inner.state)
            .tool_line
            .as_ref()
            .map(ProgressBar::message)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_appears_only_for_long_calls_and_is_cleared() {
        // Drawing needs a terminal (none here: nothing is drawn), the bookkeeping is the same.
        let p = Progress::new(true);
        p.tool_started("quick", "clock");
        p.tool_ended("quick");
        p.tool_started("slow", "sleep");
        p.tool_started("slow2", "fetch");
        tokio::time::sleep(TOOL_LINE_AFTER + Duration::from_millis(50)).await;
        assert_eq!(line(&p).as_deref(), Some("running sleep, fetch…"));
        let bar = lock(&p.inner.state).tool_line.clone().unwrap();
        assert!(bar.elapsed() >= TOOL_LINE_AFTER);
        p.tool_ended("slow");
        assert_eq!(line(&p).as_deref(), Some("running fetch…"));
        p.tool_ended("slow2");
        assert!(bar.is_finished());
        assert_eq!(line(&p), None);
        assert!(lock(&p.inner.state).tools.is_empty());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn disabled_tracks_nothing() {
        let p = Progress::new(false);
        p.tool_started("c1", "sleep");
        p.waiting("waiting");
        let state = lock(&p.inner.state);
        assert!(state.tools.is_empty() && state.waiting.is_none());
    }
}
