//! What the real APIs require of tool calls and their results in a request: every call
//! answered, right after the message or turn that made it, and no result without its
//! call. The errors are worded as each API words them (read from their error
//! responses). The local servers reject with these (`http_support::api_validator`), so a
//! conversation the chain leaves behind (a stream cut off by a budget, a crash) is
//! checked as the provider would check it. Self-contained (llmchain, serde_json).

use std::collections::HashSet;

use llmchain::provider::Format;
use serde_json::Value;

type Check = Result<(), String>;

/// A wire's pairing rule.
type Rule = fn(&Value) -> Check;

/// The rule of each wire that checks pairing (Bedrock's is not modelled here).
const RULES: [(&str, Rule); 5] = [
    ("openai_chat", openai_chat),
    ("openai_responses", openai_responses),
    ("anthropic", anthropic),
    ("gemini", gemini),
    ("ollama", ollama),
];

/// Checks `body`, a request of `format`, for call/result pairing.
pub(crate) fn check(format: Format, body: &Value) -> Check {
    RULES
        .iter()
        .find(|(wire, _)| *wire == format.as_str())
        .map_or(Ok(()), |(_, rule)| rule(body))
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn openai_chat(body: &Value) -> Check {
    let messages = list(body, "messages");
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        i += 1;
        let calls = list(m, "tool_calls");
        if m["role"] == "tool" {
            return Err(
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding \
                 message with 'tool_calls'."
                    .into(),
            );
        }
        if m["role"] != "assistant" || calls.is_empty() {
            continue;
        }
        let mut open: Vec<&str> = Vec::new();
        for c in calls {
            if !c["function"]["arguments"].is_string() {
                return Err(format!(
                    "Invalid type for 'messages[{}].tool_calls[].function.arguments': expected a string",
                    i - 1
                ));
            }
            open.push(c["id"].as_str().unwrap_or_default());
        }
        while i < messages.len() && messages[i]["role"] == "tool" {
            let id = messages[i]["tool_call_id"].as_str().unwrap_or_default();
            if let Some(at) = open.iter().position(|o| *o == id) {
                open.remove(at);
            } else {
                return Err(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding \
                     message with 'tool_calls'. (tool_call_id {id})"
                ));
            }
            i += 1;
        }
        if !open.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding \
                 to each 'tool_call_id'. The following tool_call_ids did not have response \
                 messages: {}",
                open.join(", ")
            ));
        }
    }
    Ok(())
}

fn openai_responses(body: &Value) -> Check {
    let input = list(body, "input");
    let mut calls = HashSet::new();
    let mut answered = HashSet::new();
    for item in input {
        let id = item["call_id"].as_str().unwrap_or_default();
        match item["type"].as_str() {
            Some("function_call") => {
                if !item["arguments"].is_string() {
                    return Err("Invalid type for 'input[].arguments': expected a string".into());
                }
                calls.insert(id);
            }
            Some("function_call_output") => {
                if !calls.contains(id) {
                    return Err(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
                answered.insert(id);
            }
            _ => {}
        }
    }
    if let Some(open) = calls.iter().find(|c| !answered.contains(*c)) {
        return Err(format!("No tool output found for function call {open}."));
    }
    Ok(())
}

fn blocks(m: &Value) -> &[Value] {
    list(m, "content")
}

fn anthropic(body: &Value) -> Check {
    let messages = list(body, "messages");
    for (n, m) in messages.iter().enumerate() {
        let uses: Vec<&str> = blocks(m)
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap_or_default())
            .collect();
        if let Some(b) = blocks(m)
            .iter()
            .find(|b| b["type"] == "tool_use" && !b["input"].is_object())
        {
            return Err(format!(
                "messages.{n}.content.{}.tool_use.input: Input should be a valid dictionary",
                blocks(m).iter().position(|x| x == b).unwrap_or(0)
            ));
        }
        // Every tool_result answers a tool_use of the message just before.
        let before: HashSet<&str> = n
            .checked_sub(1)
            .map(|p| {
                blocks(&messages[p])
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| b["id"].as_str().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        for b in blocks(m).iter().filter(|b| b["type"] == "tool_result") {
            let id = b["tool_use_id"].as_str().unwrap_or_default();
            if !before.contains(id) {
                return Err(format!(
                    "messages.{n}.content.0: unexpected `tool_use_id` found in `tool_result` \
                     blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` \
                     block in the previous message."
                ));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let next: HashSet<&str> = messages
            .get(n + 1)
            .map(|x| {
                blocks(x)
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .map(|b| b["tool_use_id"].as_str().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        let missing: Vec<&str> = uses.into_iter().filter(|u| !next.contains(u)).collect();
        if !missing.is_empty() {
            return Err(format!(
                "messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately \
                 after: {}. Each `tool_use` block must have a corresponding `tool_result` block \
                 in the next message.",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

fn gemini(body: &Value) -> Check {
    let contents = list(body, "contents");
    let count = |c: &Value, key: &str| {
        list(c, "parts")
            .iter()
            .filter(|p| p.get(key).is_some())
            .count()
    };
    for (n, c) in contents.iter().enumerate() {
        if let Some(p) = list(c, "parts").iter().find(|p| {
            p.get("functionCall")
                .is_some_and(|f| !f["args"].is_object() && !f["args"].is_null())
        }) {
            return Err(format!(
                "Invalid JSON payload received. Invalid value at 'contents[{n}].parts[].function_call.args' (type.googleapis.com/google.protobuf.Struct): {}",
                p["functionCall"]["args"]
            ));
        }
        let calls = count(c, "functionCall");
        let responses = count(c, "functionResponse");
        let before = n
            .checked_sub(1)
            .map_or(0, |p| count(&contents[p], "functionCall"));
        if responses > 0 && responses != before {
            return Err(
                "Please ensure that the number of function response parts is equal to the number \
                 of function call parts of the function call turn."
                    .into(),
            );
        }
        if calls > 0 {
            let after = contents
                .get(n + 1)
                .map_or(0, |x| count(x, "functionResponse"));
            if after != calls {
                return Err(
                    "Please ensure that function call turn comes immediately after a user turn or \
                     after a function response turn, and that the number of function response \
                     parts is equal to the number of function call parts of the function call turn."
                        .into(),
                );
            }
        }
    }
    Ok(())
}

/// Ollama does not check pairing itself; its chat template does need each call's
/// arguments as an object.
fn ollama(body: &Value) -> Check {
    for m in list(body, "messages") {
        for c in list(m, "tool_calls") {
            if !c["function"]["arguments"].is_object() {
                return Err(
                    "json: cannot unmarshal string into Go struct field ToolCallFunction.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments"
                        .into(),
                );
            }
        }
    }
    Ok(())
}
