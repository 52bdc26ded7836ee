//! Policy rules on the path every call takes: 10,000 calls decided against 100 rules
//! (globs over tool names, argument tests by JSON pointer, one regex in ten), through
//! `Policy::rule` as the chain calls it. Goal (issue 48): at most 5 ms for the 10,000.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use llmchain::policy::{CallFacts, Policy, RuleSpec, Rules};
use serde_json::{Map, Value, json};

fn rules() -> Rules {
    let specs: Vec<RuleSpec> = (0..100)
        .map(|i| {
            let spec = match i % 10 {
                0 => json!({"id": format!("r{i}"), "tool": format!("mcp:server{i}/*"),
                            "args": {"/path": {"regex": "^/etc/"}}, "effect": "deny"}),
                1..=4 => json!({"id": format!("r{i}"), "tool": format!("tool_{i}"),
                                "args": {"/amount": {"gt": i}}, "effect": "ask"}),
                5..=7 => json!({"id": format!("r{i}"), "tool": format!("tool_{}*", i / 10),
                                "args": {"/currency": {"in": ["eur", "usd"]}}, "effect": "allow"}),
                _ => json!({"id": format!("r{i}"), "tool": "*",
                            "args": {"/to": {"glob": "*@example.com"}}, "effect": "ask"}),
            };
            serde_json::from_value(spec).unwrap()
        })
        .collect();
    Rules::compile(specs).unwrap()
}

fn calls() -> Vec<(String, Map<String, Value>)> {
    (0..10_000)
        .map(|i| {
            let tool = match i % 4 {
                0 => format!("tool_{}", i % 100),
                1 => format!("mcp:server{}/write", (i % 10) * 10),
                2 => "send_email".to_owned(),
                _ => "calculator".to_owned(),
            };
            let args = json!({"amount": i % 200, "currency": "usd", "path": format!("/home/u/{i}"),
                              "to": format!("user{i}@example.com")});
            (tool, args.as_object().unwrap().clone())
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let rules = rules();
    let calls = calls();
    c.bench_function("policy/10000_calls_100_rules", |b| {
        b.iter(|| {
            for (tool, args) in &calls {
                black_box(rules.rule(&CallFacts::new(tool, args)));
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
