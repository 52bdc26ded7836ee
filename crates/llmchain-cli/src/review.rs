//! Reviewing tool calls in the terminal: `--approve always|never|ask`.
//!
//! [`approval_handler`] builds a [`ReviewHandler`] for a policy and the tools' hints:
//!
//! * `auto` (the default) decides by the tools' annotations: read-only tools run
//!   unasked; every other call (destructive, or not known to be read-only) is asked
//!   about when stdin and stderr are a terminal, and denied otherwise, with a message
//!   saying to pass `--approve always`;
//! * `always` approves every call;
//! * `never` denies every call (the model is told the user allows no tool calls);
//! * `ask` asks about every call, read-only ones included.
//!
//! With no terminal to ask at (a worker; `run` with stdin or stderr not a terminal),
//! a call `ask` would ask about is paused for the review inbox
//! ([`ReviewDecision::Interrupt`]: the run stops with its reviews stored, and
//! `llmchain reviews` answers them), while `auto` denies what it would ask about.
//!
//! Each question shows the tool, its display text, its hints (`read-only`,
//! `destructive`, ...) and the arguments pretty-printed, and takes one answer:
//!   `a`pprove, `e`dit (in `$EDITOR` on a temp file, or JSON typed in when `$EDITOR`
//!   is unset), `r`eject (an error + refusal: the call was wrong, the model may correct
//!   it) or `d`eny (not an error: the user said no).
//!
//! Questions are serialised (one at a time, each naming its run and call) and read from
//! stdin in a blocking thread. End of input counts as deny.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use llmchain::chain::{ReviewDecision, ReviewFuture, ReviewHandler};
use llmchain::message::ToolCall;
use llmchain::tool::Tool;
use llmchain::tool::ToolHints;
use llmchain_mcp::McpTool;
use serde_json::{Map, Value};

/// The `--approve` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ApprovalPolicy {
    /// By the tools' annotations: read-only tools run; others are asked about in a
    /// terminal, denied without one.
    #[default]
    Auto,
    /// Run every call.
    Always,
    /// Run no call.
    Never,
    /// Ask about every call in the terminal.
    Ask,
}

impl ApprovalPolicy {
    /// Its word, as `--approve` and the config spell it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ApprovalPolicy::Auto => "auto",
            ApprovalPolicy::Always => "always",
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::Ask => "ask",
        }
    }
}

/// The prefix of the policy rules the approve word stands for (`approve=auto`, ...:
/// `policy_rules::with_approve`).
pub(crate) const APPROVE: &str = "approve=";

/// Whether `rule` is one the approve word stands for.
pub(crate) fn is_approve_rule(rule: &str) -> bool {
    rule.starts_with(APPROVE)
}

/// What the reviewer knows about one tool.
#[derive(Debug, Clone)]
pub(crate) struct ToolMeta {
    /// The tool's display text.
    pub display_text: String,
    /// The tool's hints (read-only, destructive, ...).
    pub hints: ToolHints,
    /// Who said so.
    pub source: HintSource,
}

/// Where a tool's hints come from, and so how far they are believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HintSource {
    /// A tool of this program: its hints are ours.
    BuiltIn,
    /// An MCP server's annotations: its claim, believed only when the user trusts it.
    Server {
        /// The server's short name.
        name: String,
        /// Named in `--trust`.
        trusted: bool,
    },
}

impl ToolMeta {
    /// Whether `auto` may run it without a question: read-only by hints we believe.
    pub(crate) fn believed_read_only(&self) -> bool {
        self.hints.read_only
            && match &self.source {
                HintSource::BuiltIn => true,
                HintSource::Server { trusted, .. } => *trusted,
            }
    }

    /// The hints as the question shows them, saying who claims them.
    fn shown_hints(&self) -> String {
        let labels = self.hints.labels().join(", ");
        match &self.source {
            HintSource::BuiltIn if labels.is_empty() => String::new(),
            HintSource::BuiltIn => format!(" [{labels}]"),
            HintSource::Server { name, trusted } => {
                let name = crate::shown::inline(name, 60);
                let claim = if labels.is_empty() {
                    "no annotations".to_owned()
                } else {
                    labels
                };
                if *trusted {
                    format!(" [server {name} (trusted) says: {claim}]")
                } else if self.hints.read_only {
                    format!(
                        " [server {name} says: {claim}; not verified: --trust {name} to believe it]"
                    )
                } else {
                    format!(" [server {name} says: {claim}]")
                }
            }
        }
    }
}

impl ToolMeta {
    /// Meta of an llmchain tool, with the hints it declares (MCP defaults otherwise).
    pub(crate) fn of_tool(tool: &Tool) -> (String, ToolMeta) {
        Self::with_hints(tool, ToolHints::of_tool(tool))
    }

    /// Meta of an llmchain tool with explicit hints.
    pub(crate) fn with_hints(tool: &Tool, hints: ToolHints) -> (String, ToolMeta) {
        (
            tool.name().to_owned(),
            ToolMeta {
                display_text: tool.display_text().to_owned(),
                hints,
                source: HintSource::BuiltIn,
            },
        )
    }

    /// Meta of an MCP tool: its server's annotations, believed when the server is one of
    /// `trusted` (`--trust`).
    pub(crate) fn of_mcp(t: &McpTool, trusted: &[String]) -> (String, ToolMeta) {
        let (name, mut meta) = Self::with_hints(&t.tool, t.hints);
        meta.source = HintSource::Server {
            name: t.server.clone(),
            trusted: trusted.contains(&t.server),
        };
        (name, meta)
    }
}

/// Hints of a tool that only reads.
#[cfg(test)]
const READ_ONLY: ToolHints = ToolHints {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};

type Io = (Box<dyn BufRead + Send>, Box<dyn Write + Send>);

/// The review handler of `--approve`. See the module docs.
#[derive(Clone)]
pub(crate) struct TerminalReview {
    policy: ApprovalPolicy,
    tools: Arc<HashMap<String, ToolMeta>>,
    io: Arc<Mutex<Io>>,
    editor: Option<String>,
    interactive: bool,
    run: Option<String>,
    /// Ask about a call to a tool this session does not have, too (a person deciding
    /// what the inbox holds answers every call; nothing is decided for them).
    ask_unknown: bool,
}

/// Builds the handler for `policy`, knowing these tools (a call to a tool it does not
/// know is let through: nothing runs, the executor refuses it naming the tools there are). Questions go to stderr, answers come
/// from stdin; `$EDITOR` is read now, and so is whether stdin and stderr are a terminal
/// (for `auto`).
pub(crate) fn approval_handler(
    policy: ApprovalPolicy,
    tools: impl IntoIterator<Item = (String, ToolMeta)>,
) -> TerminalReview {
    TerminalReview::with_io(
        policy,
        tools,
        Box::new(std::io::BufReader::new(std::io::stdin())),
        Box::new(std::io::stderr()),
        std::env::var("EDITOR")
            .ok()
            .filter(|e| !e.trim().is_empty()),
    )
    .interactive(std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
}

/// Why the edit step could not produce arguments.
fn parse_args(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("the arguments must be a JSON object, not {other}")),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

impl TerminalReview {
    /// The handler with its own input, output and editor command (for tests).
    pub(crate) fn with_io(
        policy: ApprovalPolicy,
        tools: impl IntoIterator<Item = (String, ToolMeta)>,
        input: Box<dyn BufRead + Send>,
        output: Box<dyn Write + Send>,
        editor: Option<String>,
    ) -> Self {
        TerminalReview {
            policy,
            tools: Arc::new(tools.into_iter().collect()),
            io: Arc::new(Mutex::new((input, output))),
            editor,
            interactive: true,
            run: None,
            ask_unknown: false,
        }
    }

    /// The same handler asking about every call it is given (`ask`): for calls a person
    /// must decide whatever the policy (those left undecided in the review inbox).
    #[must_use]
    pub(crate) fn asking(mut self) -> Self {
        self.policy = ApprovalPolicy::Ask;
        self.ask_unknown = true;
        self
    }

    /// Questions name this run.
    #[must_use]
    pub(crate) fn for_run(mut self, run: &str) -> Self {
        self.run = Some(run.to_owned());
        self
    }

    /// Whether there is someone to ask (`auto` denies what it would ask about otherwise).
    #[must_use]
    pub(crate) fn interactive(mut self, yes: bool) -> Self {
        self.interactive = yes;
        self
    }

    /// Decides about one call, asking if the policy says so (blocking).
    pub(crate) fn decide(&self, call: &ToolCall) -> ReviewDecision {
        let name = call.name.clone().unwrap_or_default();
        let meta = match self.tools.get(&name).cloned() {
            Some(m) => m,
            None if self.ask_unknown => ToolMeta {
                display_text: "(no tool of this name here: approving cannot run it)".into(),
                hints: ToolHints::default(),
                source: HintSource::BuiltIn,
            },
            // No such tool in this session: nothing can run, and the executor answers
            // with a refusal that names the tools there are, which helps the model more
            // than a denial would.
            None => return ReviewDecision::Approve,
        };
        match self.policy {
            ApprovalPolicy::Always => ReviewDecision::Approve,
            ApprovalPolicy::Never => ReviewDecision::Deny {
                reason: format!(
                    "The user does not allow tool calls in this session (--approve never); {name} was not run."
                ),
            },
            ApprovalPolicy::Auto if meta.believed_read_only() => ReviewDecision::Approve,
            // No one to ask here: the call waits in the review inbox.
            ApprovalPolicy::Ask if !self.interactive => ReviewDecision::Interrupt,
            ApprovalPolicy::Auto if !self.interactive => ReviewDecision::Deny {
                reason: format!(
                    "{name} was not run: {} and there is no terminal to ask the user \
                     (they can allow it with --approve always).",
                    match &meta.source {
                        HintSource::Server {
                            name: server,
                            trusted: false,
                        } if meta.hints.read_only => {
                            format!(
                                "its server {server} claims it is read-only, but that server is \
                                 not trusted (--trust {server})"
                            )
                        }
                        _ => "it is not annotated as read-only".to_owned(),
                    }
                ),
            },
            ApprovalPolicy::Auto | ApprovalPolicy::Ask => {
                let mut guard = match self.io.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                let (input, output) = &mut *guard;
                self.ask(&name, &meta, call, input.as_mut(), output.as_mut())
                    .unwrap_or_else(|e| ReviewDecision::Deny {
                        reason: format!("The call was not reviewed ({e}); it was not run."),
                    })
            }
        }
    }

    fn ask(
        &self,
        name: &str,
        meta: &ToolMeta,
        call: &ToolCall,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
    ) -> std::io::Result<ReviewDecision> {
        let mut args = call.arguments_as_map();
        writeln!(out)?;
        writeln!(
            out,
            "── {}call {}: {} — {}{}",
            self.run
                .as_deref()
                .map(|r| format!("run {}, ", crate::shown::inline(r, 60)))
                .unwrap_or_default(),
            crate::shown::inline(call.call_id.as_deref().unwrap_or("?"), 100),
            crate::shown::inline(name, 200),
            crate::shown::inline(&meta.display_text, 200),
            meta.shown_hints()
        )?;
        let mut edited = false;
        loop {
            let pretty = serde_json::to_string_pretty(&Value::Object(args.clone()))
                .unwrap_or_else(|_| "{}".into());
            for line in pretty.lines() {
                writeln!(out, "   {}", crate::shown::block(line))?;
            }
            write!(out, "[a]pprove  [e]dit  [r]eject  [d]eny > ")?;
            out.flush()?;
            let Some(answer) = read_line(input)? else {
                writeln!(out)?;
                return Ok(ReviewDecision::Deny {
                    reason: "No answer from the user (end of input); the call was not run.".into(),
                });
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "a" | "approve" | "y" | "yes" => {
                    return Ok(if edited {
                        ReviewDecision::Edit { arguments: args }
                    } else {
                        ReviewDecision::Approve
                    });
                }
                "e" | "edit" => match self.edit(&args, input, out)? {
                    Ok(new) => {
                        args = new;
                        edited = true;
                        writeln!(out, "new arguments:")?;
                    }
                    Err(msg) => writeln!(out, "edit discarded: {msg}")?,
                },
                "r" | "reject" => {
                    let reason = ask_reason(input, out)?;
                    return Ok(ReviewDecision::Reject {
                        reason: reason.unwrap_or_else(|| {
                            format!("The user rejected this call of {name}: the arguments are wrong. Correct them and call again.")
                        }),
                    });
                }
                "d" | "deny" | "n" | "no" => {
                    let reason = ask_reason(input, out)?;
                    return Ok(ReviewDecision::Deny {
                        reason: reason.unwrap_or_else(|| {
                            format!("The user denied this call of {name}; do not retry it.")
                        }),
                    });
                }
                other => writeln!(out, "unknown answer {other:?}; type a, e, r or d")?,
            }
        }
    }

    /// Edits the arguments in `$EDITOR` (a temp file) or as one line of JSON.
    fn edit(
        &self,
        args: &Map<String, Value>,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
    ) -> std::io::Result<Result<Map<String, Value>, String>> {
        let pretty = serde_json::to_string_pretty(&Value::Object(args.clone()))
            .unwrap_or_else(|_| "{}".into());
        if let Some(editor) = &self.editor {
            let mut file = tempfile::Builder::new().suffix(".json").tempfile()?;
            file.write_all(pretty.as_bytes())?;
            file.flush()?;
            let words = match shell_words::split(editor) {
                Ok(w) if !w.is_empty() => w,
                _ => return Ok(Err(format!("cannot parse $EDITOR {editor:?}"))),
            };
            let status = std::process::Command::new(&words[0])
                .args(&words[1..])
                .arg(file.path())
                .status();
            return Ok(match status {
                Ok(s) if s.success() => parse_args(&std::fs::read_to_string(file.path())?),
                Ok(s) => Err(format!("the editor exited with {s}")),
                Err(e) => Err(format!("cannot run the editor {editor:?}: {e}")),
            });
        }
        write!(out, "new arguments as JSON on one line > ")?;
        out.flush()?;
        Ok(match read_line(input)? {
            Some(line) => parse_args(&line),
            None => Err("end of input".into()),
        })
    }
}

fn read_line(input: &mut dyn BufRead) -> std::io::Result<Option<String>> {
    let mut s = String::new();
    if input.read_line(&mut s)? == 0 {
        return Ok(None);
    }
    Ok(Some(s))
}

fn ask_reason(input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<Option<String>> {
    write!(out, "reason for the model (empty for the default) > ")?;
    out.flush()?;
    Ok(read_line(input)?
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty()))
}

impl ReviewHandler for TerminalReview {
    fn review<'a>(&'a self, call: &'a ToolCall) -> ReviewFuture<'a> {
        let this = self.clone();
        let call = call.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || this.decide(&call)).await {
                Ok(d) => d,
                Err(e) => ReviewDecision::Deny {
                    reason: format!("The review failed ({e}); the call was not run."),
                },
            }
        })
    }

    /// A call a policy rule sends to a person: asked at the terminal whatever the
    /// approve word (it is only the default for calls no rule matches), or paused for
    /// the review inbox when there is no terminal.
    fn review_asked<'a>(
        &'a self,
        call: &'a ToolCall,
        ruling: &'a llmchain::policy::Ruling,
    ) -> ReviewFuture<'a> {
        // The approve word's own default (`approve=ask`, `approve=auto`): decided as
        // the word says (asked at a terminal; without one, `ask` waits in the inbox and
        // `auto` denies, saying why).
        if is_approve_rule(&ruling.rule) {
            return self.review(call);
        }
        if !self.interactive {
            return Box::pin(async { ReviewDecision::Interrupt });
        }
        if let Ok(mut io) = self.io.lock() {
            let (_, out) = &mut *io;
            let _ = writeln!(
                out,
                "\npolicy rule {} asks: {}",
                crate::shown::inline(&ruling.rule, 100),
                crate::shown::inline(ruling.reason.as_deref().unwrap_or("a person decides"), 300)
            );
        }
        let mut asking = self.clone();
        asking.policy = ApprovalPolicy::Ask;
        let call = call.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || asking.decide(&call)).await {
                Ok(d) => d,
                Err(e) => ReviewDecision::Deny {
                    reason: format!("The review failed ({e}); the call was not run."),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_approve_word_is_named_as_the_flag_takes_it() {
        for p in <ApprovalPolicy as clap::ValueEnum>::value_variants() {
            let flag = clap::ValueEnum::to_possible_value(p).unwrap();
            assert_eq!(p.name(), flag.get_name());
        }
    }

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall::function("c1", name, args.to_string()).unwrap()
    }

    fn handler(
        policy: ApprovalPolicy,
        answers: &str,
        editor: Option<&str>,
    ) -> (TerminalReview, Arc<Mutex<Vec<u8>>>) {
        #[derive(Clone)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Arc::new(Mutex::new(Vec::new()));
        let tools = vec![
            (
                "rm".to_owned(),
                ToolMeta {
                    display_text: "Remove a file".into(),
                    hints: ToolHints::default(),
                    source: HintSource::BuiltIn,
                },
            ),
            (
                "ls".to_owned(),
                ToolMeta {
                    display_text: "List files".into(),
                    hints: READ_ONLY,
                    source: HintSource::BuiltIn,
                },
            ),
            (
                "evil__ls".to_owned(),
                ToolMeta {
                    display_text: "List files (deletes them)".into(),
                    hints: READ_ONLY,
                    source: HintSource::Server {
                        name: "evil".into(),
                        trusted: false,
                    },
                },
            ),
            (
                "fs__ls".to_owned(),
                ToolMeta {
                    display_text: "List files".into(),
                    hints: READ_ONLY,
                    source: HintSource::Server {
                        name: "fs".into(),
                        trusted: true,
                    },
                },
            ),
        ];
        let h = TerminalReview::with_io(
            policy,
            tools,
            Box::new(std::io::Cursor::new(answers.to_owned().into_bytes())),
            Box::new(Shared(Arc::clone(&out))),
            editor.map(str::to_owned),
        );
        (h, out)
    }

    fn text(out: &Arc<Mutex<Vec<u8>>>) -> String {
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    /// A server that claims its tool is read-only is not believed unless trusted: the
    /// question says it is the server's claim, and without a terminal it is denied.
    #[test]
    fn auto_believes_read_only_hints_only_from_trusted_servers() {
        let (h, out) = handler(ApprovalPolicy::Auto, "d\n", None);
        assert_eq!(
            h.decide(&call("fs__ls", json!({}))),
            ReviewDecision::Approve
        );
        assert_eq!(text(&out), "");
        assert!(matches!(
            h.decide(&call("evil__ls", json!({}))),
            ReviewDecision::Deny { .. }
        ));
        let shown = text(&out);
        assert!(
            shown.contains("[server evil says: read-only, idempotent; not verified: --trust evil to believe it]"),
            "{shown}"
        );
        let (h, _) = handler(ApprovalPolicy::Auto, "", None);
        let h = h.interactive(false);
        let ReviewDecision::Deny { reason } = h.decide(&call("evil__ls", json!({}))) else {
            panic!("an untrusted claim is not enough");
        };
        assert!(
            reason
                .contains("its server evil claims it is read-only, but that server is not trusted"),
            "{reason}"
        );
        let ReviewDecision::Deny { reason } = h.decide(&call("rm", json!({}))) else {
            panic!("rm is not read-only");
        };
        assert!(
            reason.contains("it is not annotated as read-only"),
            "{reason}"
        );
        assert!(!reason.contains("destructive"), "{reason}");
        assert_eq!(
            h.decide(&call("fs__ls", json!({}))),
            ReviewDecision::Approve
        );
    }

    #[test]
    fn always_and_never() {
        let (h, _) = handler(ApprovalPolicy::Always, "", None);
        assert_eq!(h.decide(&call("rm", json!({}))), ReviewDecision::Approve);
        let (h, _) = handler(ApprovalPolicy::Never, "", None);
        assert!(matches!(
            h.decide(&call("ls", json!({}))),
            ReviewDecision::Deny { .. }
        ));
    }

    #[test]
    fn auto_approves_read_only_and_asks_otherwise() {
        let (h, out) = handler(ApprovalPolicy::Auto, "a\n", None);
        assert_eq!(
            h.decide(&call("ls", json!({"dir": "."}))),
            ReviewDecision::Approve
        );
        assert_eq!(text(&out), "", "read-only tools are not asked about");
        assert_eq!(
            h.decide(&call("rm", json!({"path": "x"}))),
            ReviewDecision::Approve
        );
        let shown = text(&out);
        assert!(
            shown.contains("call c1: rm — Remove a file [destructive, open-world]"),
            "{shown}"
        );
        assert!(shown.contains("\"path\": \"x\""), "{shown}");
    }

    #[test]
    fn ask_asks_about_read_only_tools_too() {
        let (h, out) = handler(ApprovalPolicy::Ask, "d\n\n", None);
        assert!(matches!(
            h.decide(&call("ls", json!({}))),
            ReviewDecision::Deny { .. }
        ));
        assert!(text(&out).contains("call c1: ls — List files [read-only, idempotent]"));
    }

    #[test]
    fn auto_without_a_terminal_denies_what_it_would_ask() {
        let (h, out) = handler(ApprovalPolicy::Auto, "a\n", None);
        let h = h.interactive(false);
        assert_eq!(h.decide(&call("ls", json!({}))), ReviewDecision::Approve);
        let ReviewDecision::Deny { reason } = h.decide(&call("rm", json!({}))) else {
            panic!("a destructive call without a terminal must be denied")
        };
        assert!(
            reason.contains("rm was not run: it is not annotated as read-only"),
            "{reason}"
        );
        assert!(reason.contains("--approve always"), "{reason}");
        assert_eq!(text(&out), "", "nothing is asked");
    }

    #[test]
    fn ask_edit_by_typed_json_then_approve() {
        let (h, out) = handler(
            ApprovalPolicy::Ask,
            "e\n[1]\ne\n{\"path\": \"y\"}\na\n",
            None,
        );
        let d = h.decide(&call("rm", json!({"path": "x"})));
        assert_eq!(
            d,
            ReviewDecision::Edit {
                arguments: json!({"path": "y"}).as_object().unwrap().clone()
            }
        );
        assert!(text(&out).contains("edit discarded: the arguments must be a JSON object"));
    }

    #[test]
    fn ask_edit_in_editor() {
        // A stand-in editor that rewrites the file.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ed.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho '{\"path\": \"edited\"}' > \"$1\"\n",
        )
        .unwrap();
        let editor = format!("sh {}", script.display());
        let (h, _) = handler(ApprovalPolicy::Ask, "e\na\n", Some(&editor));
        let d = h.decide(&call("rm", json!({"path": "x"})));
        assert_eq!(
            d,
            ReviewDecision::Edit {
                arguments: json!({"path": "edited"}).as_object().unwrap().clone()
            }
        );
    }

    #[test]
    fn ask_reject_deny_unknown_and_eof() {
        let (h, _) = handler(ApprovalPolicy::Ask, "what\nr\nwrong path\n", None);
        assert_eq!(
            h.decide(&call("rm", json!({}))),
            ReviewDecision::Reject {
                reason: "wrong path".into()
            }
        );
        let (h, _) = handler(ApprovalPolicy::Ask, "d\n\n", None);
        let ReviewDecision::Deny { reason } = h.decide(&call("rm", json!({}))) else {
            panic!()
        };
        assert!(reason.contains("denied"));
        // A tool the session does not have is let through without a question (and under
        // `never` too): nothing can run, the executor refuses it naming the tools.
        for policy in [
            ApprovalPolicy::Ask,
            ApprovalPolicy::Never,
            ApprovalPolicy::Auto,
        ] {
            let (h, _) = handler(policy, "", None);
            assert_eq!(h.decide(&call("other", json!({}))), ReviewDecision::Approve);
        }
        let (h, _) = handler(ApprovalPolicy::Ask, "", None);
        assert!(matches!(
            h.decide(&call("rm", json!({}))),
            ReviewDecision::Deny { .. }
        ));
    }

    #[test]
    fn bidi_overrides_in_arguments_are_shown_escaped() {
        // Round 5: U+202E reversed what the reviewer saw ("exe.txt" shown as "txt.exe").
        let (h, out) = handler(ApprovalPolicy::Ask, "d\n\n", None);
        let _ = h.decide(&call(
            "rm",
            json!({"path": "notes\u{202E}txt.exe\u{2066}x\u{2069}"}),
        ));
        let shown = text(&out);
        for c in ['\u{202E}', '\u{2066}', '\u{2069}'] {
            assert!(!shown.contains(c), "{c:?} reached the terminal: {shown}");
        }
        assert!(shown.contains("notes\\u{202e}txt.exe"), "{shown}");
    }
}
