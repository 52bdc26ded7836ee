//! The records a store holds: conversations, runs and their state.

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a turn adds to its conversation once it holds the run, decided from the stored
/// conversation (its summary, metadata included, and its messages) inside
/// [`Store::claim_and_read`](crate::Store::claim_and_read)'s transaction: the messages to
/// append (none for a client's resend of a message already stored), or an error that
/// refuses the turn (a conversation that is not the caller's, a full one), in which case
/// nothing is created, claimed or appended. It may be called more than once (a SQLite
/// batch retried part by part).
pub type Opening =
    Box<dyn Fn(&StoredConversation) -> crate::StoreResult<Vec<Message>> + Send + Sync>;

/// A message a regenerated answer replaced ([`Store::supersede_messages`](crate::Store::supersede_messages)):
/// kept on record, its calls with the status they had.
#[derive(Debug, Clone, PartialEq)]
pub struct Superseded {
    /// The position (sequence number) it had in the conversation.
    pub position: i64,
    /// The message, its calls carrying their last `execution_status`.
    pub message: Message,
    /// When it was superseded, milliseconds since the Unix epoch.
    pub superseded_at: i64,
}

/// A new conversation: its header (system prompt, tools, tool choice…) and, optionally,
/// messages to store with it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConversation {
    /// The id; `None` makes a random UUID.
    pub id: Option<String>,
    /// A human title.
    pub title: Option<String>,
    /// Free-form application metadata (a JSON object).
    pub metadata: Map<String, Value>,
    /// The header and initial messages (appended with sequence numbers 0, 1, …).
    pub conversation: Conversation,
}

impl Default for NewConversation {
    fn default() -> Self {
        NewConversation {
            id: None,
            title: None,
            metadata: Map::new(),
            conversation: Conversation::new(),
        }
    }
}

impl NewConversation {
    /// A new conversation with this header (and initial messages).
    pub fn from_conversation(conversation: Conversation) -> Self {
        NewConversation {
            conversation,
            ..Default::default()
        }
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the title a conversation started with `prompt` gets: [`title_of`].
    pub fn titled_by(self, prompt: &str) -> Self {
        self.with_title(title_of(prompt))
    }
}

/// The title of a conversation started with `prompt`, wherever it starts (the CLI,
/// `llmchain serve`): its first non-blank line, trimmed, at most 60 characters.
pub fn title_of(prompt: &str) -> String {
    prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .chars()
        .take(60)
        .collect()
}

/// What a listing shows of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversationSummary {
    /// The id.
    pub id: String,
    /// The title, if any.
    pub title: Option<String>,
    /// Application metadata.
    pub metadata: Map<String, Value>,
    /// Number of messages (also the next sequence number).
    pub message_count: i64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Last change (message appended, header changed), milliseconds since the Unix epoch.
    pub updated_at: i64,
}

/// A conversation as loaded: the summary and the storage-format [`Conversation`], whose
/// messages are in sequence order (message `i` has sequence number `i`) and whose tool
/// calls carry the `execution_status` last recorded with
/// [`Store::set_tool_status`](crate::Store::set_tool_status).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredConversation {
    /// Id, title, counts and times.
    pub summary: ConversationSummary,
    /// Header and messages.
    pub conversation: Conversation,
}

impl StoredConversation {
    /// Adds `messages`, just appended in the transaction that read this, to it.
    pub(crate) fn extend(&mut self, messages: Vec<Message>) {
        self.summary.message_count += messages.len() as i64;
        self.conversation.messages.extend(messages);
    }
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// Waiting for a worker.
    #[default]
    Pending,
    /// Claimed by a worker (see the lease).
    Running,
    /// Stopped for a human (interrupt); not claimable until resumed.
    Paused,
    /// Finished.
    Done,
    /// Finished with a failure (the chain ended with an error it will not recover from).
    Failed,
    /// Gave up: every attempt failed or its lease expired ([`Run::max_attempts`]); the
    /// last error is kept in [`Run::last_error`].
    Discarded,
    /// Cancelled by [`Store::cancel_run`](crate::Store::cancel_run); a worker still
    /// running it stops at its next heartbeat or write.
    Cancelled,
}

impl RunStatus {
    /// The stored string.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Done => "done",
            RunStatus::Failed => "failed",
            RunStatus::Discarded => "discarded",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored string.
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "paused" => RunStatus::Paused,
            "done" => RunStatus::Done,
            "failed" => RunStatus::Failed,
            "discarded" => RunStatus::Discarded,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }

    /// Reads a status from the database: [`parse`](Self::parse), and a status this
    /// version does not know (written by a newer one) as [`Paused`](Self::Paused): open,
    /// so the conversation gets no second run, and never claimed or run by this version;
    /// a person sees it paused.
    pub fn read(s: &str) -> RunStatus {
        RunStatus::parse(s).unwrap_or(RunStatus::Paused)
    }

    /// `Done`, `Failed`, `Discarded` or `Cancelled`: nothing will run it again (unless
    /// [`Store::retry_run`](crate::Store::retry_run) says so).
    pub fn is_finished(self) -> bool {
        !self.is_open()
    }

    /// `Pending`, `Running` or `Paused`: a conversation has at most one open run.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            RunStatus::Pending | RunStatus::Running | RunStatus::Paused
        )
    }
}

/// The chain's state of a run, stored as one JSON document.
///
/// Kept general on purpose (the chain is written separately): anything the chain needs
/// beyond these fields goes into `extra`, which round-trips.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunState {
    /// The mode's name, e.g. `while_needs_response`.
    #[serde(default)]
    pub mode: String,
    /// Where the run is. The store keeps it in its own column as well, and that column
    /// wins when a run is read back.
    #[serde(default)]
    pub status: RunStatus,
    /// Consecutive failures counted against the failure budget.
    #[serde(default)]
    pub failure_count: u32,
    /// Interrupts waiting for a human (the chain's own JSON).
    #[serde(default)]
    pub pending_interrupts: Vec<Value>,
    /// Human review decisions received and not yet applied (the chain's own JSON).
    #[serde(default)]
    pub review_decisions: Vec<Value>,
    /// Anything else the chain keeps.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunKind {
    /// Queued ([`Store::enqueue_run`](crate::Store::enqueue_run)) for a worker, under a
    /// profile of the worker's own configuration ([`Run::profile`]). Only queued runs are
    /// claimed by workers.
    #[default]
    Queued,
    /// Held by an interactive process ([`Store::claim_conversation`](crate::Store::claim_conversation):
    /// the CLI's `run`, `chat`, `resume`), which runs it itself. Never claimed by a
    /// worker; when its process dies, the expired run is marked `failed`.
    Interactive,
}

impl RunKind {
    /// The stored string.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Queued => "queued",
            RunKind::Interactive => "interactive",
        }
    }

    /// Parses a stored string.
    pub fn parse(s: &str) -> Option<RunKind> {
        match s {
            "queued" => Some(RunKind::Queued),
            "interactive" => Some(RunKind::Interactive),
            _ => None,
        }
    }
}

/// Which runs [`Store::list_all_runs`](crate::Store::list_all_runs) lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs of this status.
    pub status: Option<RunStatus>,
    /// Only runs of this kind.
    pub kind: Option<RunKind>,
    /// At most this many, newest first.
    pub limit: i64,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            status: None,
            kind: None,
            limit: 50,
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The run's id.
    pub id: String,
    /// The conversation it advances.
    pub conversation_id: String,
    /// Queued for workers, or held by an interactive process.
    pub kind: RunKind,
    /// The name of the operator's profile a queued run runs under (provider, model, tool
    /// servers, review policy…), defined in the configuration of the worker that runs
    /// it, never in the database: a worker claims only runs of its own profiles.
    pub profile: Option<String>,
    /// The chain's state.
    pub state: RunState,
    /// The worker holding the lease, if any.
    pub lease_owner: Option<String>,
    /// When the lease ends, milliseconds since the Unix epoch (database clock on PostgreSQL).
    pub lease_expires_at: Option<i64>,
    /// The fencing token: raised by one at every claim, so a worker whose lease was taken
    /// over (even by itself, under the same name) can write nothing more.
    pub epoch: i64,
    /// Claims so far (each claim is an attempt).
    pub attempt: i32,
    /// Attempts allowed before the run is discarded.
    pub max_attempts: i32,
    /// Not claimed before this time, milliseconds since the Unix epoch (scheduling and
    /// retry back-off).
    pub run_at: i64,
    /// Higher runs first.
    pub priority: i32,
    /// The last failure (an error of the chain, an expired lease).
    pub last_error: Option<String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Last change, milliseconds since the Unix epoch.
    pub updated_at: i64,
}

impl Run {
    /// The lease this run was claimed with, when it is held: every write on the run's
    /// behalf carries it ([`Writer::Lease`], [`Store::update_run`](crate::Store::update_run),
    /// …).
    pub fn lease(&self) -> Option<Lease> {
        Some(Lease {
            run_id: self.id.clone(),
            worker_id: self.lease_owner.clone()?,
            epoch: self.epoch,
        })
    }
}

/// A held lease on a run: the fencing token every write made on the run's behalf
/// carries. A write whose lease is no longer the run's current one (it expired and
/// another claim raised the epoch, or the run was cancelled) is refused with
/// [`StoreError::LeaseLost`](crate::StoreError::LeaseLost) or
/// [`StoreError::RunCancelled`](crate::StoreError::RunCancelled), checked in the same
/// statement or transaction as the write.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// The worker holding it.
    pub worker_id: String,
    /// The run's epoch at the claim.
    pub epoch: i64,
}

/// Who writes a conversation's messages and statuses
/// ([`Store::append_messages`](crate::Store::append_messages),
/// [`Store::replace_message`](crate::Store::replace_message),
/// [`Store::set_tool_status`](crate::Store::set_tool_status)).
///
/// ```
/// # use llmchain_store::{Lease, Writer};
/// let lease = Lease { run_id: "r".into(), worker_id: "w".into(), epoch: 1 };
/// assert_eq!(Writer::from("conv-1"), Writer::Conversation("conv-1"));
/// assert_eq!(Writer::from(&lease), Writer::Lease(&lease));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Writer<'a> {
    /// Anyone writing the conversation with this id, unfenced: a CLI command, a chain
    /// run without a worker, a test.
    Conversation(&'a str),
    /// The worker holding this lease, writing the lease's run's conversation. The lease
    /// is checked in the write's own transaction: a worker that lost it gets
    /// [`StoreError::LeaseLost`](crate::StoreError::LeaseLost) (or
    /// [`RunCancelled`](crate::StoreError::RunCancelled)) and writes nothing.
    Lease(&'a Lease),
}

/// One change of a run's conversation (or of the run), for
/// [`Store::write_leased`](crate::Store::write_leased): several are written in one
/// transaction under the run's lease.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Change<'a> {
    /// Append these messages to the conversation.
    Append(&'a [Message]),
    /// Record a tool call's execution status.
    Status(&'a str, ExecutionStatus),
    /// Save the run's state.
    RunState(&'a RunState),
    /// Finish the run: save this state with its status and release the lease, as
    /// [`Store::complete_run`](crate::Store::complete_run) does. It must be the last
    /// change: the lease it releases fences nothing after it.
    Complete(&'a RunState),
}

impl Change<'_> {
    /// Refuses changes where a [`Change::Complete`] is not the last.
    pub(crate) fn check_order(changes: &[Change<'_>], lease: &Lease) -> crate::StoreResult<()> {
        let early = changes
            .iter()
            .rev()
            .skip(1)
            .any(|c| matches!(c, Change::Complete(_)));
        if early {
            return Err(crate::StoreError::RunState {
                run: lease.run_id.clone(),
                status: "running".into(),
                action: "a change after the run's completion",
            });
        }
        Ok(())
    }
}

impl<'a> From<&'a str> for Writer<'a> {
    fn from(conversation_id: &'a str) -> Self {
        Writer::Conversation(conversation_id)
    }
}

impl<'a> From<&'a String> for Writer<'a> {
    fn from(conversation_id: &'a String) -> Self {
        Writer::Conversation(conversation_id)
    }
}

impl<'a> From<&'a Lease> for Writer<'a> {
    fn from(lease: &'a Lease) -> Self {
        Writer::Lease(lease)
    }
}

/// How a run is queued: [`Store::enqueue_run`](crate::Store::enqueue_run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// The profile it runs under (a name the workers' configuration defines); a worker
    /// serving a set of profiles claims only runs naming one of them.
    pub profile: Option<String>,
    /// Attempts before the run is discarded (at least 1; default 5).
    pub max_attempts: i32,
    /// Not before this time, milliseconds since the Unix epoch; `None` is now.
    pub run_at: Option<i64>,
    /// Higher runs are claimed first (default 0).
    pub priority: i32,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            profile: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            run_at: None,
            priority: 0,
        }
    }
}

/// The default [`RunOptions::max_attempts`].
pub const DEFAULT_MAX_ATTEMPTS: i32 = 5;

/// Retry back-off after a failed attempt `attempt` (1-based): 1 s, 2 s, 4 s… capped at
/// 5 minutes, plus up to 25% jitter so failed runs do not come back in lockstep.
pub fn backoff(attempt: i32) -> std::time::Duration {
    let base_ms = 1000u64 << attempt.clamp(1, 20).saturating_sub(1).min(9);
    let base_ms = base_ms.min(300_000);
    let jitter = fastrand::u64(0..=base_ms / 4);
    std::time::Duration::from_millis(base_ms + jitter)
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) fn duration_ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
