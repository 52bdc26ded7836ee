//! `Hub`: the chunks of the response being generated for one chat, kept (up to a
//! bound) so that a client that reconnects can replay them and follow the rest live.
//!
//! One writer (the turn's task, which runs whether or not anyone listens) appends;
//! any number of readers follow. Memory is bounded per response: past
//! [`MAX_REPLAY_BYTES`], the oldest chunks are dropped, and a reader that had not read
//! them yet (a slow reader, or one that connects late) is ended rather than let the
//! buffer grow: the run goes on, is stored, and a reload shows it.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::Notify;

/// The most one response keeps for replay, in bytes of its events.
pub const MAX_REPLAY_BYTES: usize = 4 << 20;

/// The response of one chat, being generated.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    inner: Mutex<Inner>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    /// Chunks from offset `base` on.
    chunks: VecDeque<Bytes>,
    base: usize,
    bytes: usize,
    done: bool,
}

/// What a reader gets next.
pub(crate) enum Next {
    /// These chunks, from its offset on.
    Chunks(Vec<Bytes>),
    /// Nothing yet: wait.
    Wait,
    /// The response is over.
    Done,
    /// The reader fell behind what is kept: it ends.
    Behind,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a chunk (and drops the oldest past the bound).
    pub(crate) fn push(&self, chunk: Bytes) {
        {
            let mut inner = self.lock();
            inner.bytes += chunk.len();
            inner.chunks.push_back(chunk);
            while inner.bytes > MAX_REPLAY_BYTES && inner.chunks.len() > 1 {
                if let Some(old) = inner.chunks.pop_front() {
                    inner.bytes -= old.len();
                    inner.base += 1;
                }
            }
        }
        self.changed.notify_waiters();
    }

    /// Marks the response over.
    pub(crate) fn finish(&self) {
        self.lock().done = true;
        self.changed.notify_waiters();
    }

    /// Whether the whole response can still be replayed from its first chunk.
    pub(crate) fn replayable(&self) -> bool {
        self.lock().base == 0
    }

    /// What a reader at `offset` gets next (at most `max` chunks); advances `offset`.
    pub(crate) fn next(&self, offset: &mut usize, max: usize) -> Next {
        let inner = self.lock();
        if *offset < inner.base {
            return Next::Behind;
        }
        let start = *offset - inner.base;
        if start < inner.chunks.len() {
            let out: Vec<Bytes> = inner.chunks.iter().skip(start).take(max).cloned().collect();
            *offset += out.len();
            return Next::Chunks(out);
        }
        if inner.done { Next::Done } else { Next::Wait }
    }

    /// Waits until something changes (call after [`next`](Self::next) said
    /// [`Next::Wait`]; a change between the two is not lost: the waiter registers first).
    pub(crate) async fn wait(&self, offset: usize) {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let inner = self.lock();
            if inner.done || offset < inner.base || offset - inner.base < inner.chunks.len() {
                return;
            }
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_replays_then_follows_and_a_slow_one_is_ended() {
        let hub = Hub::default();
        hub.push(Bytes::from_static(b"a"));
        hub.push(Bytes::from_static(b"b"));
        let mut at = 0;
        assert!(matches!(hub.next(&mut at, 10), Next::Chunks(c) if c.len() == 2));
        assert!(matches!(hub.next(&mut at, 10), Next::Wait));
        hub.push(Bytes::from_static(b"c"));
        assert!(
            matches!(hub.next(&mut at, 10), Next::Chunks(c) if c == [Bytes::from_static(b"c")])
        );
        // Past the bound the oldest go: a reader that had not read them is behind.
        let mut slow = 0;
        hub.push(Bytes::from(vec![b'x'; MAX_REPLAY_BYTES]));
        assert!(matches!(hub.next(&mut slow, 10), Next::Behind));
        assert!(!hub.replayable());
        hub.finish();
        assert!(matches!(hub.next(&mut at, 10), Next::Chunks(c) if c.len() == 1));
        assert!(matches!(hub.next(&mut at, 10), Next::Done));
    }
}
