//! The shared AWS config and credentials files are read as every AWS SDK reads them:
//! the cross-SDK conformance cases (smithy-rs, `aws-runtime/test-data/
//! profile-parser-tests.json`, Apache-2.0) run against `llmchain::http::aws::profile`.

use std::collections::BTreeMap;

use llmchain::http::aws::profile::{FileKind, merge, parse};
use serde_json::Value;

#[test]
fn the_cross_sdk_conformance_cases() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/aws_profile/profile-parser-tests.json"
    );
    let suite: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut failed = Vec::new();
    let cases = suite["tests"].as_array().unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let input = &case["input"];
        let text = |k: &str| input[k].as_str().unwrap_or("").to_owned();
        let got = parse(&text("configFile"), FileKind::Config).and_then(|c| {
            parse(&text("credentialsFile"), FileKind::Credentials).map(|k| merge(c, k))
        });
        let want = &case["output"];
        match (got, want.get("errorContaining")) {
            (Err(_), Some(_)) => {}
            (Ok(p), None) => {
                let want: BTreeMap<String, BTreeMap<String, String>> =
                    serde_json::from_value(want["config"]["profiles"].clone()).unwrap();
                if p != want {
                    failed.push(format!("{name}: got {p:?}, want {want:?}"));
                }
            }
            (Ok(p), Some(e)) => failed.push(format!("{name}: read {p:?}, want an error {e}")),
            (Err(e), None) => failed.push(format!("{name}: error {e}")),
        }
    }
    assert!(cases.len() >= 60);
    assert!(
        failed.is_empty(),
        "{} of {} cases:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}
