//! [`ToolContext`]: what every tool body receives besides its arguments.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// The application's custom context, shared by every call of a batch.
pub type CustomContext = Arc<dyn Any + Send + Sync>;

/// What a tool body receives besides its arguments: the id of the call it answers,
/// the application's custom context, and a cancellation token.
///
/// The token is cancelled when the executor's batch is cancelled or when the call
/// times out; a long-running body should watch it (`ctx.cancelled().await`) and stop.
/// The body's future is dropped in both cases anyway, so a body that never looks is
/// still stopped at its next `.await`.
///
/// ```
/// use llmchain::tool::ToolContext;
/// struct Db { url: &'static str }
/// let ctx = ToolContext::new("call_1").with_custom(Db { url: "sqlite::memory:" });
/// assert_eq!(ctx.tool_call_id(), "call_1");
/// assert_eq!(ctx.custom::<Db>().unwrap().url, "sqlite::memory:");
/// assert!(ctx.custom::<String>().is_none());
/// ```
#[derive(Clone, Default)]
pub struct ToolContext {
    tool_call_id: String,
    custom: Option<CustomContext>,
    cancel: CancellationToken,
    human_approved: bool,
    default_timeout: Option<std::time::Duration>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("tool_call_id", &self.tool_call_id)
            .field("custom", &self.custom.as_ref().map(|_| "<custom>"))
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl ToolContext {
    /// A context for call `tool_call_id`, with no custom context and a fresh token.
    pub fn new(tool_call_id: impl Into<String>) -> Self {
        ToolContext {
            tool_call_id: tool_call_id.into(),
            custom: None,
            cancel: CancellationToken::new(),
            human_approved: false,
            default_timeout: None,
        }
    }

    /// Sets the custom context to `value`.
    #[must_use]
    pub fn with_custom<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.custom = Some(Arc::new(value));
        self
    }

    /// Sets the custom context to an already shared value (or none).
    #[must_use]
    pub fn with_custom_arc(mut self, custom: Option<CustomContext>) -> Self {
        self.custom = custom;
        self
    }

    /// Uses `token` for cancellation.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Marks the call as approved by a person (a review, or the answer to this tool's
    /// own interrupt).
    #[must_use]
    pub fn with_human_approval(mut self, approved: bool) -> Self {
        self.human_approved = approved;
        self
    }

    /// The time limit of a call whose tool sets none of its own (a run's
    /// `tool_seconds`); the tool's own timeout wins.
    #[must_use]
    pub fn with_default_timeout(mut self, limit: Option<std::time::Duration>) -> Self {
        self.default_timeout = limit;
        self
    }

    /// The time limit of a call whose tool sets none.
    pub fn default_timeout(&self) -> Option<std::time::Duration> {
        self.default_timeout
    }

    /// Whether a person approved this call: a tool that interrupted to ask for approval
    /// ([`ToolOutput::interrupt`](crate::tool::ToolOutput::interrupt)) and is run again
    /// after a person approved it in the review inbox sees `true` here, and goes on.
    pub fn human_approved(&self) -> bool {
        self.human_approved
    }

    /// The id of the call being answered.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The custom context, if it is a `T`.
    pub fn custom<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.custom.as_deref().and_then(|c| c.downcast_ref::<T>())
    }

    /// The custom context as shared, whatever its type.
    pub fn custom_arc(&self) -> Option<&CustomContext> {
        self.custom.as_ref()
    }

    /// The cancellation token of this call.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True once the call has been cancelled (batch cancelled or timed out).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the call is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}
