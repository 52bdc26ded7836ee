//! Typed answers (`LLMChain::extract`, the `Extract` mode) over every built-in format's
//! real wire shape: the scripted model renders each provider's response bytes and
//! decodes them with the real decoder, and every request body the codec wrote is read
//! back to see how it asked for the schema.

use std::sync::Arc;

use llmchain::chain::{ChainError, Extract, LLMChain, Mode, RunOutcome, ScriptedModel};
use llmchain::conversation::ResponseFormat;
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::{Tool, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct City {
    name: String,
    population: u64,
}

const PARIS: &str = r#"{"name": "Paris", "population": 2100000}"#;

fn paris() -> City {
    City {
        name: "Paris".into(),
        population: 2_100_000,
    }
}

fn scripted(format: Format, turns: Vec<ResponseScript>) -> Arc<ScriptedModel> {
    let mut model = ScriptedModel::new(format);
    for turn in turns {
        model = model.respond(turn).unwrap();
    }
    Arc::new(model)
}

fn requests(model: &ScriptedModel) -> Vec<Value> {
    model
        .requests()
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect()
}

async fn chain_asking(model: Arc<ScriptedModel>) -> LLMChain {
    let mut chain = LLMChain::new(model);
    chain
        .add_message(Message::user("Which is the largest city of France?"))
        .await
        .unwrap();
    chain
}

fn calc_tool() -> Tool {
    Tool::builder("calculator")
        .description("Adds a and b")
        .schema(json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]}))
        .handler(|args, _| async move {
            let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            ToolOutput::text(format!("{sum}"))
        })
        .build()
        .unwrap()
}

/// Where each format's request carries the schema when the provider has its own way.
const NATIVE: &[(Format, &str)] = &[
    (Format::OPENAI_CHAT, "/response_format/json_schema/schema"),
    (Format::OPENAI_RESPONSES, "/text/format/schema"),
    (Format::ANTHROPIC, "/output_config/format/schema"),
    (Format::GEMINI, "/generationConfig/responseSchema"),
    (Format::OLLAMA, "/format"),
];

#[tokio::test]
async fn every_format_with_a_native_mechanism_answers_typed_in_text() {
    for &(format, at) in NATIVE {
        let model = scripted(format, vec![ResponseScript::text(PARIS)]);
        let mut chain = chain_asking(model.clone()).await;
        let city: City = chain.extract().await.unwrap();
        assert_eq!(city, paris(), "{format}");
        let sent = requests(&model);
        assert_eq!(sent.len(), 1, "{format}");
        let schema = sent[0]
            .pointer(at)
            .unwrap_or_else(|| panic!("{format}: {}", sent[0]));
        assert!(
            schema.pointer("/properties/population").is_some()
                && schema.pointer("/properties/name").is_some(),
            "{format}: {schema}"
        );
        // The answer tool is the chain's own: a native provider never sees it.
        let text = sent[0].to_string();
        assert!(!text.contains("Give your final answer"), "{format}: {text}");
        // The run leaves the chain as it found it.
        assert!(chain.conversation().response_format.is_none(), "{format}");
        assert!(chain.tools().is_empty(), "{format}");
    }
}

#[tokio::test]
async fn strict_formats_get_the_strict_rewrite() {
    let model = scripted(Format::OPENAI_CHAT, vec![ResponseScript::text(PARIS)]);
    let mut chain = chain_asking(model.clone()).await;
    let _: City = chain.extract().await.unwrap();
    let body = &requests(&model)[0];
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "City");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        format["json_schema"]["schema"]["additionalProperties"], false,
        "{format}"
    );
    let body = {
        let model = scripted(Format::OPENAI_RESPONSES, vec![ResponseScript::text(PARIS)]);
        let mut chain = chain_asking(model.clone()).await;
        let _: City = chain.extract().await.unwrap();
        requests(&model).remove(0)
    };
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    assert_eq!(body["text"]["format"]["name"], "City");
    assert_eq!(body["text"]["format"]["strict"], true);
}

#[tokio::test]
async fn bedrock_answers_through_the_answer_tool_it_is_made_to_call() {
    let model = scripted(
        Format::BEDROCK_CONVERSE,
        vec![ResponseScript::tool_call("call_1", "City", PARIS)],
    );
    let mut chain = chain_asking(model.clone()).await;
    let city: City = chain.extract().await.unwrap();
    assert_eq!(city, paris());
    let sent = requests(&model);
    assert_eq!(sent.len(), 1, "no model call after the answer");
    let config = &sent[0]["toolConfig"];
    assert_eq!(
        config["toolChoice"],
        json!({"tool": {"name": "City"}}),
        "{config}"
    );
    assert_eq!(config["tools"][0]["toolSpec"]["name"], "City");
    assert!(chain.tools().is_empty());
}

#[tokio::test]
async fn tools_run_first_then_the_answer_is_typed() {
    let answer = r#"{"name": "sum", "population": 5}"#;
    for format in [Format::OPENAI_CHAT, Format::ANTHROPIC, Format::OLLAMA] {
        let model = scripted(
            format,
            vec![
                ResponseScript::tool_call("call_1", "calculator", r#"{"a": 2, "b": 3}"#),
                ResponseScript::text(answer),
            ],
        );
        let mut chain = chain_asking(model.clone()).await.with_tool(calc_tool());
        let city: City = chain.extract().await.unwrap();
        assert_eq!(city.population, 5, "{format}");
        let sent = requests(&model);
        assert_eq!(sent.len(), 2, "{format}");
        // The second request carries the tool's result and still asks for the schema.
        assert!(sent[1].to_string().contains("calculator"), "{format}");
        assert_eq!(
            chain.tools().len(),
            1,
            "{format}: only the user's tool is left"
        );
    }
    // Bedrock (and Gemini beside other tools) answer through the tool: any tool, then it.
    for format in [Format::BEDROCK_CONVERSE, Format::GEMINI] {
        let model = scripted(
            format,
            vec![
                ResponseScript::tool_call("call_1", "calculator", r#"{"a": 2, "b": 3}"#),
                ResponseScript::tool_call("call_2", "City", answer),
            ],
        );
        let mut chain = chain_asking(model.clone()).await.with_tool(calc_tool());
        let city: City = chain.extract().await.unwrap();
        assert_eq!(city.population, 5, "{format}");
        let sent = requests(&model);
        let first = sent[0].to_string();
        assert!(
            first.contains("\"City\"") && first.contains("calculator"),
            "{format}: {first}"
        );
    }
}

#[tokio::test]
async fn a_wrong_answer_is_sent_back_naming_where_it_is_wrong() {
    let model = scripted(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::text(r#"{"name": "Paris", "population": "many"}"#),
            ResponseScript::text(PARIS),
        ],
    );
    let mut chain = chain_asking(model.clone()).await;
    let city: City = chain.extract().await.unwrap();
    assert_eq!(city, paris());
    let sent = requests(&model);
    assert_eq!(sent.len(), 2);
    let told = sent[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(told.contains("/population"), "{told}");
}

#[tokio::test]
async fn text_that_is_not_json_is_sent_back_too_and_a_fence_is_read_through() {
    let model = scripted(
        Format::ANTHROPIC,
        vec![
            ResponseScript::text("Paris, of course."),
            ResponseScript::text(format!("```json\n{PARIS}\n```")),
        ],
    );
    let mut chain = chain_asking(model.clone()).await;
    let city: City = chain.extract().await.unwrap();
    assert_eq!(city, paris());
    assert_eq!(requests(&model).len(), 2);
}

#[tokio::test]
async fn the_last_failure_names_the_path() {
    let wrong = r#"{"name": "Paris", "population": -1}"#;
    let model = scripted(Format::GEMINI, vec![ResponseScript::text(wrong); 3]);
    let mut chain = chain_asking(model.clone()).await.with_max_retry_count(3);
    let e = chain.extract::<City>().await.unwrap_err();
    match &e {
        ChainError::InvalidAnswer { path, .. } => assert_eq!(path, "/population", "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("/population"), "{e}");
    assert_eq!(e.error_type(), "invalid_answer");
    assert!(chain.conversation().response_format.is_none());
}

#[tokio::test]
async fn bedrock_arguments_that_do_not_match_are_refused_and_asked_again() {
    let model = scripted(
        Format::BEDROCK_CONVERSE,
        vec![
            ResponseScript::tool_call("call_1", "City", r#"{"name": "Paris"}"#),
            ResponseScript::tool_call("call_2", "City", PARIS),
        ],
    );
    let mut chain = chain_asking(model.clone()).await;
    let city: City = chain.extract().await.unwrap();
    assert_eq!(city, paris());
    let sent = requests(&model);
    assert_eq!(sent.len(), 2);
    assert!(
        sent[1].to_string().contains("population"),
        "the refusal names it"
    );
}

#[tokio::test]
async fn a_schema_known_at_run_time_and_the_mode_under_any_owner() {
    let schema = json!({"title": "Weather", "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"]});
    let extract = Extract::new(ResponseFormat::for_schema(schema)).unwrap();
    assert_eq!(extract.format().name, "Weather");
    let model = scripted(
        Format::OPENAI_RESPONSES,
        vec![ResponseScript::text(r#"{"city": "Oslo", "celsius": -3.5}"#)],
    );
    let mut chain = chain_asking(model).await;
    // As a mode (what a worker, the CLI or serve runs), then read back.
    let outcome = chain.run(Mode::custom(extract.clone())).await.unwrap();
    assert_eq!(outcome, RunOutcome::Done);
    let value = extract.answer(chain.conversation()).unwrap();
    assert_eq!(value, json!({"city": "Oslo", "celsius": -3.5}));
    // Schemas providers would refuse are refused before any call.
    let e = Extract::new(ResponseFormat::for_schema(json!({"type": "array"}))).unwrap_err();
    assert!(e.to_string().contains("object"), "{e}");
    let e = Extract::new(ResponseFormat::for_schema(
        json!({"type": "object", "properties": 3}),
    ))
    .unwrap_err();
    assert!(matches!(e, ChainError::AnswerSchema(_)), "{e:?}");
}

/// A partial answer is a view of the final one: its keys are the final's, its strings
/// prefixes of the final's, its arrays prefixes, its finished scalars equal.
fn view_of(partial: &Value, full: &Value) -> bool {
    match (partial, full) {
        (Value::Object(p), Value::Object(f)) => p
            .iter()
            .all(|(k, v)| f.get(k).is_some_and(|fv| view_of(v, fv))),
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len() && p.iter().zip(f).all(|(a, b)| view_of(a, b))
        }
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        (p, f) => p == f,
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Doc {
    title: String,
    tags: Vec<String>,
    pages: u32,
    meta: Meta,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Meta {
    author: String,
    draft: bool,
}

const DOC: &str = r#"{"title": "Streams \"all\" the way — ünïcode", "tags": ["a", "béta", "c"], "pages": 123, "meta": {"author": "Ada", "draft": false}}"#;

const ALL: [Format; 6] = [
    Format::OPENAI_CHAT,
    Format::OPENAI_RESPONSES,
    Format::ANTHROPIC,
    Format::GEMINI,
    Format::OLLAMA,
    Format::BEDROCK_CONVERSE,
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Partial answers at any chunking of any format's stream: each is a view of the
    /// final answer and of the partial after it, and the last is the answer.
    #[test]
    fn every_partial_answer_is_a_view_of_the_final_one(
        chunk in 1usize..48,
        which in 0usize..6,
        fenced: bool,
    ) {
        let format = ALL[which];
        let script = if format == Format::BEDROCK_CONVERSE {
            ResponseScript::tool_call("call_1", "Doc", DOC)
        } else if fenced {
            ResponseScript::text(format!("```json\n{DOC}\n```"))
        } else {
            ResponseScript::text(DOC)
        };
        let model = Arc::new(ScriptedModel::new(format).respond(script).unwrap().chunk_size(chunk));
        let partials: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
        let seen = partials.clone();
        let extract = Extract::of::<Doc>()
            .unwrap()
            .on_partial(move |v| seen.lock().unwrap().push(v.clone()));
        let value = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let mut chain = chain_asking(model).await;
                chain.extract_value(extract).await
            })
            .unwrap();
        let partials = partials.lock().unwrap();
        // It streams: the object grows over several partials.
        proptest::prop_assert!(partials.len() >= 3, "{format}: {partials:?}");
        proptest::prop_assert_ne!(&partials[0], &value);
        for p in partials.iter() {
            proptest::prop_assert!(view_of(p, &value), "{format}: {p} is not a view of {value}");
        }
        for pair in partials.windows(2) {
            proptest::prop_assert!(view_of(&pair[0], &pair[1]), "{format}: {} then {}", pair[0], pair[1]);
        }
        proptest::prop_assert_eq!(partials.last().unwrap(), &value, "{}", format);
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Essay {
    body: String,
}

/// Round 5: a partial per piece made a long answer cost the square of its size (512 KB
/// in 100-byte pieces sent hundreds of megabytes to a served page). All the partials
/// together now stay within a few times the answer, in every format, and the last is it.
#[tokio::test]
async fn partials_of_a_long_answer_cost_a_few_times_its_size() {
    let body = "word ".repeat(40_000);
    let answer = serde_json::json!({ "body": body }).to_string();
    for format in ALL {
        let script = if format == Format::BEDROCK_CONVERSE {
            ResponseScript::tool_call("call_1", "Essay", &answer)
        } else {
            ResponseScript::text(answer.clone())
        };
        let model = Arc::new(
            ScriptedModel::new(format)
                .respond(script)
                .unwrap()
                .chunk_size(100),
        );
        let sizes: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
        let seen = sizes.clone();
        let last: Arc<std::sync::Mutex<Option<Value>>> = Arc::default();
        let kept = last.clone();
        let extract = Extract::of::<Essay>().unwrap().on_partial(move |v| {
            seen.lock().unwrap().push(v.to_string().len());
            *kept.lock().unwrap() = Some(v.clone());
        });
        let mut chain = chain_asking(model).await;
        let value = chain.extract_value(extract).await.unwrap();
        let sizes = sizes.lock().unwrap();
        let total: usize = sizes.iter().sum();
        assert!(sizes.len() >= 10, "{format}: {} partials", sizes.len());
        assert!(
            total <= 4 * answer.len(),
            "{format}: {total} bytes of partials for a {}-byte answer",
            answer.len()
        );
        assert_eq!(last.lock().unwrap().as_ref(), Some(&value), "{format}");
    }
}
