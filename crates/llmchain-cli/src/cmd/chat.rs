//! `llmchain chat`: an interactive loop over one conversation.
//!
//! Each line typed is the conversation's next user message, answered as `llmchain run
//! --conversation ID` answers it (streamed text, tools, review questions, the
//! conversation stored as it goes). Ctrl-C while an answer streams cancels that answer
//! (what arrived is kept, marked cancelled) and the session goes on; Ctrl-C at the
//! prompt clears the line; Ctrl-D or `/exit` ends the session. Line editing and history
//! (kept beside the default database, `chat_history`) are `rustyline`'s.

use std::io::IsTerminal;

use llmchain::message::Role;
use llmchain_store::{NewConversation, Store};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use crate::cmd::run::RunArgs;
use crate::error::{CliError, CliResult, Exit};
use crate::store_access::{open_store, redact_url, resolve_id};

/// Arguments of `llmchain chat`: those of `run` (`--provider`, `--model`, `-s`, `-o`,
/// `--mcp`, `--approve`, `-c`...); a prompt given is the first question.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("json", |a| a.hide(true)),
    mut_arg("enqueue", |a| a.hide(true)),
    mut_arg("max_attempts", |a| a.hide(true)),
    mut_arg("priority", |a| a.hide(true)),
    mut_arg("prompt", |a| a.help("The first question (then the session goes on)")),
    after_help = "In the session: a line is a question. /help lists the commands: /new, /id, \
                  /model NAME, /tools, /usage, /exit (or Ctrl-D). Ctrl-C cancels the answer \
                  being written (it is kept, marked cancelled) or clears the line."
)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    run: RunArgs,
}

/// What the session says at `/help`.
const HELP: &str = "a line is a question (its answer streams here). Commands:
  /new          start a new conversation
  /id           the conversation's id (for `llmchain run -c`, `conversations show`)
  /model NAME   answer with model NAME from now on (/model alone: the model in use)
  /tools        the tools the answers may call
  /usage        the tokens this conversation used
  /exit         end the session (or Ctrl-D)
Ctrl-C cancels the answer being written (it is kept, marked cancelled) or clears the line.";

/// Runs `llmchain chat`.
pub(crate) fn run(args: ChatArgs) -> CliResult {
    let mut base = args.run;
    if base.json || base.enqueue || base.schema.is_some() {
        return Err(CliError::usage(
            "chat answers here, as text: use `llmchain run` for --json, --schema or --enqueue",
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "llmchain chat needs a terminal; for questions from a pipe use `llmchain run`",
        ));
    }
    let mut session = Session::open(&base)?;
    let mut editor = DefaultEditor::new().map_err(|e| CliError::io("cannot edit lines", e))?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!(
        "{} (/help for help, Ctrl-D to quit)",
        match &session.id {
            Some(id) => format!("conversation {id}"),
            None => "a new conversation".to_owned(),
        }
    );
    let mut first = base.prompt.clone();
    // A question that could not be stored, back at the prompt to send again.
    let mut unsent: Option<String> = None;
    loop {
        let line = match first.take() {
            Some(p) => p,
            None => match match unsent.take() {
                Some(text) => editor.readline_with_initial("› ", (&text, "")),
                None => editor.readline("› "),
            } {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(CliError::io("cannot read a line", e)),
            },
        };
        let question = line.trim();
        if question.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(question);
        if let Some(command) = question.strip_prefix('/') {
            match session.command(&mut base, command) {
                Ok(Next::Exit) => break,
                Ok(Next::Ask) => {}
                Err(e) => eprintln!("llmchain: {}", crate::shown::block(&e.report())),
            }
            continue;
        }
        let result = session.turn(&base, question);
        // Attachments go with the first question only.
        base.attachments.clear();
        match result {
            Ok(()) => {}
            // The answer was cancelled and is stored: the session goes on.
            Err(e) if e.exit() == Exit::Interrupted => eprintln!("(answer cancelled)"),
            Err(e) => {
                eprintln!("llmchain: {}", crate::shown::block(&e.to_string()));
                // A question the store did not take (a database held by another
                // process, a busy machine) is never lost: it is back at the prompt.
                if !session.holds(&base, question) {
                    eprintln!(
                        "your question was not saved; it is back at the prompt: press Enter \
                         to send it again"
                    );
                    unsent = Some(question.to_owned());
                }
            }
        }
    }
    if let Some(id) = &session.id {
        // As `run` names it: a password in the URL is not shown.
        let db_flag = base
            .db
            .as_deref()
            .map(|db| format!(" --db {}", crate::shown::inline(&redact_url(db), 200)))
            .unwrap_or_default();
        eprintln!(
            "conversation {id} saved (go on with `llmchain chat{db_flag} --conversation {id}`)"
        );
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(h);
    }
    Ok(())
}

/// The conversation of the session, once there is one.
struct Session {
    id: Option<String>,
}

/// What the session does after a command.
enum Next {
    Ask,
    Exit,
}

impl Session {
    /// Runs `/command` (without its slash).
    fn command(&mut self, base: &mut RunArgs, command: &str) -> Result<Next, CliError> {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, a)| (n, a.trim()));
        match name {
            "exit" | "quit" => return Ok(Next::Exit),
            "help" => eprintln!("{HELP}"),
            "new" => {
                self.id = None;
                eprintln!("a new conversation");
            }
            "id" => match &self.id {
                Some(id) => eprintln!("conversation {id}"),
                None => eprintln!("no conversation yet: the first question starts one"),
            },
            "model" if arg.is_empty() => match &base.model {
                Some(m) => eprintln!("model: {}", crate::shown::inline(m, 200)),
                None => eprintln!(
                    "model: the conversation's, else the profile's or the provider's default \
                     (/model NAME to choose)"
                ),
            },
            "model" => {
                base.model = Some(arg.to_owned());
                eprintln!(
                    "model: {} for the next answers",
                    crate::shown::inline(arg, 200)
                );
            }
            "tools" => eprintln!("{}", tools_of(base)),
            "usage" => match &self.id {
                None => eprintln!("no conversation yet"),
                Some(id) => {
                    let messages = block_on(async {
                        let (store, _) = open_store(base.db.clone()).await?;
                        let stored = store.get_conversation(id).await.map_err(CliError::store)?;
                        Ok(stored.map(|s| s.conversation.messages).unwrap_or_default())
                    })?;
                    let calls = messages
                        .iter()
                        .filter(|m| m.role == Role::Assistant)
                        .count();
                    eprintln!(
                        "usage: {} in {calls} model call(s)",
                        crate::usage::summary(&crate::usage::total(&messages))
                    );
                }
            },
            _ => eprintln!(
                "unknown command /{}: /help lists them",
                crate::shown::inline(name, 100)
            ),
        }
        Ok(Next::Ask)
    }

    /// The conversation `-c` or `--conversation` names, or none yet.
    fn open(args: &RunArgs) -> Result<Session, CliError> {
        if !args.continue_latest && args.conversation.is_none() {
            return Ok(Session { id: None });
        }
        block_on(async {
            let (store, _) = open_store(args.db.clone()).await?;
            let id = resolve_id(&store, args.conversation.as_deref().unwrap_or("")).await?;
            // The last exchange, to say where the conversation stands.
            if let Some(stored) = store.get_conversation(&id).await.map_err(CliError::store)? {
                let last = |role: Role| {
                    stored
                        .conversation
                        .messages
                        .iter()
                        .rev()
                        .find(|m| m.role == role)
                        .and_then(|m| m.text())
                };
                // As typed: a question of several lines is shown on several lines.
                if let Some(q) = last(Role::User) {
                    eprintln!("› {}", crate::shown::block(&q));
                }
                if let Some(a) = last(Role::Assistant) {
                    eprintln!("{}", crate::shown::block(&a));
                }
            }
            Ok(Session { id: Some(id) })
        })
    }

    /// Whether the conversation holds `question` as its latest question (false when it
    /// cannot be read: then it is safer to offer it again).
    fn holds(&self, base: &RunArgs, question: &str) -> bool {
        let Some(id) = &self.id else {
            return false;
        };
        block_on(async {
            let (store, _) = open_store(base.db.clone()).await?;
            let stored = store.get_conversation(id).await.map_err(CliError::store)?;
            Ok(stored.is_some_and(|c| {
                c.conversation
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == llmchain::message::Role::User)
                    .and_then(|m| m.text())
                    .is_some_and(|t| t.trim() == question.trim())
            }))
        })
        .unwrap_or(false)
    }

    /// Asks `question` in the conversation (created with it as its title first).
    fn turn(&mut self, base: &RunArgs, question: &str) -> CliResult {
        let id = match &self.id {
            Some(id) => id.clone(),
            None => {
                let id = block_on(async {
                    let (store, _) = open_store(base.db.clone()).await?;
                    let mut conversation = llmchain::conversation::Conversation::new();
                    conversation.system = base.system.clone();
                    store
                        .create_conversation(
                            NewConversation::from_conversation(conversation).titled_by(question),
                        )
                        .await
                        .map_err(CliError::store)
                })?;
                self.id = Some(id.clone());
                id
            }
        };
        crate::cmd::run::run(RunArgs {
            prompt: Some(question.to_owned()),
            conversation: Some(id),
            continue_latest: false,
            in_chat: true,
            ..base.clone()
        })
    }
}

/// Runs `f` on a runtime of its own (each turn's `run` makes its own).
fn block_on<T>(f: impl std::future::Future<Output = Result<T, CliError>>) -> Result<T, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?
        .block_on(f)
}

/// `chat_history` beside the default database.
fn history_path() -> Option<std::path::PathBuf> {
    llmchain_store::default_sqlite_path()
        .ok()?
        .parent()
        .map(|d| d.join("chat_history"))
}

/// What `/tools` says: the built-in tools the flags leave, and the MCP servers whose
/// tools come with them.
fn tools_of(args: &RunArgs) -> String {
    let builtins: Vec<&str> = if args.no_builtin_tools {
        Vec::new()
    } else {
        crate::tools::BUILTIN_NAMES
            .iter()
            .copied()
            .filter(|n| args.tools.is_empty() || args.tools.iter().any(|c| c == n))
            .collect()
    };
    let mut out = if builtins.is_empty() {
        "built-in tools: none".to_owned()
    } else {
        format!("built-in tools: {}", builtins.join(", "))
    };
    let servers: Vec<String> = args
        .servers
        .mcp
        .iter()
        .chain(&args.servers.mcp_http)
        .map(|s| crate::shown::inline(&llmchain::redact::urls_in(s), 200))
        .collect();
    if !servers.is_empty() {
        out.push_str(&format!(
            "\nMCP servers (their tools too): {}",
            servers.join(", ")
        ));
    }
    out.push_str("\n(and the MCP servers of the profile, if it names any)");
    out
}
