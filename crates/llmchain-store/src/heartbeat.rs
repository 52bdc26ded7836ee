//! [`Heartbeat`]: keeps a run's lease alive while a chain works on it, and stops the
//! chain the moment the lease is lost or the run cancelled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::tool::CancellationToken;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::model::Lease;
use crate::store::Store;

/// Why a heartbeat stopped the run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeartbeatStop {
    /// Another claim took the run over, or the lease ran out.
    LeaseLost,
    /// The run was cancelled.
    Cancelled,
    /// No renewal succeeded for a whole lease length (the database was unreachable):
    /// the lease must be assumed lost. The last error is kept.
    Unreachable(String),
}

/// Renews a lease every third of its length on a background task (tokio) until dropped.
///
/// When the store answers `LeaseLost` or `RunCancelled`, or no renewal got through for
/// a whole lease length, it fires `stop` (give it the chain's
/// [`cancellation_token`](llmchain::chain::LLMChain::cancellation_token)) and records why
/// ([`stopped`](Self::stopped)). A transient failure is retried at the next beat.
/// Writes stay fenced whatever the heartbeat does: it only makes the worker notice
/// sooner and keeps a slow model call from losing the lease.
#[derive(Debug)]
pub struct Heartbeat {
    task: JoinHandle<()>,
    stopped: Arc<Mutex<Option<HeartbeatStop>>>,
}

impl Heartbeat {
    /// Starts renewing `lease` for `duration` at a time.
    pub fn spawn<S: Store + 'static>(
        store: Arc<S>,
        lease: Lease,
        duration: Duration,
        stop: CancellationToken,
    ) -> Heartbeat {
        let stopped = Arc::new(Mutex::new(None));
        let record = stopped.clone();
        let task = tokio::spawn(async move {
            let every = (duration / 3).max(Duration::from_millis(10));
            // The lease was fresh when claimed; count from now to be safe.
            let mut held_until = Instant::now() + duration;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let asked = Instant::now();
                let why = match store.renew_lease(&lease, duration).await {
                    Ok(_) => {
                        held_until = asked + duration;
                        continue;
                    }
                    Err(StoreError::LeaseLost { .. }) => HeartbeatStop::LeaseLost,
                    Err(StoreError::RunCancelled { .. }) => HeartbeatStop::Cancelled,
                    Err(e) if Instant::now() < held_until => {
                        tracing::warn!(run = %lease.run_id, error = %e, "lease renewal failed; retrying");
                        continue;
                    }
                    Err(e) => HeartbeatStop::Unreachable(e.to_string()),
                };
                tracing::warn!(run = %lease.run_id, worker = %lease.worker_id, reason = ?why, "lease lost; stopping the run");
                *record.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                stop.cancel();
                return;
            }
        });
        Heartbeat { task, stopped }
    }

    /// Why the heartbeat stopped the run, if it did.
    pub fn stopped(&self) -> Option<HeartbeatStop> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}
