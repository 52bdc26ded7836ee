//! `llmchain policy check | explain`: a profile's rules (`[[policy]]`), checked and
//! explained before any run takes them.

use crate::config::{Config, DEFAULT_PROFILE, Profile};
use crate::error::{CliError, CliResult};
use crate::stdout::outln;

/// `llmchain policy`.
#[derive(Debug, clap::Args)]
pub(crate) struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PolicyCommand {
    /// Load every profile's rules, validate them and run their examples (a bad rule is
    /// an error naming its id and line; exit 2).
    Check {
        /// Only this profile [default: every profile].
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// The config file [default: $LLMCHAIN_CONFIG, else the standard one].
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// Say which rule fires on a call of TOOL with ARGS_JSON, and why each other rule
    /// does not. TOOL is the name rules match: a built-in tool's name, or
    /// mcp:SERVER/TOOL.
    Explain {
        /// The tool, as rules name it.
        tool: String,
        /// The call's arguments, a JSON object.
        #[arg(value_name = "ARGS_JSON", default_value = "{}")]
        args: String,
        /// The profile [default: "default"].
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// The config file [default: $LLMCHAIN_CONFIG, else the standard one].
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(args: PolicyArgs) -> CliResult {
    match args.command {
        PolicyCommand::Check { profile, config } => {
            // Loading compiles every rule and runs every example.
            let config = crate::config::load_from(config.as_deref())?;
            let names = match profile {
                Some(p) => {
                    config.profile(&p)?;
                    vec![p]
                }
                None => config.names(),
            };
            for name in names {
                let p = config.profile(&name)?;
                let examples: usize = p
                    .policy
                    .iter()
                    .filter_map(|r| r.examples.as_ref())
                    .map(|e| e.matching.len() + e.not_match.len())
                    .sum();
                let ids: Vec<String> = p
                    .policy
                    .iter()
                    .map(|r| crate::shown::inline(&r.id, 80))
                    .collect();
                outln!(
                    "profile {}: {} rule(s){}{}, {} example(s) passed; calls no rule matches: approve = {}",
                    crate::shown::inline(&name, 80),
                    ids.len(),
                    if ids.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", ids.join(", "))
                    },
                    if p.policy_mode.as_deref() == Some("shadow") {
                        ", shadow mode (observed, not enforced)"
                    } else {
                        ""
                    },
                    examples,
                    p.approve.as_deref().unwrap_or("auto")
                );
            }
            Ok(())
        }
        PolicyCommand::Explain {
            tool,
            args,
            profile,
            config,
            json,
        } => {
            let config = crate::config::load_from(config.as_deref())?;
            explain(
                &config,
                profile.as_deref().unwrap_or(DEFAULT_PROFILE),
                &tool,
                &args,
                json,
            )
        }
    }
}

fn explain(config: &Config, name: &str, tool: &str, args: &str, json: bool) -> CliResult {
    let profile: &Profile = config.profile(name)?;
    let arguments = match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(other) => {
            return Err(CliError::usage(format!(
                "ARGS_JSON must be a JSON object, not {other}"
            )));
        }
        Err(e) => return Err(CliError::usage(format!("ARGS_JSON is not JSON: {e}"))),
    };
    let rules = crate::policy_rules::compile(&profile.policy, profile.policy_mode.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    let approve = profile.approve.as_deref().unwrap_or("auto");
    let fallback = match approve {
        "always" => "allow (approve = always)".to_owned(),
        "never" => "deny (approve = never)".to_owned(),
        "ask" => "ask (approve = ask)".to_owned(),
        _ if tool.starts_with("mcp:") => {
            "ask (approve = auto: an MCP tool is asked about unless its server is trusted and \
             says it only reads; denied without a terminal)"
                .to_owned()
        }
        _ => "by the tool's hints (approve = auto: read-only tools run, others are asked \
              about; denied without a terminal)"
            .to_owned(),
    };
    let explanation = rules.as_ref().map(|r| r.explain(tool, &arguments));
    let enforced = explanation
        .as_ref()
        .and_then(|e| e.rulings.enforced.clone());
    let shadowed = explanation
        .as_ref()
        .and_then(|e| e.rulings.shadowed.clone());
    if json {
        let trace: Vec<serde_json::Value> = explanation
            .iter()
            .flat_map(|e| e.trace.iter())
            .map(|t| {
                serde_json::json!({
                    "rule": t.id, "effect": t.effect, "shadow": t.shadow,
                    "matched": t.unmatched.is_none(), "why_not": t.unmatched,
                    "unevaluable": t.unevaluable,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({
                "profile": name,
                "tool": tool,
                "decision": enforced.as_ref().map(|r| r.effect.as_str()),
                "rule": enforced.as_ref().map(|r| r.rule.clone()),
                "reason": enforced.as_ref().and_then(|r| r.reason.clone()),
                "shadow": shadowed.as_ref().map(|r| serde_json::json!({"effect": r.effect, "rule": r.rule})),
                "otherwise": if enforced.is_none() { Some(fallback.clone()) } else { None },
                "rules": trace,
            })
        );
        return Ok(());
    }
    let show = |s: &str| crate::shown::inline(s, 200);
    for t in explanation.iter().flat_map(|e| e.trace.iter()) {
        let state = match (&t.unmatched, &t.unevaluable) {
            (_, Some(why)) => format!("cannot be evaluated ({}): denies", show(why)),
            (None, None) => "matches".to_owned(),
            (Some(why), None) => format!("does not match: {}", show(why)),
        };
        outln!(
            "rule {} ({}{}): {state}",
            show(&t.id),
            t.effect,
            if t.shadow { ", shadow" } else { "" }
        );
    }
    match &enforced {
        Some(r) => outln!(
            "decision: {} by rule {}{}",
            r.effect,
            show(&r.rule),
            r.reason
                .as_deref()
                .map(|why| format!(": {}", show(why)))
                .unwrap_or_default()
        ),
        None => outln!("decision: no rule decides; {fallback}"),
    }
    if let Some(s) = &shadowed {
        outln!(
            "shadow: rule {} would make it {} (journaled, not enforced)",
            show(&s.rule),
            s.effect
        );
    }
    Ok(())
}
