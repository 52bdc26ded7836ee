//! Property tests of the message model: fragmentation independence of the merge,
//! totality of merge / complete / arguments_as_map, exact serde round trips of every
//! non-virtual field, and path-naming errors for malformed storage documents.

use llmchain::conversation::{
    Conversation, FORMAT_VERSION, ToolChoice, ToolChoiceMode, ToolDefinition,
};
use llmchain::message::{
    Arguments, ContentPart, ContentType, DeltaStatus, Message, MessageDelta, MessageStatus,
    ResultKind, Role, ToolCall, ToolCallStatus, ToolException, ToolResult,
};
use llmchain::storage_format;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

// ---------- strategies ----------

fn any_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
}

/// Arbitrary text, biased towards what needs escaping and multi-byte characters.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z\"\\\\/\n\t\u{0}\u{1f} é€😀\u{7f}\u{2028}]{0,12}",
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any_number(),
        any_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((any_text(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn any_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((any_text(), any_json()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

fn any_arguments() -> impl Strategy<Value = Arguments> {
    prop_oneof![
        any_text().prop_map(Arguments::Raw),
        any_object().prop_map(Arguments::Object),
        any_json().prop_map(|v| Arguments::Raw(v.to_string())),
    ]
}

fn any_status() -> impl Strategy<Value = ToolCallStatus> {
    prop_oneof![
        Just(ToolCallStatus::Incomplete),
        Just(ToolCallStatus::Complete)
    ]
}

fn any_tool_call() -> impl Strategy<Value = ToolCall> {
    (
        any_status(),
        prop::option::of(any_text()),
        prop::option::of(any_text()),
        prop::option::of(any_arguments()),
        prop::option::of(0u32..3),
        prop::option::of(any_text()),
        any_object(),
    )
        .prop_map(
            |(status, call_id, name, arguments, index, display_text, metadata)| ToolCall {
                status,
                call_id,
                name,
                arguments,
                index,
                display_text,
                metadata,
                ..Default::default()
            },
        )
}

fn any_content_type() -> impl Strategy<Value = ContentType> {
    prop_oneof![
        Just(ContentType::Text),
        Just(ContentType::Image),
        Just(ContentType::ImageUrl),
        Just(ContentType::File),
        Just(ContentType::FileUrl),
        Just(ContentType::Thinking),
        Just(ContentType::Unsupported),
    ]
}

fn any_part() -> impl Strategy<Value = ContentPart> {
    (any_content_type(), any_text(), any_object()).prop_map(|(t, content, options)| ContentPart {
        r#type: t,
        content,
        options,
    })
}

fn any_kind() -> impl Strategy<Value = ResultKind> {
    prop_oneof![
        Just(ResultKind::Success),
        Just(ResultKind::Error),
        Just(ResultKind::Refusal),
        Just(ResultKind::Exception),
        Just(ResultKind::Interrupt),
    ]
}

/// A result of any kind, with virtual fields set whenever the kind has them.
fn any_result() -> impl Strategy<Value = ToolResult> {
    (
        any_kind(),
        any_text(),
        prop::collection::vec(any_part(), 0..3),
        prop::option::of(any_text()),
        prop::option::of(any_json()),
        prop::option::of(any_text()),
        any_object(),
        any_json(),
    )
        .prop_map(
            |(kind, id, parts, name, processed, display, options, data)| {
                let mut r = match kind {
                    ResultKind::Success => ToolResult::success(id, parts),
                    ResultKind::Error => ToolResult::error(id, parts),
                    ResultKind::Refusal => ToolResult::refusal(id, parts),
                    ResultKind::Exception => ToolResult::exception(
                        id,
                        parts,
                        ToolException {
                            message: "boom".into(),
                            location: Some("src/tool.rs:1:1".into()),
                            backtrace: Some("secret backtrace".into()),
                        },
                    ),
                    ResultKind::Interrupt => ToolResult::interrupt(id, parts, data),
                    other => unreachable!("any_kind gives no {other:?}"),
                };
                r.name = name;
                r.processed_content = processed;
                r.display_text = display;
                r.options = options;
                r.message_expansion = Some(llmchain::message::MessageExpansion::insert(vec![
                    Message::user("inserted"),
                ]));
                r
            },
        )
}

fn any_message() -> impl Strategy<Value = Message> {
    (
        prop_oneof![
            Just(Role::System),
            Just(Role::User),
            Just(Role::Assistant),
            Just(Role::Tool)
        ],
        prop_oneof![
            Just(MessageStatus::Complete),
            Just(MessageStatus::Cancelled),
            Just(MessageStatus::Length)
        ],
        prop::collection::vec(any_part(), 0..3),
        prop::collection::vec(any_tool_call(), 0..3),
        prop::collection::vec(any_result(), 0..3),
        prop::option::of(any_text()),
        any_object(),
    )
        .prop_map(
            |(role, status, content, tool_calls, tool_results, name, metadata)| Message {
                role,
                status,
                content,
                tool_calls,
                tool_results,
                name,
                metadata,
            },
        )
}

fn any_tool_choice() -> impl Strategy<Value = ToolChoice> {
    prop_oneof![
        Just(ToolChoice::Unset),
        Just(ToolChoice::Mode(ToolChoiceMode::Auto)),
        Just(ToolChoice::Mode(ToolChoiceMode::None)),
        Just(ToolChoice::Mode(ToolChoiceMode::Required)),
        any_text().prop_map(|name| ToolChoice::Tool { name }),
    ]
}

fn any_conversation() -> impl Strategy<Value = Conversation> {
    (
        prop::option::of(any_text()),
        prop::collection::vec(
            (
                any_text(),
                any_text(),
                any_json(),
                any::<bool>(),
                any_object(),
            ),
            0..3,
        ),
        any_tool_choice(),
        prop::option::of(any::<bool>()),
        prop::collection::vec(any_message(), 0..4),
    )
        .prop_map(
            |(system, tools, tool_choice, parallel, messages)| Conversation {
                version: FORMAT_VERSION,
                system,
                tools: tools
                    .into_iter()
                    .map(
                        |(name, description, parameters_schema, strict, options)| ToolDefinition {
                            name,
                            description,
                            parameters_schema,
                            strict,
                            options,
                        },
                    )
                    .collect(),
                tool_choice,
                parallel_tool_calls: parallel,
                response_format: None,
                messages,
            },
        )
}

/// Cuts `text` at arbitrary character boundaries; sizes are in characters, so
/// multi-byte characters stay whole (argument fragments are text) and empty and
/// whitespace-only fragments occur.
fn split_chars(text: &str, sizes: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < chars.len() {
        let mut n = sizes.get(k % sizes.len().max(1)).copied().unwrap_or(3);
        k += 1;
        if n == 0 {
            // An empty fragment, then keep moving.
            out.push(String::new());
            n = 1;
        }
        let end = (at + n).min(chars.len());
        out.push(chars[at..end].iter().collect());
        at = end;
    }
    out
}

// ---------- the non-virtual fields of a result ----------

type ResultFields = (
    String,
    Option<String>,
    Vec<ContentPart>,
    Option<Value>,
    Option<String>,
    Map<String, Value>,
    ResultKind,
);

fn non_virtual(r: &ToolResult) -> ResultFields {
    (
        r.tool_call_id.clone(),
        r.name.clone(),
        r.content.clone(),
        r.processed_content.clone(),
        r.display_text.clone(),
        r.options.clone(),
        r.kind(),
    )
}

fn assert_restored_result(back: &ToolResult, orig: &ToolResult) {
    assert_eq!(non_virtual(back), non_virtual(orig));
    assert_eq!(back.exception_info(), None);
    assert_eq!(back.interrupt_data(), None);
    assert_eq!(back.message_expansion, None);
    assert_eq!(back.is_exception(), orig.is_exception());
}

fn assert_restored_message(back: &Message, orig: &Message) {
    assert_eq!(back.role, orig.role);
    assert_eq!(back.status, orig.status);
    assert_eq!(back.content, orig.content);
    assert_eq!(back.tool_calls, orig.tool_calls);
    assert_eq!(back.name, orig.name);
    assert_eq!(back.metadata, orig.metadata);
    assert_eq!(back.tool_results.len(), orig.tool_results.len());
    for (b, o) in back.tool_results.iter().zip(&orig.tool_results) {
        assert_restored_result(b, o);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Any split of an argument text, through MessageDelta, gives the same call as
    /// the text in one piece — whitespace-only and multi-byte fragments included,
    /// whether or not the provider repeats the id and name on every fragment, and
    /// with several fragments per delta.
    #[test]
    fn any_split_merges_to_the_same_call(
        args in any_object(),
        pretty in any::<bool>(),
        pad in ("[ \t\n\r]{0,4}", "[ \t\n\r]{0,4}"),
        sizes in prop::collection::vec(0usize..6, 1..8),
        repeat_header in any::<bool>(),
        per_delta in 1usize..4,
        index in prop::option::of(0u32..4),
    ) {
        let body = if pretty {
            serde_json::to_string_pretty(&args).unwrap()
        } else {
            serde_json::to_string(&args).unwrap()
        };
        let text = format!("{}{body}{}", pad.0, pad.1);
        let frags = split_chars(&text, &sizes);
        prop_assert_eq!(frags.concat(), text.clone());

        let header = ToolCall {
            index,
            call_id: Some("call_1".into()),
            name: Some("write".into()),
            ..Default::default()
        };
        let mut acc = MessageDelta::default();
        acc.merge(MessageDelta::tool_call_fragment(header.clone())).unwrap();
        let parts: Vec<ToolCall> = frags
            .iter()
            .map(|f| ToolCall {
                arguments: Some(f.as_str().into()),
                ..if repeat_header { header.clone() } else { ToolCall { index, ..Default::default() } }
            })
            .collect();
        for chunk in parts.chunks(per_delta) {
            acc.merge(MessageDelta::tool_call_fragments(chunk.to_vec())).unwrap();
        }
        prop_assert_eq!(acc.tool_calls.len(), 1);
        prop_assert_eq!(acc.tool_calls[0].raw_arguments().unwrap_or(""), text.as_str());

        // The same call merged in one piece.
        let whole = ToolCall::merge(
            Some(header.clone()),
            ToolCall { arguments: Some(text.as_str().into()), index, ..Default::default() },
        ).unwrap();
        prop_assert_eq!(
            acc.tool_calls[0].raw_arguments().unwrap_or(""),
            whole.raw_arguments().unwrap_or("")
        );

        acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete)).unwrap();
        let done = acc.to_message().unwrap();
        prop_assert!(done.invalid_tool_calls.is_empty());
        let call = &done.message.tool_calls[0];
        prop_assert!(call.is_complete());
        prop_assert_eq!(call.arguments.as_ref().and_then(Arguments::as_object), Some(&args));
        prop_assert_eq!(whole.complete().unwrap().arguments_as_map(), args);
    }

    /// merge never panics, and fails exactly on an index mismatch.
    #[test]
    fn merge_is_total(a in any_tool_call(), b in any_tool_call()) {
        let same_index = a.index == b.index;
        let before = a.clone();
        match ToolCall::merge(Some(a), b.clone()) {
            Ok(m) => {
                prop_assert!(same_index);
                // Status only moves forward; the name only grows.
                prop_assert!(m.status == ToolCallStatus::Complete || before.status == ToolCallStatus::Incomplete);
                if let (Some(old), Some(new)) = (&before.name, &m.name) {
                    prop_assert!(new.starts_with(old.as_str()));
                }
                prop_assert_eq!(m.index, before.index);
            }
            Err(_) => prop_assert!(!same_index),
        }
        prop_assert_eq!(ToolCall::merge(None, b.clone()).unwrap(), b);
    }

    /// complete never panics; a completed call has an id, a name and object arguments.
    #[test]
    fn complete_is_total(c in any_tool_call()) {
        let was_complete = c.is_complete();
        match c.clone().complete() {
            Ok(done) => {
                prop_assert!(done.is_complete());
                if !was_complete {
                    prop_assert!(done.call_id.as_deref().is_some_and(|s| !s.is_empty()));
                    prop_assert!(done.name.as_deref().is_some_and(|s| !s.is_empty()));
                    prop_assert!(!matches!(done.arguments, Some(Arguments::Raw(_))));
                }
            }
            Err(e) => {
                prop_assert!(!was_complete);
                prop_assert!(!e.is_empty());
                for fe in e.errors() {
                    prop_assert!(["call_id", "name", "arguments"].contains(&fe.field));
                }
            }
        }
    }

    /// arguments_as_map never panics and agrees with serde_json on raw text.
    #[test]
    fn arguments_as_map_is_total(args in prop::option::of(any_arguments())) {
        let call = ToolCall { arguments: args.clone(), ..Default::default() };
        let map = call.arguments_as_map();
        match args {
            None => prop_assert!(map.is_empty()),
            Some(Arguments::Object(m)) => prop_assert_eq!(map, m),
            Some(Arguments::Raw(s)) => {
                let expected = serde_json::from_str::<Map<String, Value>>(&s).unwrap_or_default();
                prop_assert_eq!(map, expected);
            }
        }
    }

    /// Arbitrary streams of deltas (wild indexes included) never panic.
    #[test]
    fn delta_streams_are_total(
        steps in prop::collection::vec(
            prop_oneof![
                (any::<usize>(), any_part()).prop_map(|(i, p)| MessageDelta::content_fragment(i, p)),
                (0usize..4, any_part()).prop_map(|(i, p)| MessageDelta::content_fragment(i, p)),
                prop::collection::vec(any_tool_call(), 0..3)
                    .prop_map(MessageDelta::tool_call_fragments),
                Just(MessageDelta::status_fragment(DeltaStatus::Complete)),
                Just(MessageDelta::status_fragment(DeltaStatus::Length)),
            ],
            0..12,
        )
    ) {
        let mut acc = MessageDelta::default();
        for d in steps {
            let _ = acc.merge(d);
        }
        let _ = acc.clone().to_message();
        let m = acc.cancel(None);
        prop_assert!(!m.is_tool_call());
    }

    /// The tool-call round trip is exact.
    #[test]
    fn tool_call_round_trip(c in any_tool_call()) {
        let text = serde_json::to_string(&c).unwrap();
        let back: ToolCall = storage_format::from_str(&text).unwrap();
        prop_assert_eq!(back, c);
    }

    /// Every kind of result keeps its non-virtual fields; the virtual ones never appear.
    #[test]
    fn tool_result_round_trip(r in any_result()) {
        let text = serde_json::to_string(&r).unwrap();
        prop_assert!(!text.contains("secret backtrace"));
        prop_assert!(!text.contains("message_expansion") && !text.contains("interrupt_data"));
        let back: ToolResult = storage_format::from_str(&text).unwrap();
        assert_restored_result(&back, &r);
    }

    #[test]
    fn content_part_round_trip(p in any_part()) {
        let back: ContentPart = storage_format::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        prop_assert_eq!(back, p);
    }

    #[test]
    fn message_round_trip(m in any_message()) {
        let back: Message = storage_format::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_restored_message(&back, &m);
    }

    #[test]
    fn conversation_round_trip(c in any_conversation()) {
        let text = serde_json::to_string_pretty(&c).unwrap();
        let back: Conversation = storage_format::from_str(&text).unwrap();
        prop_assert_eq!(back.version, c.version);
        prop_assert_eq!(&back.system, &c.system);
        prop_assert_eq!(&back.tools, &c.tools);
        prop_assert_eq!(&back.tool_choice, &c.tool_choice);
        prop_assert_eq!(back.parallel_tool_calls, c.parallel_tool_calls);
        prop_assert_eq!(back.messages.len(), c.messages.len());
        for (b, o) in back.messages.iter().zip(&c.messages) {
            assert_restored_message(b, o);
        }
    }

    /// Arbitrary bytes and arbitrary JSON never panic the loader.
    #[test]
    fn malformed_documents_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), v in any_json()) {
        let _ = storage_format::from_slice::<Conversation>(&bytes);
        let _ = storage_format::from_str::<Conversation>(&v.to_string());
        let _ = storage_format::from_str::<Message>(&v.to_string());
    }

    /// A wrong value at a known place gives an error naming exactly that path.
    #[test]
    fn malformed_documents_name_the_path(
        c in any_conversation(),
        pick in any::<prop::sample::Index>(),
        what in 0usize..6,
        bad in prop_oneof![Just(json!(5)), Just(json!([true])), Just(json!({"x": 1}))],
    ) {
        let mut doc = serde_json::to_value(&c).unwrap();
        let n = c.messages.len();
        let (path, slot): (String, Option<&mut Value>) = match what {
            0 if n > 0 => {
                let i = pick.index(n);
                (format!("messages[{i}].role"), doc.pointer_mut(&format!("/messages/{i}/role")))
            }
            1 if n > 0 => {
                let i = pick.index(n);
                (format!("messages[{i}].status"), doc.pointer_mut(&format!("/messages/{i}/status")))
            }
            2 if c.messages.iter().any(|m| !m.tool_calls.is_empty()) => {
                let i = c.messages.iter().position(|m| !m.tool_calls.is_empty()).unwrap();
                let j = pick.index(c.messages[i].tool_calls.len());
                let call = doc.pointer_mut(&format!("/messages/{i}/tool_calls/{j}")).unwrap();
                call["arguments"] = json!(0);
                (format!("messages[{i}].tool_calls[{j}].arguments"), None)
            }
            3 if c.messages.iter().any(|m| !m.tool_results.is_empty()) => {
                let i = c.messages.iter().position(|m| !m.tool_results.is_empty()).unwrap();
                let j = pick.index(c.messages[i].tool_results.len());
                (format!("messages[{i}].tool_results[{j}].tool_call_id"),
                 doc.pointer_mut(&format!("/messages/{i}/tool_results/{j}/tool_call_id")))
            }
            4 if !c.tools.is_empty() => {
                let k = pick.index(c.tools.len());
                (format!("tools[{k}].strict"), doc.pointer_mut(&format!("/tools/{k}/strict")))
            }
            _ => ("version".to_owned(), doc.pointer_mut("/version")),
        };
        if let Some(slot) = slot {
            *slot = bad;
        }
        let err = storage_format::from_str::<Conversation>(&doc.to_string()).unwrap_err();
        // (A status given as an object names the key inside it: `status.x`.)
        prop_assert!(
            err.path == path || err.path.starts_with(&format!("{path}.")),
            "{} at {}", err, err.path
        );
        prop_assert!(err.to_string().contains(&path));
    }
}

/// Statuses and decisions written by a newer version read as the ones that never run a
/// call: a cut-off message, an incomplete call, a call that waits for a person.
#[test]
fn persisted_values_this_version_does_not_know_read_as_never_running() {
    use llmchain::message::{MessageStatus, ToolCallStatus};
    let m: MessageStatus = serde_json::from_str("\"stopped_by_moderation\"").unwrap();
    assert_eq!(m, MessageStatus::Cancelled);
    let c: ToolCallStatus = serde_json::from_str("\"queued_remotely\"").unwrap();
    assert_eq!(c, ToolCallStatus::Incomplete);
    assert_eq!(
        serde_json::from_str::<MessageStatus>("\"length\"").unwrap(),
        MessageStatus::Length
    );
}
