//! Turning stored rows back into the storage format (shared by the backends).

use std::collections::HashMap;

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};
use serde_json::{Map, Value};

use crate::error::{StoreError, StoreResult, ser};
use crate::model::{Run, RunKind, RunState, RunStatus};

/// The header JSON: the conversation without its messages.
pub(crate) fn header_json(conversation: &Conversation) -> StoreResult<String> {
    let header = Conversation {
        // `Conversation::default()` has version 0, which no reader accepts: store the
        // version this crate writes.
        version: llmchain::conversation::FORMAT_VERSION,
        tools: conversation.tools.clone(),
        system: conversation.system.clone(),
        tool_choice: conversation.tool_choice.clone(),
        parallel_tool_calls: conversation.parallel_tool_calls,
        // A typed answer is asked for by the run's mode (`Extract`), for that run: not
        // a lasting part of the conversation.
        response_format: None,
        messages: Vec::new(),
    };
    ser("conversation header", &header)
}

pub(crate) fn parse_header(conversation: &str, text: &str) -> StoreResult<Conversation> {
    llmchain::storage_format::from_str(text).map_err(|e| StoreError::Corrupt {
        conversation: conversation.into(),
        location: format!("header {}", e.path),
        message: e.message,
    })
}

pub(crate) fn parse_metadata(conversation: &str, text: &str) -> StoreResult<Map<String, Value>> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        conversation: conversation.into(),
        location: "metadata".into(),
        message: e.to_string(),
    })
}

pub(crate) fn parse_status(
    conversation: &str,
    call_id: &str,
    s: &str,
) -> StoreResult<ExecutionStatus> {
    ExecutionStatus::parse(s).ok_or_else(|| StoreError::Corrupt {
        conversation: conversation.into(),
        location: format!("tool call {call_id}"),
        message: format!("unknown execution status {s:?}"),
    })
}

/// Parses message rows (checking the sequence numbers are 0, 1, 2, …) and applies the
/// recorded statuses onto the calls.
pub(crate) fn messages(
    conversation: &str,
    rows: Vec<(i64, String)>,
    statuses: &HashMap<String, ExecutionStatus>,
) -> StoreResult<Vec<Message>> {
    let mut out = Vec::with_capacity(rows.len());
    for (i, (seq, body)) in rows.into_iter().enumerate() {
        if seq != i as i64 {
            return Err(StoreError::Corrupt {
                conversation: conversation.into(),
                location: format!("message seq {seq}"),
                message: format!("expected sequence number {i}: a message is missing"),
            });
        }
        // Fast path: plain serde; only on failure re-parse for the error's JSON path.
        let mut message: Message = match serde_json::from_str(&body) {
            Ok(m) => m,
            Err(_) => {
                llmchain::storage_format::from_str(&body).map_err(|e| StoreError::Corrupt {
                    conversation: conversation.into(),
                    location: format!("message seq {seq}, {}", e.path),
                    message: e.message,
                })?
            }
        };
        for call in &mut message.tool_calls {
            if let Some(status) = call.call_id.as_deref().and_then(|id| statuses.get(id)) {
                call.set_execution_status(*status);
            }
        }
        out.push(message);
    }
    Ok(out)
}

/// A run row, as `run_columns!()` lists it.
pub(crate) type RunRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<i64>,
    i64,
    i64,
    i64,
    i32,
    i32,
    i64,
    i32,
    Option<String>,
    String,
    Option<String>,
);

pub(crate) fn run(row: RunRow) -> StoreResult<Run> {
    let (
        id,
        conversation_id,
        status,
        state,
        lease_owner,
        lease_expires_at,
        created_at,
        updated_at,
        epoch,
        attempt,
        max_attempts,
        run_at,
        priority,
        last_error,
        kind,
        profile,
    ) = row;
    let corrupt = |message: String| StoreError::Corrupt {
        conversation: conversation_id.clone(),
        location: format!("run {id}"),
        message,
    };
    let mut state: RunState = serde_json::from_str(&state).map_err(|e| corrupt(e.to_string()))?;
    state.status = RunStatus::read(&status);
    let kind =
        RunKind::parse(&kind).ok_or_else(|| corrupt(format!("unknown run kind {kind:?}")))?;
    Ok(Run {
        id,
        conversation_id,
        kind,
        profile,
        state,
        lease_owner,
        lease_expires_at,
        epoch,
        attempt,
        max_attempts,
        run_at,
        priority,
        last_error,
        created_at,
        updated_at,
    })
}
