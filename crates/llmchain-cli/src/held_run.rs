//! [`HeldRun`]: the lease an interactive command (`run`, `conversations resume`) holds
//! on its conversation's run, so that two processes never both execute it.
//!
//! The command takes the lease before it loads the conversation
//! ([`Store::claim_conversation`]): a second process gets "is being run by …" and stops
//! before doing anything. Every write goes through a sink fenced by the lease, a
//! heartbeat renews it while the command runs, and the command ends it with the run's
//! outcome.

use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::ChainState;
use llmchain::tool::CancellationToken;
use llmchain_store::review::new_reviews;
use llmchain_store::sink::{StoreSink, keep_extra, run_state};
use llmchain_store::{AnyStore, Heartbeat, Lease, Run, RunState, RunStatus, Store, StoreError};

use crate::error::CliError;

/// How long an interactive lease lasts between heartbeats (renewed every third).
const LEASE: Duration = Duration::from_secs(30);

/// A run this process holds.
pub(crate) struct HeldRun {
    store: Arc<AnyStore>,
    run: Run,
    lease: Lease,
    sink: StoreSink<AnyStore>,
    heartbeat: Option<Heartbeat>,
    mode: String,
}

impl HeldRun {
    /// Takes the lease on `conversation`'s run (creating one if it has none), or says
    /// who holds it. `stop` is cancelled if the lease is lost while the command runs.
    pub(crate) async fn take(
        store: Arc<AnyStore>,
        conversation: &str,
        mode: &str,
        stop: CancellationToken,
    ) -> Result<HeldRun, CliError> {
        HeldRun::take_with(store, conversation, mode, stop, Default::default()).await
    }

    /// [`take`](Self::take), recording `extra` (the job) in the run it creates.
    pub(crate) async fn take_with(
        store: Arc<AnyStore>,
        conversation: &str,
        mode: &str,
        stop: CancellationToken,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> Result<HeldRun, CliError> {
        let worker = format!("cli-{}-{}", std::process::id(), instance_suffix());
        let state = RunState {
            mode: mode.to_owned(),
            extra,
            ..Default::default()
        };
        let run = store
            .claim_conversation(conversation, &worker, LEASE, &state)
            .await
            .map_err(|e| match e {
                StoreError::RunBusy { .. } | StoreError::QueuedRunOpen { .. } => {
                    CliError::Runtime(e.to_string())
                }
                other => crate::cmd::conversations::store_error(other),
            })?;
        let lease = run
            .lease()
            .ok_or_else(|| CliError::Runtime("the claimed run has no lease".into()))?;
        let sink = StoreSink::new(store.clone(), run.conversation_id.clone())
            .with_lease(lease.clone(), mode)
            .keeping(&run.state.extra);
        let heartbeat = Heartbeat::spawn(store.clone(), lease.clone(), LEASE, stop);
        Ok(HeldRun {
            store,
            run,
            lease,
            sink,
            heartbeat: Some(heartbeat),
            mode: mode.to_owned(),
        })
    }

    /// The run.
    pub(crate) fn run(&self) -> &Run {
        &self.run
    }

    /// A sink for the conversation, every write fenced by the lease.
    pub(crate) fn sink(&self) -> StoreSink<AnyStore> {
        self.sink.clone()
    }

    /// Why the heartbeat stopped the command, if it did.
    pub(crate) fn lost(&self) -> Option<String> {
        let why = self.heartbeat.as_ref()?.stopped()?;
        Some(format!(
            "this process lost the run of conversation {} ({why:?}): another process took it over, \
             or it was cancelled; nothing more was written",
            self.run.conversation_id
        ))
    }

    /// The run state to save for `chain`.
    fn state_of(&self, chain: Option<&ChainState>) -> RunState {
        let mut state = chain
            .map(|c| run_state(c, &self.mode))
            .unwrap_or_else(|| self.run.state.clone());
        keep_extra(&mut state, &self.run.state.extra);
        state
    }

    /// Ends the hold with `status`, saving the chain's state.
    pub(crate) async fn finish(mut self, status: RunStatus, chain: Option<&ChainState>) {
        self.heartbeat.take();
        let mut state = self.state_of(chain);
        state.status = status;
        if let Err(e) = self.store.complete_run(&self.lease, &state).await {
            warn_unrecorded(&self.run.id, &e);
        }
    }

    /// Ends the hold as `failed`, keeping `error` as the run's last error (and the
    /// chain's state, when there is one).
    pub(crate) async fn fail(mut self, error: &str, chain: Option<&ChainState>) {
        self.heartbeat.take();
        if chain.is_some() {
            let state = self.state_of(chain);
            if let Err(e) = self.store.update_run(&self.lease, &state).await {
                warn_unrecorded(&self.run.id, &e);
            }
        }
        if let Err(e) = self.store.fail_run(&self.lease, error, false).await {
            warn_unrecorded(&self.run.id, &e);
        }
    }

    /// Ends the hold as `paused`: the calls `chain` waits on (its pending review, or a
    /// tool's interrupts) wait in the review inbox. Returns the review ids, in call order.
    pub(crate) async fn pause(
        mut self,
        chain: &llmchain::chain::LLMChain,
    ) -> Result<Vec<String>, CliError> {
        self.heartbeat.take();
        let state = self.state_of(Some(chain.state()));
        let reviews = new_reviews(chain);
        self.store
            .pause_run(&self.lease, &state, &reviews)
            .await
            .map_err(crate::cmd::conversations::store_error)?;
        let stored = self
            .store
            .list_reviews(&llmchain_store::ReviewFilter {
                run: Some(self.run.id.clone()),
                status: Some(llmchain_store::ReviewStatus::Pending),
                ..Default::default()
            })
            .await
            .map_err(crate::cmd::conversations::store_error)?;
        Ok(stored.into_iter().map(|r| r.id).collect())
    }
}

fn warn_unrecorded(run: &str, e: &StoreError) {
    eprintln!("llmchain: warning: could not record the end of run {run}: {e}");
}

/// A few random hex digits, so two processes with one pid (containers) differ.
fn instance_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{nanos:08x}")
}
