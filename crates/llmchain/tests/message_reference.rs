//! The reference implementation's test cases (LangChain for Elixir, reference §8.1,
//! §8.2, §2 and §5), ported with their inputs and expected strings. Cases already
//! covered by the unit tests beside the code are cross-referenced there; this file adds
//! the streamed sequences and the ToolResult / ContentPart / Message / MessageDelta
//! cases, through the public API only.

use llmchain::message::{
    Arguments, Content, ContentPart, ContentType, DeltaError, DeltaStatus, Message, MessageDelta,
    MessageStatus, Role, TokenUsage, ToolCall, ToolCallAttrs, ToolCallStatus, ToolResult,
    parts_to_string,
};
use serde_json::{Value, json};

fn call(index: u32, id: Option<&str>, name: Option<&str>, args: Option<&str>) -> ToolCall {
    ToolCall {
        index: Some(index),
        call_id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: args.map(Into::into),
        ..Default::default()
    }
}

fn args_delta(index: u32, s: &str) -> MessageDelta {
    MessageDelta::tool_call_fragment(call(index, None, None, Some(s)))
}

fn text_delta(s: &str) -> MessageDelta {
    // The reference's text deltas carry `index: nil`, which counts as content index 0.
    let mut d = MessageDelta::default();
    d.content = Some(ContentPart::text(s));
    d
}

fn finished(mut acc: MessageDelta) -> Message {
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
        .unwrap();
    let out = acc.to_message().unwrap();
    assert!(
        out.invalid_tool_calls.is_empty(),
        "{:?}",
        out.invalid_tool_calls
    );
    out.message
}

// ---------- §8.1 ToolCall (cases 1–13 are also unit tests in message/tool_call.rs) ----------

#[test]
fn case_2_status_given_as_complete_parses_arguments() {
    let c = ToolCall::new(ToolCallAttrs {
        status: ToolCallStatus::Complete,
        call_id: Some("call_123".into()),
        name: Some("hello_world".into()),
        arguments: Some("{\"key\": 1}".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.r#type, llmchain::message::ToolType::Function);
    assert_eq!(
        c.arguments,
        Some(Arguments::Object(
            json!({"key": 1}).as_object().unwrap().clone()
        ))
    );
}

#[test]
fn case_4_non_object_through_an_assistant_message() {
    let m = Message::assistant_with_calls(
        "",
        vec![call(0, Some("call_1"), Some("x"), Some("[true,1,2,3]"))],
    )
    .validate()
    .unwrap_err();
    assert_eq!(
        m.to_string(),
        "tool_calls: arguments: a json object is expected for tool arguments"
    );
}

#[test]
fn new_or_panic_panics_with_the_rendered_error() {
    let r = std::panic::catch_unwind(|| {
        ToolCall::new_or_panic(ToolCallAttrs {
            status: ToolCallStatus::Complete,
            ..Default::default()
        })
    });
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert_eq!(
        msg,
        "invalid ToolCall: call_id: can't be blank; name: can't be blank"
    );
}

#[test]
fn seed_examples() {
    // ToolCall.new!(%{call_id: "call_123", name: "give_greeting", arguments: %{"name" => "Howard"}})
    let c = ToolCall::new_or_panic(ToolCallAttrs {
        call_id: Some("call_123".into()),
        name: Some("give_greeting".into()),
        arguments: Some(json!({"name": "Howard"}).into()),
        ..Default::default()
    });
    assert_eq!(c.status, ToolCallStatus::Incomplete);
    assert_eq!(c.execution_status(), "identified");
    assert_eq!(c.execution_status_or("x"), "x");
    let c = c.complete().unwrap();
    assert_eq!(
        Value::Object(c.arguments_as_map()),
        json!({"name": "Howard"})
    );
    let c = c.with_execution_status("executing");
    assert_eq!(c.metadata["execution_status"], "executing");
}

// ---------- §8.2 streamed sequences ----------

/// OpenAI, three parallel calls, as the raw deltas give them (the first delta carries the
/// name and `""` arguments, then fragments without ids).
#[test]
fn openai_three_parallel_calls() {
    let mut acc = MessageDelta::default();
    let cities = [
        ("call_fFRR", "Moab", "UT"),
        ("call_pq9A", "Portland", "OR"),
        ("call_ZXc2", "Baltimore", "MD"),
    ];
    for (i, (id, city, state)) in cities.iter().enumerate() {
        let i = i as u32;
        acc.merge(MessageDelta::tool_call_fragment(call(
            i,
            Some(id),
            Some("get_weather"),
            Some(""),
        )))
        .unwrap();
        for frag in [
            "{\"ci".to_owned(),
            "ty\": \"".to_owned(),
            format!("{city}\", \"state\": \"{state}"),
            "\"}".to_owned(),
        ] {
            acc.merge(args_delta(i, &frag)).unwrap();
        }
    }
    // `{"delta":{},"finish_reason":"tool_calls","index":0}`
    let mut finish = MessageDelta::status_fragment(DeltaStatus::Complete);
    finish.index = Some(0);
    acc.merge(finish).unwrap();
    assert_eq!(acc.index, Some(0));
    assert_eq!(acc.status, DeltaStatus::Complete);
    assert!(acc.merged_content().next().is_none());
    let raw: Vec<_> = acc
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.index,
                c.status,
                c.raw_arguments().unwrap().to_owned(),
                c.name.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        raw,
        vec![
            (
                Some(0),
                ToolCallStatus::Incomplete,
                "{\"city\": \"Moab\", \"state\": \"UT\"}".to_owned(),
                "get_weather".to_owned()
            ),
            (
                Some(1),
                ToolCallStatus::Incomplete,
                "{\"city\": \"Portland\", \"state\": \"OR\"}".to_owned(),
                "get_weather".to_owned()
            ),
            (
                Some(2),
                ToolCallStatus::Incomplete,
                "{\"city\": \"Baltimore\", \"state\": \"MD\"}".to_owned(),
                "get_weather".to_owned()
            ),
        ]
    );
    let m = acc.to_message().unwrap().message;
    assert_eq!(m.role, Role::Assistant);
    assert_eq!(m.executable_tool_calls().count(), 3);
    assert_eq!(m.tool_calls[2].arguments_as_map()["city"], "Baltimore");
}

/// Text, then a tool call at index 1, with `index: nil` on the deltas.
#[test]
fn text_then_a_tool_call_at_index_1() {
    let mut acc = MessageDelta::default();
    for d in [text_delta(""), text_delta("stu"), text_delta("ff")] {
        acc.merge(d).unwrap();
    }
    acc.merge(MessageDelta::tool_call_fragment(call(
        1,
        Some("toolu_123"),
        Some("do_something"),
        None,
    )))
    .unwrap();
    acc.merge(MessageDelta::tool_call_fragment(call(1, None, None, None)))
        .unwrap();
    for f in ["{\"", "value\":", " \"People", " are people.\"}"] {
        acc.merge(args_delta(1, f)).unwrap();
    }
    assert_eq!(
        acc.merged_content().cloned().collect::<Vec<_>>(),
        vec![ContentPart::text("stuff")]
    );
    assert_eq!(
        acc.tool_calls[0].raw_arguments(),
        Some("{\"value\": \"People are people.\"}")
    );
    let m = finished(acc);
    assert!(m.tool_calls[0].is_complete());
    assert_eq!(
        Value::Object(m.tool_calls[0].arguments_as_map()),
        json!({"value": "People are people."})
    );
    assert_eq!(m.text().as_deref(), Some("stuff"));
}

/// gpt-oss on Mantle: several fragments of one call in one delta.
#[test]
fn several_fragments_in_one_delta() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::tool_call_fragment(call(
        0,
        Some("call_1"),
        Some("read"),
        Some("{\n"),
    )))
    .unwrap();
    acc.merge(MessageDelta::tool_call_fragments(vec![
        call(0, None, None, Some(" \"")),
        call(0, None, None, Some("file_path\":")),
        call(0, None, None, Some(" \"/Memories/dad_jokes.txt\"}")),
    ]))
    .unwrap();
    assert_eq!(
        acc.tool_calls[0].raw_arguments(),
        Some("{\n \"file_path\": \"/Memories/dad_jokes.txt\"}")
    );
    let m = finished(acc);
    assert_eq!(
        m.tool_calls[0].arguments_as_map()["file_path"],
        "/Memories/dad_jokes.txt"
    );
}

/// `merge_deltas(acc, batch)` across batches.
#[test]
fn across_batches() {
    let mut acc = MessageDelta::default();
    acc.merge_all([
        text_delta(""),
        MessageDelta::tool_call_fragment(call(0, Some("call_123"), Some("get_weather"), None)),
    ])
    .unwrap();
    acc.merge_all([args_delta(0, "{\"city\":"), args_delta(0, " \"Portland\"}")])
        .unwrap();
    acc.merge_all([MessageDelta::status_fragment(DeltaStatus::Complete)])
        .unwrap();
    let m = acc.to_message().unwrap().message;
    assert_eq!(m.tool_calls.len(), 1);
    assert_eq!(
        Value::Object(m.tool_calls[0].arguments_as_map()),
        json!({"city": "Portland"})
    );
}

/// Fixture `deltas_for_tool_call("calculator")`.
#[test]
fn calculator_fixture() {
    let mut acc = MessageDelta::default();
    acc.merge_all([
        MessageDelta::tool_call_fragment(call(0, Some("call_calc"), Some("calculator"), None)),
        args_delta(0, "{\n \""),
        args_delta(0, "expression\": \"100 + 300 - 200\"}"),
    ])
    .unwrap();
    let m = finished(acc);
    assert_eq!(
        Value::Object(m.tool_calls[0].arguments_as_map()),
        json!({"expression": "100 + 300 - 200"})
    );
}

/// Anthropic: `content_block_start` (tool_use) then `input_json_delta` fragments, then
/// `message_delta` with a stop reason and usage.
#[test]
fn anthropic_tool_use_sequence() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::content_fragment(
        0,
        ContentPart::thinking("Let me think"),
    ))
    .unwrap();
    acc.merge(MessageDelta::content_fragment(
        0,
        ContentPart::thinking("").with_option("signature", "EqQB"),
    ))
    .unwrap();
    acc.merge(MessageDelta::content_fragment(
        0,
        ContentPart::thinking("").with_option("signature", "CkYI"),
    ))
    .unwrap();
    acc.merge(MessageDelta::tool_call_fragment(call(
        1,
        Some("toolu_01"),
        Some("do_something"),
        None,
    )))
    .unwrap();
    for f in ["{\"pr", "ompt\": \"a", " cat\"}"] {
        acc.merge(args_delta(1, f)).unwrap();
    }
    acc.merge(MessageDelta::usage_fragment(TokenUsage::new(20, 0)))
        .unwrap();
    let mut stop = MessageDelta::status_fragment(DeltaStatus::Complete);
    stop.usage = Some(TokenUsage::new(0, 31));
    acc.merge(stop).unwrap();
    let m = acc.to_message().unwrap().message;
    assert_eq!(m.content[0].r#type, ContentType::Thinking);
    // The signature accumulates by concatenation.
    assert_eq!(m.content[0].signature(), Some("EqQBCkYI"));
    assert_eq!(m.tool_calls[0].arguments_as_map()["prompt"], "a cat");
    assert_eq!(m.usage(), Some(TokenUsage::new(20, 31)));
}

/// Malformed JSON (#443): the delta converts, the call is reported invalid and never runs.
#[test]
fn malformed_json_is_reported_not_run() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::tool_call_fragment(call(
        0,
        Some("call_1"),
        Some("search"),
        Some("{\"query\": \"test\",\""),
    )))
    .unwrap();
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
        .unwrap();
    let out = acc.to_message().unwrap();
    assert_eq!(out.invalid_tool_calls.len(), 1);
    assert_eq!(
        out.invalid_tool_calls[0].errors.to_string(),
        "arguments: invalid json"
    );
    assert!(!out.message.is_tool_call());
    // The same message through validate gives the reference's message-level string.
    let mut m = out.message;
    m.tool_calls[0].status = ToolCallStatus::Incomplete;
    assert_eq!(
        m.validate().unwrap_err().to_string(),
        "tool_calls: arguments: invalid json"
    );
}

#[test]
fn a_provider_that_never_sent_an_id() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::tool_call_fragment(call(
        0,
        None,
        Some("x"),
        Some("{}"),
    )))
    .unwrap();
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
        .unwrap();
    let mut m = acc.to_message().unwrap().message;
    assert_eq!(m.executable_tool_calls().count(), 0);
    m.status = MessageStatus::Complete;
    assert_eq!(
        m.validate().unwrap_err().to_string(),
        "tool_calls: call_id: can't be blank"
    );
}

// ---------- §5.3 MessageDelta ----------

#[test]
fn incomplete_delta_cannot_convert() {
    let err = MessageDelta::default().to_message().unwrap_err();
    assert_eq!(err, DeltaError::Incomplete);
    assert_eq!(err.to_string(), "Cannot convert incomplete message");
}

#[test]
fn status_moves_forward_only_and_usage_adds() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Length))
        .unwrap();
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Incomplete))
        .unwrap();
    acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
        .unwrap();
    assert_eq!(acc.status, DeltaStatus::Length);
    for _ in 0..3 {
        acc.merge(MessageDelta::usage_fragment(TokenUsage::new(1, 2)))
            .unwrap();
    }
    assert_eq!(acc.usage, Some(TokenUsage::new(3, 6)));
}

#[test]
fn content_goes_to_its_index_and_empty_text_is_skipped() {
    let mut acc = MessageDelta::default();
    acc.merge(MessageDelta::content_fragment(2, ContentPart::text("c")))
        .unwrap();
    acc.merge(text_delta("a")).unwrap();
    acc.merge(text_delta("")).unwrap();
    acc.merge(MessageDelta::content_fragment(
        1,
        ContentPart::thinking("b"),
    ))
    .unwrap();
    acc.merge(MessageDelta::content_fragment(2, ContentPart::text("d")))
        .unwrap();
    let parts: Vec<_> = acc.merged_content().cloned().collect();
    assert_eq!(
        parts,
        vec![
            ContentPart::text("a"),
            ContentPart::thinking("b"),
            ContentPart::text("cd")
        ]
    );
    // A wild index from the wire costs nothing.
    acc.merge(MessageDelta::content_fragment(
        usize::MAX,
        ContentPart::text("z"),
    ))
    .unwrap();
    assert_eq!(acc.merged_content().count(), 4);
}

#[test]
fn a_merged_accumulator_merges_into_another() {
    let mut a = MessageDelta::default();
    a.merge_all([
        text_delta("Hel"),
        MessageDelta::tool_call_fragment(call(0, Some("c"), Some("n"), Some("{\"a\""))),
    ])
    .unwrap();
    let mut b = MessageDelta::default();
    b.merge_all([text_delta("lo"), args_delta(0, ": 1}")])
        .unwrap();
    a.merge(b).unwrap();
    let m = finished(a);
    assert_eq!(m.text().as_deref(), Some("Hello"));
    assert_eq!(m.tool_calls[0].arguments_as_map()["a"], 1);
}

// ---------- §2 ToolResult ----------

#[test]
fn tool_result_content_shapes() {
    // A string becomes one text part.
    let r = ToolResult::text("call_1", "Hello");
    assert_eq!(r.content, vec![ContentPart::text("Hello")]);
    // A single part is wrapped in a list; a list is kept.
    let r = ToolResult::success("call_1", ContentPart::image_url("https://x/y.png"));
    assert_eq!(r.content.len(), 1);
    let r = ToolResult::success(
        "call_1",
        vec![ContentPart::text("a"), ContentPart::text("b")],
    );
    assert_eq!(r.content_text(), "a\n\nb");
    // Content given as `Content` explicitly.
    let r = ToolResult::success("call_1", Content::Text("x".into()));
    assert_eq!(r.content_text(), "x");
}

#[test]
fn tool_result_required_fields() {
    assert_eq!(
        ToolResult::text("", "").validate().unwrap_err().to_string(),
        "tool_call_id: can't be blank; content: can't be blank"
    );
    // Whitespace-only content counts as blank, as Ecto's empty-value rule.
    assert_eq!(
        ToolResult::text("c", "  \n")
            .validate()
            .unwrap_err()
            .to_string(),
        "content: can't be blank"
    );
}

#[test]
fn interrupt_is_not_an_error_and_its_data_is_virtual() {
    let r = ToolResult::interrupt("c", "Waiting for approval", json!({"ask": "deploy?"}));
    assert!(r.is_interrupt() && !r.is_error());
    assert_eq!(r.interrupt_data(), Some(&json!({"ask": "deploy?"})));
    let back: ToolResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert!(back.is_interrupt());
    assert_eq!(back.interrupt_data(), None);
}

#[test]
fn processed_content_is_kept_but_never_content() {
    let r = ToolResult::text("c", "3 rows").with_processed_content(json!([1, 2, 3]));
    assert_eq!(r.content_text(), "3 rows");
    assert_eq!(r.processed_content, Some(json!([1, 2, 3])));
    // Even a null native value round-trips.
    let r = ToolResult::text("c", "x").with_processed_content(Value::Null);
    let back: ToolResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.processed_content, Some(Value::Null));
}

// ---------- §5.2 ContentPart ----------

#[test]
fn content_part_merge_part() {
    // Same type: concatenate. Mismatch: keep the primary.
    let mut p = ContentPart::text("Hello");
    assert!(p.merge_part(ContentPart::text(", world")));
    assert!(!p.merge_part(ContentPart::image_url("u")));
    assert_eq!(p, ContentPart::text("Hello, world"));
    // Options merge; string values under one key concatenate; others are replaced.
    let mut t = ContentPart::thinking("a")
        .with_option("signature", "s1")
        .with_option("n", 1);
    t.merge_part(
        ContentPart::thinking("")
            .with_option("signature", "s2")
            .with_option("n", 2),
    );
    assert_eq!(t.signature(), Some("s1s2"));
    assert_eq!(t.options["n"], 2);
    assert_eq!(t.content, "a");
}

#[test]
fn parts_to_string_rules() {
    let parts = [
        ContentPart::text("a"),
        ContentPart::text(""),
        ContentPart::thinking("t"),
        ContentPart::text("b"),
    ];
    assert_eq!(
        parts_to_string(&parts, ContentType::Text).as_deref(),
        Some("a\n\nb")
    );
    assert_eq!(
        parts_to_string(&parts, ContentType::Thinking).as_deref(),
        Some("t")
    );
    assert_eq!(parts_to_string(&parts, ContentType::Image), None);
}

#[test]
fn content_part_constructors() {
    assert_eq!(
        ContentPart::image("b64", "image/jpeg").media(),
        Some("image/jpeg")
    );
    assert_eq!(
        ContentPart::file("b64", "application/pdf").r#type,
        ContentType::File
    );
    assert_eq!(ContentPart::file_url("u").content, "u");
    assert_eq!(ContentPart::thinking(" x ").content, " x ");
    assert_eq!(ContentPart::from("hi"), ContentPart::text("hi"));
}

// ---------- §5.1 Message ----------

#[test]
fn message_role_rules() {
    assert!(
        Message::system("You are a helpful assistant.")
            .validate()
            .is_ok()
    );
    assert_eq!(
        Message::user("").validate().unwrap_err().to_string(),
        "content: can't be blank"
    );
    assert!(
        Message::user(vec![ContentPart::text("a"), ContentPart::image_url("u")])
            .validate()
            .is_ok()
    );
    assert!(Message::assistant("").validate().is_ok());
    let mut t = Message::tool(vec![ToolResult::text("c", "x")]);
    assert!(t.clone().validate().is_ok());
    t.content = vec![ContentPart::text("no")];
    assert_eq!(
        t.validate().unwrap_err().to_string(),
        "content: is invalid for role tool"
    );
    let mut s = Message::system("x");
    s.tool_results.push(ToolResult::text("c", "x"));
    assert_eq!(
        s.validate().unwrap_err().to_string(),
        "tool_results: can't be set with role system"
    );
}

#[test]
fn complete_message_keeps_valid_calls_and_reports_each_invalid_one() {
    let m = Message::assistant_with_calls(
        "",
        vec![
            call(0, Some("a"), Some("t"), Some("{}")),
            call(1, Some("b"), Some("t"), Some("{bad")),
            call(2, None, Some("t"), Some("{}")),
        ],
    );
    let err = m.clone().validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool_calls: arguments: invalid json, call_id: can't be blank"
    );
    assert_eq!(
        err.errors().iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![Some(1), Some(2)]
    );
    let mut m = m;
    let invalid = m.complete_tool_calls();
    assert_eq!(invalid.len(), 2);
    assert_eq!(
        m.executable_tool_calls()
            .map(|c| c.call_id.as_deref())
            .collect::<Vec<_>>(),
        vec![Some("a")]
    );
}

#[test]
fn length_and_cancelled_never_complete_calls() {
    for status in [MessageStatus::Length, MessageStatus::Cancelled] {
        let mut m =
            Message::assistant_with_calls("", vec![call(0, Some("a"), Some("t"), Some("{}"))]);
        m.status = status;
        let m = m.validate().unwrap();
        assert!(!m.tool_calls[0].is_complete());
        assert!(!m.is_tool_call());
    }
}

#[test]
fn message_helpers() {
    let mut msgs = vec![
        Message::assistant_with_calls("", vec![ToolCall::function("a", "t", json!({})).unwrap()]),
        Message::tool(vec![ToolResult::error("a", "boom")]),
    ];
    assert!(msgs[0].is_tool_call() && msgs[0].is_tool_related());
    assert!(msgs[1].tool_had_errors());
    assert!(Message::replace_tool_result(
        &mut msgs,
        "a",
        ToolResult::text("a", "ok")
    ));
    assert!(!msgs[1].tool_had_errors());
    assert!(Message::assistant("").is_empty());
    assert!(!msgs[0].is_empty());
}
