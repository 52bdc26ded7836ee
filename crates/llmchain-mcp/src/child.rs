//! The stdio transport to an MCP server we start.
//!
//! rmcp's line framing ([`AsyncRwTransport`]) over the child's pipes, with two things
//! rmcp's `TokioChildProcess` lacks:
//! - **A cap on one message that ends the connection with its cause.** rmcp drops a line
//!   over its own 16 MiB cap and keeps the connection, so the call that line answered
//!   waits for its whole timeout and then says "timed out", although the server answered
//!   at once. [`LineCap`] counts the bytes since the last newline as they are read; past
//!   the cap it records the size on the connection's [`Oversized`] flag and fails the
//!   read, which closes the connection: pending requests fail at once and the client
//!   names the real cause.
//! - **The tail of the server's stderr**, kept (the last [`STDERR_TAIL`] bytes) for the
//!   messages of a failed handshake or a server that died, instead of being discarded.
//! - **The whole process group ended** (Unix): the server starts in a process group of
//!   its own, and closing or dropping the transport kills that group, so what the
//!   server started (`npx` starting node, a shell script's children, a forked helper)
//!   does not outlive it.
//! - **And every descendant that left the group** (Linux): a helper that called
//!   `setsid()` (a daemon) is in a session and group of its own, and a double-forked one
//!   is no longer even a descendant (init adopted it). Each server starts with a
//!   variable naming its instance (`LLMCHAIN_MCP_INSTANCE`), which everything it starts
//!   inherits; closing the server ends every process whose environment carries it
//!   (`/proc/PID/environ`). What remains: a descendant that clears its environment
//!   before exec, and, when llmchain itself is killed (SIGKILL), the servers and their
//!   descendants, which nothing is left to end (servers exit when their stdin closes).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How much of a server's stderr is kept for error messages.
pub(crate) const STDERR_TAIL: usize = 2048;

/// How long a server may take to exit once its stdin is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Set (to the size read so far) when a server's message passed the cap.
#[derive(Debug, Default, Clone)]
pub(crate) struct Oversized(Arc<AtomicUsize>);

impl Oversized {
    /// The bytes of the oversized message read before the connection was closed, if any.
    pub(crate) fn get(&self) -> Option<usize> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    /// Records a message over the cap whose size is not known (an HTTP reply that
    /// rmcp stopped reading).
    pub(crate) fn mark_unknown_size(&self) {
        self.0.store(usize::MAX, Ordering::Relaxed);
    }

    /// Why the connection failed, if a message passed `cap`.
    pub(crate) fn reason(&self, cap: usize) -> Option<String> {
        let read = self.get()?;
        let read = match read {
            usize::MAX => String::new(),
            n => format!("{n} read "),
        };
        Some(format!(
            "it sent a message of more than {cap} bytes ({read}before the connection was closed; \
             McpOptions::max_message_bytes)"
        ))
    }
}

/// The last [`STDERR_TAIL`] bytes a server wrote to stderr.
#[derive(Debug, Default, Clone)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    /// The kept text, lossily decoded and trimmed (empty when the server said nothing).
    pub(crate) fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }

    fn push(&self, chunk: &[u8]) {
        if let Ok(mut tail) = self.0.lock() {
            tail.extend_from_slice(chunk);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
    }

    /// Reads `stderr` to its end, keeping the tail.
    fn collect(&self, mut stderr: ChildStderr) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                tail.push(&buf[..n]);
            }
        });
    }
}

/// A reader that fails once more than `cap` bytes arrive without a newline.
pub(crate) struct LineCap<R> {
    inner: R,
    cap: usize,
    since_newline: usize,
    oversized: Oversized,
}

impl<R> LineCap<R> {
    pub(crate) fn new(inner: R, cap: usize, oversized: Oversized) -> Self {
        LineCap {
            inner,
            cap,
            since_newline: 0,
            oversized,
        }
    }

    /// Counts `bytes`; the length of the longest line seen, when it is over the cap.
    fn count(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', bytes) {
            let line = self.since_newline + (newline - start);
            if line > self.cap {
                return Some(line);
            }
            self.since_newline = 0;
            start = newline + 1;
        }
        self.since_newline += bytes.len() - start;
        (self.since_newline > self.cap).then_some(self.since_newline)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let this = &mut *self;
        if let Some(size) = this.count(&buf.filled()[before..]) {
            this.oversized.0.store(size, Ordering::Relaxed);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the server sent a message of more than {} bytes", this.cap),
            )));
        }
        Poll::Ready(Ok(()))
    }
}

/// A started server: the transport over its pipes, and the process.
pub(crate) struct ChildTransport {
    transport: AsyncRwTransport<RoleClient, LineCap<ChildStdout>, ChildStdin>,
    child: Child,
    group: ProcessGroup,
}

/// The variable that marks every process a server starts with its instance.
const INSTANCE_VAR: &str = "LLMCHAIN_MCP_INSTANCE";

/// The processes a server started (Unix): its process group, and on Linux every process
/// whose environment carries the server's instance mark; killed when the transport
/// closes or is dropped.
#[derive(Debug)]
struct ProcessGroup {
    leader: Option<u32>,
    /// `LLMCHAIN_MCP_INSTANCE=<random>`, as it appears in `/proc/PID/environ`.
    mark: String,
}

impl ProcessGroup {
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.leader.take()
            && let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
        {
            // ESRCH (no such group: every member already gone) is fine.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            #[cfg(target_os = "linux")]
            kill_marked(&self.mark);
        }
        #[cfg(not(unix))]
        self.leader.take();
    }
}

/// Kills every process of this user whose environment holds `mark` (one entry of it,
/// exactly): the descendants of a server that left its process group.
#[cfg(target_os = "linux")]
fn kill_marked(mark: &str) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Another user's process, or one gone meanwhile: not readable, not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|v| v == mark.as_bytes())
            && let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a started server leaves to watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watch {
    pub(crate) oversized: Oversized,
    pub(crate) stderr: StderrTail,
}

impl ChildTransport {
    /// Starts `cmd` with piped stdin and stdout; stderr is inherited when `inherit_stderr`,
    /// otherwise its tail is kept.
    pub(crate) fn spawn(
        mut cmd: Command,
        max_message_bytes: usize,
        inherit_stderr: bool,
    ) -> io::Result<(ChildTransport, Watch)> {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(if inherit_stderr {
                std::process::Stdio::inherit()
            } else {
                std::process::Stdio::piped()
            })
            .kill_on_drop(true);
        // Its own process group: ended whole, and a Ctrl-C in the user's terminal goes
        // to llmchain, which ends the server, not to the server directly.
        #[cfg(unix)]
        cmd.process_group(0);
        let instance = format!("{:016x}{:08x}", rand_u64(), std::process::id());
        cmd.env(INSTANCE_VAR, &instance);
        let mut child = cmd.spawn()?;
        let group = ProcessGroup {
            leader: child.id(),
            mark: format!("{INSTANCE_VAR}={instance}"),
        };
        let missing = |what| io::Error::other(format!("the server's {what} is not a pipe"));
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let watch = Watch {
            oversized: Oversized::default(),
            stderr: StderrTail::default(),
        };
        if let Some(stderr) = child.stderr.take() {
            watch.stderr.collect(stderr);
        }
        let stdout = LineCap::new(stdout, max_message_bytes, watch.oversized.clone());
        // rmcp's own line cap stays above ours, so ours is the one that trips.
        let transport =
            AsyncRwTransport::new(stdout, stdin).with_max_line_length(max_message_bytes + 1);
        Ok((
            ChildTransport {
                transport,
                child,
                group,
            },
            watch,
        ))
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// The MCP stdio shutdown: close the server's stdin, give it [`EXIT_GRACE`] to exit,
    /// then kill it. (The process is also killed if the transport is dropped unclosed.)
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        let exited = tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_ok();
        // Whatever it started goes with it (the group outlives its leader).
        self.group.kill();
        if !exited {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// A random number for an instance mark: the std hasher's per-process random keys,
/// mixed with the clock.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(n: usize) -> LineCap<&'static [u8]> {
        LineCap::new(&[][..], n, Oversized::default())
    }

    #[test]
    fn lines_at_the_cap_pass_and_one_byte_more_trips_across_reads() {
        let mut c = cap(4);
        assert_eq!(c.count(b"abcd\nab"), None);
        assert_eq!(c.count(b"cd"), None);
        assert_eq!(c.count(b"\n\n1234\n"), None);
        assert_eq!(c.count(b"12"), None);
        assert_eq!(c.count(b"345\n"), Some(5));
        let mut c = cap(4);
        assert_eq!(c.count(b"123"), None);
        assert_eq!(
            c.count(b"45"),
            Some(5),
            "no newline yet: tripped as soon as it passes"
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_bytes() {
        let tail = StderrTail::default();
        tail.push(&vec![b'a'; STDERR_TAIL]);
        tail.push(b"Traceback: boom\n");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL - 1, "trimmed newline");
        assert!(text.ends_with("Traceback: boom"));
    }
}
