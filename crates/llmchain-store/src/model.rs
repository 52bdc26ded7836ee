//! The records a store holds: conversations, runs and their state.

use llmchain::conversation::Conversation;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
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
    /// Finished with a failure.
    Failed,
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
            _ => return None,
        })
    }

    /// `Done` or `Failed`.
    pub fn is_finished(self) -> bool {
        matches!(self, RunStatus::Done | RunStatus::Failed)
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

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The run's id.
    pub id: String,
    /// The conversation it advances.
    pub conversation_id: String,
    /// The chain's state.
    pub state: RunState,
    /// The worker holding the lease, if any.
    pub lease_owner: Option<String>,
    /// When the lease ends, milliseconds since the Unix epoch (database clock on PostgreSQL).
    pub lease_expires_at: Option<i64>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Last change, milliseconds since the Unix epoch.
    pub updated_at: i64,
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
