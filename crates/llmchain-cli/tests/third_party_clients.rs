//! Real third-party MCP clients against `llmchain mcp serve`: the MCP Inspector CLI
//! (`@modelcontextprotocol/inspector --cli`, npm) and the official Python SDK client
//! (`mcp`, PyPI): tools/list, tools/call with good and bad arguments, an unknown tool,
//! and ping. Needs `LLMCHAIN_TEST_NPM_BIN` / `LLMCHAIN_TEST_MCP_PYTHON` (`.ci/run` sets
//! them); prints `SKIPPED` and passes without them.

mod common;

use std::process::Command;

use common::{BIN, third_party as var};
use serde_json::{Value, json};

/// The Inspector CLI against `llmchain mcp serve`: its output as JSON.
/// The Inspector CLI calling our `calculator` tool with one `--tool-arg`.
fn calculator(npm: &str, arg: &str) -> Value {
    inspector(
        npm,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "calculator",
            "--tool-arg",
            arg,
        ],
    )
}

fn inspector(npm: &str, args: &[&str]) -> Value {
    let out = Command::new(format!("{npm}/mcp-inspector"))
        .args([
            "--cli",
            BIN,
            "mcp",
            "serve",
            "--root",
            env!("CARGO_MANIFEST_DIR"),
        ])
        .args(args)
        .output()
        .unwrap();
    // A result on stdout; an error (an unknown tool) on stderr, with a failing exit.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = if stdout.trim().is_empty() {
        &stderr
    } else {
        &stdout
    };
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"))
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_our_tools() {
    let Some(npm) = var(
        "LLMCHAIN_TEST_NPM_BIN",
        "the_mcp_inspector_cli_lists_and_calls_our_tools",
    ) else {
        return;
    };
    let list = inspector(&npm, &["--method", "tools/list"]);
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["calculator", "clock", "read_file"]);
    assert_eq!(
        tools[0]["annotations"],
        json!({"title": "Calculate", "readOnlyHint": true, "destructiveHint": false,
               "idempotentHint": true, "openWorldHint": false})
    );
    let good = calculator(&npm, "expression=2*21");
    assert_eq!(good["isError"], false);
    assert_eq!(good["content"][0]["text"], "2*21 = 42");
    // A number where the schema wants a string: refused by our argument check.
    let bad = calculator(&npm, "expression=42");
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not of type"),
        "{bad}"
    );
    // An expression that does not parse: a refusal the model can act on.
    let refused = calculator(&npm, "expression=1+");
    assert_eq!(refused["isError"], true, "{refused}");
    let unknown = inspector(
        &npm,
        &["--method", "tools/call", "--tool-name", "no_such_tool"],
    );
    assert!(unknown["error"].is_object(), "{unknown}");
    // The Inspector CLI has no ping; initialize is its round trip.
    let init = inspector(&npm, &["--method", "initialize"]);
    assert_eq!(init["serverInfo"]["name"], "llmchain", "{init}");
}

#[test]
fn the_python_sdk_client_lists_calls_pings_and_gets_errors() {
    let Some(py) = var(
        "LLMCHAIN_TEST_MCP_PYTHON",
        "the_python_sdk_client_lists_calls_pings_and_gets_errors",
    ) else {
        return;
    };
    let script = format!("{}/tests/servers/sdk_client.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(py)
        .args([&script, BIN, env!("CARGO_MANIFEST_DIR")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["server"], "llmchain");
    assert_eq!(
        v["tools"]["read_file"],
        json!({"title": "Read a file", "read_only_hint": true, "destructive_hint": false,
               "idempotent_hint": true, "open_world_hint": false})
    );
    assert_eq!(v["good"], json!({"is_error": false, "text": "6*7 = 42"}));
    assert_eq!(v["bad_arguments"]["is_error"], true);
    assert!(
        v["bad_arguments"]["text"]
            .as_str()
            .unwrap()
            .contains("not of type \"string\"")
    );
    assert_eq!(v["unknown"]["code"], -32602, "{v}");
    assert_eq!(v["ping"], "ok");
}
