//! `#[llmchain::tool]`: typed tools, generated schemas (snapshots) and attributes.

use llmchain::message::ToolCall;
use llmchain::tool::{ToolContext, ToolExecutor, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Units for temperatures.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// Arguments of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WeatherArgs {
    /// City name, e.g. "Paris".
    pub city: String,
    /// Temperature unit.
    #[serde(default)]
    pub unit: Option<Unit>,
    /// How many days to forecast.
    #[schemars(range(min = 1, max = 14))]
    pub days: Option<u8>,
}

/// Current weather in a city.
///
/// Returns a short sentence for the model and the raw numbers for the application.
#[llmchain::tool(timeout_ms = 5000, idempotent, read_only, max_concurrency = 4)]
pub async fn get_weather(args: WeatherArgs) -> Result<(String, serde_json::Value), String> {
    if args.city == "Atlantis" {
        return Err("unknown city".into());
    }
    let c = 18;
    let text = match args.unit {
        Some(Unit::Fahrenheit) => format!("{}F in {}", c * 9 / 5 + 32, args.city),
        _ => format!("{c}C in {}", args.city),
    };
    Ok((text, json!({"temp_c": c})))
}

#[derive(Deserialize, JsonSchema)]
struct NoteArgs {
    text: String,
}

/// Saves a note.
#[llmchain::tool(
    name = "save-note",
    display_text = "Saving a note",
    strict,
    destructive
)]
async fn save_note(args: NoteArgs, ctx: ToolContext) -> ToolOutput {
    if args.text.is_empty() {
        return ToolOutput::refusal("text is empty; nothing was saved");
    }
    ToolOutput::text(format!("saved {:?} for {}", args.text, ctx.tool_call_id()))
}

#[test]
fn generated_schema_and_definition() {
    let tool = get_weather_tool();
    assert_eq!(tool.name(), "get_weather");
    assert_eq!(
        tool.description(),
        "Current weather in a city.\n\nReturns a short sentence for the model and the raw numbers for the application."
    );
    assert_eq!(tool.display_text(), "Get weather");
    assert_eq!(tool.timeout(), Some(std::time::Duration::from_millis(5000)));
    assert_eq!(tool.max_concurrency().map(|n| n.get()), Some(4));
    assert!(tool.idempotent());
    assert!(!tool.strict());
    assert_eq!((tool.read_only(), tool.destructive()), (Some(true), None));
    insta::assert_json_snapshot!("get_weather_schema", tool.parameters_schema());

    let note = save_note_tool();
    assert_eq!(note.name(), "save-note");
    assert_eq!(note.display_text(), "Saving a note");
    assert!(note.strict());
    assert!(!note.idempotent());
    assert_eq!((note.read_only(), note.destructive()), (None, Some(true)));
    insta::assert_json_snapshot!("save_note_definition", note.definition());
}

#[tokio::test]
async fn typed_tools_run_through_the_executor() {
    let ex = ToolExecutor::new([get_weather_tool(), save_note_tool()]).unwrap();
    let mut calls = vec![
        ToolCall::function("c1", "get_weather", json!({"city": "Paris"})).unwrap(),
        ToolCall::function(
            "c2",
            "get_weather",
            json!({"city": "Oslo", "unit": "fahrenheit"}),
        )
        .unwrap(),
        ToolCall::function("c3", "get_weather", json!({"city": "Atlantis"})).unwrap(),
        ToolCall::function(
            "c4",
            "get_weather",
            json!({"city": "Rome", "unit": "kelvin", "days": 30}),
        )
        .unwrap(),
        ToolCall::function("c5", "save-note", json!({"text": "hi"})).unwrap(),
        ToolCall::function("c6", "save-note", json!({"text": ""})).unwrap(),
        ToolCall::function("c7", "get_weather", json!({"town": "Paris"})).unwrap(),
    ];
    let r = ex.execute(&mut calls).await;
    assert_eq!(r[0].content_text(), "18C in Paris");
    assert_eq!(r[0].processed_content, Some(json!({"temp_c": 18})));
    assert_eq!(r[1].content_text(), "64F in Oslo");
    assert!(r[2].is_error() && !r[2].is_refusal());
    assert_eq!(r[2].content_text(), "unknown city");
    assert!(r[3].is_refusal());
    let t = r[3].content_text();
    assert!(
        t.starts_with("The arguments do not match the tool's parameters schema.\n\n"),
        "{t}"
    );
    assert!(
        t.contains("- /days: 30 is greater than the maximum of 14"),
        "{t}"
    );
    assert!(t.contains("- /unit: "), "{t}");
    assert_eq!(r[4].content_text(), "saved \"hi\" for c5");
    assert!(r[5].is_refusal());
    assert_eq!(r[5].content_text(), "text is empty; nothing was saved");
    assert_eq!(
        r[6].content_text(),
        "Missing required parameters for this tool.\n\n\
         Required parameters: city\n\
         Missing parameters: city\n\
         Unrecognized parameters: town\n\
         Accepted parameters: city, unit, days\n\n\
         Ensure you're passing the correct parameter names as defined in the tool schema."
    );
}

#[tokio::test]
async fn the_function_stays_callable() {
    let (text, _) = get_weather(WeatherArgs {
        city: "Lima".into(),
        unit: None,
        days: None,
    })
    .await
    .unwrap();
    assert_eq!(text, "18C in Lima");
}

#[test]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/tool_*.rs");
}

mod reexported {
    //! A crate that reaches llmchain through a re-export names it with `crate = …`;
    //! the argument type needs no serde or schemars of its own.
    pub(crate) mod sdk {
        // The re-export under test: a user's SDK crate names llmchain under its own path.
        #[allow(clippy::single_component_path_imports)]
        pub(crate) use llmchain;
    }

    #[derive(llmchain::serde::Deserialize, llmchain::schemars::JsonSchema)]
    #[serde(crate = "llmchain::serde")]
    #[schemars(crate = "llmchain::schemars")]
    pub(crate) struct EchoArgs {
        pub text: String,
    }

    /// Echoes its text.
    #[llmchain::tool(crate = "self::sdk::llmchain")]
    pub(crate) async fn echo(args: EchoArgs) -> String {
        args.text
    }
}

#[tokio::test]
async fn the_macro_takes_a_crate_path_and_the_reexported_derives() {
    let tool = reexported::echo_tool();
    assert_eq!(tool.name(), "echo");
    let r = tool
        .execute(
            json!({"text": "hi"}),
            llmchain::tool::ToolContext::new("c1"),
        )
        .await;
    assert_eq!(r.content_text(), "hi");
}
