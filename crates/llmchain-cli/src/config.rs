//! The config file: the operator's **profiles**, the one authority for what a run may
//! execute (provider, model, base URL, MCP servers, trust, approve policy, tools, root).
//! It is `$LLMCHAIN_CONFIG`, else `$XDG_CONFIG_HOME/llmchain/config.toml` (else
//! `~/.config/llmchain/config.toml`); `llmchain config path` prints where, and
//! `llmchain config profiles` what it defines.
//!
//! ```toml
//! # The top-level keys are the profile "default".
//! provider = "anthropic"
//! model = "claude-sonnet-4-5"
//! approve = "ask"
//! mcp = ["npx -y @modelcontextprotocol/server-filesystem /home/me/notes"]
//! trust = ["server-filesystem"]
//!
//! # More profiles, by name (`llmchain run --profile notes`, `--enqueue --profile notes`).
//! [profiles.notes]
//! provider = "openai"
//! base_url = "http://127.0.0.1:8080/v1"
//! mcp = ["npx -y @modelcontextprotocol/server-filesystem /srv/notes"]
//! approve = "ask"
//! tools = ["write_file", "read_text_file"]
//! root = "/srv/notes"
//! # Requests are compacted to fit the model's context window (by default its size in
//! # the built-in table; 0: never): old tool results cleared, then the oldest turns left
//! # out of the request. The stored conversation keeps everything.
//! context_window = 128000
//!
//! # Rules every call of a profile passes: deny > ask > allow; a call no rule matches
//! # is decided by `approve`. `llmchain policy check` runs the examples,
//! # `llmchain policy explain TOOL ARGS_JSON` says which rule fires.
//! [[profiles.notes.policy]]
//! id = "no-etc"
//! tool = "mcp:server-filesystem/*"
//! args = { "/path" = { glob = "/etc/**" } }
//! effect = "deny"
//! reason = "Nothing under /etc."
//! examples = { match = [{ path = "/etc/passwd" }], not_match = [{ path = "/srv/notes/a" }] }
//!
//! # What one run of a profile may spend (`--budget KEY=VALUE` tightens it).
//! [profiles.notes.budget]
//! model_calls = 40
//! tool_calls = 100
//! tokens = 200000
//! cost_usd = 0.50            # needs the model's price: built in, or [..budget.prices]
//! wall_seconds = 600         # the run's total time
//! step_seconds = 120         # one model call
//! first_chunk_seconds = 30   # until a model call's first chunk
//! idle_seconds = 20          # between two chunks
//! tool_seconds = 60          # a tool call, unless the tool sets its own
//! on_exhausted = "stop"      # stop | final_answer | error
//!
//! # Prices in dollars per million tokens, over the built-in table.
//! [profiles.notes.budget.prices."gpt-4.1-mini"]
//! input = 0.40
//! output = 1.60
//! cached_input = 0.10
//!
//! # Guards, in the order written (`llmchain::guard`): on a person's messages, the
//! # model's answer (held back while it streams), calls' arguments (before review)
//! # and tools' results. Verdicts are on record in `runs show`, never the values.
//! [[profiles.notes.guard]]
//! id = "no-personal-data"
//! kind = "pii"               # pii | secrets | size | deny
//! on = ["user_message", "model_output", "tool_result"]   # default: every point
//! action = "rewrite"         # rewrite | block | tripwire
//! pii = ["email", "phone", "card", "iban"]               # default: every kind
//!
//! [[profiles.notes.guard]]
//! id = "no-drops"
//! kind = "deny"
//! patterns = ['(?i)drop\s+table']
//! words = ["internal-only"]
//! on = ["tool_arguments"]
//! action = "tripwire"        # the run stops
//!
//! # Short names for models (`--model fast`); a provider's name before the first `:`.
//! [aliases]
//! fast = "gpt-4.1-mini"
//! claude = "anthropic:claude-sonnet-4-5"
//! ```
//!
//! An interactive `run` takes its profile's settings, and its flags win over them. A
//! queued run names a profile and nothing else that could start a command or reach a
//! URL: the worker that claims it runs it with its own configuration's definition of
//! that profile. Keys are checked: a misspelt one is an error naming the file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The most a config file may hold.
const MAX_BYTES: u64 = 1 << 20;

/// The environment variable naming the config file.
pub(crate) const CONFIG_ENV: &str = "LLMCHAIN_CONFIG";

/// The profile of the top-level keys, and of runs that name none.
pub(crate) const DEFAULT_PROFILE: &str = "default";

/// What a run under a profile may do; unset fields take the defaults (`openai`, its
/// current model, `auto`, the built-in tools, the working directory).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Profile {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--approve`, by name.
    pub approve: Option<String>,
    /// `--mcp` server commands.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// `--mcp-http` URLs.
    #[serde(default)]
    pub mcp_http: Vec<String>,
    /// `--trust` server names.
    #[serde(default)]
    pub trust: Vec<String>,
    /// `--tools`: only these tools.
    #[serde(default)]
    pub tools: Vec<String>,
    /// `--no-builtin-tools`.
    #[serde(default)]
    pub no_builtin_tools: bool,
    /// `--root`: the directory `read_file` reads.
    pub root: Option<String>,
    /// `--mcp-prefix`.
    #[serde(default)]
    pub mcp_prefix: bool,
    /// `--mcp-start-timeout`, in seconds.
    pub mcp_start_timeout: Option<u64>,
    /// `--mcp-timeout`, in seconds.
    pub mcp_timeout: Option<u64>,
    /// `--schema`: a JSON Schema file; the profile's runs answer with an object matching
    /// it (a typed answer), in `run`, the worker and `serve` alike.
    pub schema: Option<String>,
    /// `[[policy]]`: rules every call passes (deny > ask > allow); a call no rule
    /// matches is decided by `approve`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<llmchain::policy::RuleSpec>,
    /// `policy_mode = "shadow"`: every rule only observed (journaled as what would have
    /// happened), none enforced; `"enforce"` (the default) enforces them.
    pub policy_mode: Option<String>,
    /// `[budget]`: how much one run may spend.
    pub budget: Option<llmchain::chain::Budget>,
    /// `[[guard]]`: checks on calls' arguments, tools' results and a person's messages
    /// (`llmchain::guard`), in the order written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<llmchain::guard::GuardSpec>,
    /// `context_window`: the tokens a request is compacted to fit (old results cleared,
    /// then the oldest turn groups left out of the request; the store keeps all);
    /// default the built-in table's for the model, `0` never.
    pub context_window: Option<u32>,
}

/// The profiles a config file defines (always one named `default`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    /// Where it was read from (`None`: there was no file).
    pub path: Option<PathBuf>,
    /// By name.
    pub profiles: BTreeMap<String, Profile>,
    /// `[aliases]`: short names for models, `NAME = "MODEL"` or `"PROVIDER:MODEL"`.
    pub aliases: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: None,
            profiles: BTreeMap::from([(DEFAULT_PROFILE.to_owned(), Profile::default())]),
            aliases: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The profile `name`, or an error listing the ones there are.
    pub(crate) fn profile(&self, name: &str) -> Result<&Profile, CliError> {
        self.profiles.get(name).ok_or_else(|| {
            CliError::usage(format!(
                "no profile {name:?} in {}; the profiles are: {}",
                self.path.as_ref().map_or_else(
                    || "the configuration (there is no config file)".to_owned(),
                    |p| p.display().to_string()
                ),
                self.names().join(", ")
            ))
        })
    }

    /// Every profile's `[budget]` tightened by `--budget KEY=VALUE` (the stricter
    /// limit wins where both set one): `worker` and `serve` apply theirs to every
    /// profile they run.
    pub(crate) fn tighten_budgets(&mut self, words: &[String]) -> Result<(), CliError> {
        let Some(given) = budget_flags(words)? else {
            return Ok(());
        };
        for p in self.profiles.values_mut() {
            p.budget = Some(p.budget.take().unwrap_or_default().tightened_by(&given));
        }
        Ok(())
    }

    /// The profile names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.profiles.keys().cloned().collect()
    }

    /// What the alias `name` stands for: a provider when it names one
    /// (`"anthropic:claude-haiku-4-5"`), and the model. A model id may hold `:`
    /// (`bedrock:anthropic.claude-3-5-haiku-20241022-v1:0`): only a known provider's
    /// name before the first one is taken as the provider.
    pub(crate) fn alias(&self, name: &str) -> Option<(Option<&'static str>, String)> {
        let target = self.aliases.get(name)?;
        Some(match target.split_once(':') {
            Some((p, model)) => match llmchain::http::provider(p) {
                Some(spec) => (Some(spec.name()), model.to_owned()),
                None => (None, target.clone()),
            },
            None => (None, target.clone()),
        })
    }
}

/// The limits of `--budget KEY=VALUE` words; `None` without any.
pub(crate) fn budget_flags(words: &[String]) -> Result<Option<llmchain::chain::Budget>, CliError> {
    if words.is_empty() {
        return Ok(None);
    }
    let mut given = llmchain::chain::Budget::default();
    for w in words {
        given
            .set(w)
            .map_err(|e| CliError::usage(format!("--budget {w}: {e}")))?;
    }
    Ok(Some(given))
}

/// Where the config file is (whether or not it exists).
pub(crate) fn path() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(dir()?.join("config.toml"))
}

/// llmchain's config directory: `$XDG_CONFIG_HOME/llmchain`, else `~/.config/llmchain`.
pub(crate) fn dir() -> Result<PathBuf, CliError> {
    let dir = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| {
            CliError::usage("cannot find the config directory: set XDG_CONFIG_HOME or HOME")
        })?;
    Ok(dir.join("llmchain"))
}

/// The config file's profiles: `file` when given (it must exist), else the standard
/// place (none there: the default profile only).
pub(crate) fn load_from(file: Option<&std::path::Path>) -> Result<Config, CliError> {
    let path = match file {
        Some(f) => f.to_path_buf(),
        None => match path() {
            Ok(p) => p,
            Err(_) => return Ok(Config::default()),
        },
    };
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && file.is_none() => {
            return Ok(Config::default());
        }
        Ok(m) if m.len() > MAX_BYTES => {
            return Err(CliError::usage(format!(
                "{} is larger than {} KiB; is it the right file?",
                path.display(),
                MAX_BYTES >> 10
            )));
        }
        _ => std::fs::read_to_string(&path)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?,
    };
    let mut config =
        parse(&text).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    config.path = Some(path);
    Ok(config)
}

/// The config file's profiles from the standard place.
pub(crate) fn load() -> Result<Config, CliError> {
    load_from(None)
}

fn parse(text: &str) -> Result<Config, String> {
    let one_line = |e: toml::de::Error| crate::shown::one_line(&e.to_string());
    let mut table: toml::Table = toml::from_str(text).map_err(one_line)?;
    let aliases: BTreeMap<String, String> = match table.remove("aliases") {
        None => BTreeMap::new(),
        Some(v) => v
            .try_into()
            .map_err(|e: toml::de::Error| format!("[aliases]: {}", one_line(e)))?,
    };
    let named = match table.remove("profiles") {
        None => toml::Table::new(),
        Some(toml::Value::Table(t)) => t,
        Some(_) => return Err("`profiles` must be a table: [profiles.NAME]".into()),
    };
    let default: Profile = toml::Value::Table(table.clone())
        .try_into()
        .map_err(one_line)?;
    let mut profiles = BTreeMap::new();
    for (name, value) in named {
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!(
                "profile name {name:?}: use letters, digits, - and _"
            ));
        }
        let profile: Profile = value
            .try_into()
            .map_err(|e: toml::de::Error| format!("[profiles.{name}]: {}", one_line(e)))?;
        profiles.insert(name, profile);
    }
    if profiles.contains_key(DEFAULT_PROFILE) && !table.is_empty() {
        return Err(
            "the profile \"default\" is defined twice: by the top-level keys and by [profiles.default]"
                .into(),
        );
    }
    profiles
        .entry(DEFAULT_PROFILE.to_owned())
        .or_insert(default);
    for (name, profile) in &profiles {
        crate::policy_rules::compile(&profile.policy, profile.policy_mode.as_deref()).map_err(
            |e| {
                let table = (name != DEFAULT_PROFILE).then_some(name.as_str());
                let line = crate::policy_rules::line_of(text, table, &e);
                format!(
                    "{}{}: {e}",
                    if name == DEFAULT_PROFILE {
                        String::new()
                    } else {
                        format!("[profiles.{name}] ")
                    },
                    line.map(|l| format!("line {l}"))
                        .unwrap_or_else(|| "[[policy]]".into())
                )
            },
        )?;
    }
    for (name, profile) in &profiles {
        for g in &profile.guard {
            g.build().map_err(|e| {
                let at = if name == DEFAULT_PROFILE {
                    String::new()
                } else {
                    format!("[profiles.{name}] ")
                };
                let line = guard_line(text, &g.id)
                    .map(|l| format!("line {l}"))
                    .unwrap_or_else(|| "[[guard]]".into());
                format!("{at}{line}: {e}")
            })?;
        }
    }
    Ok(Config {
        path: None,
        profiles,
        aliases,
    })
}

/// The line of the `id = "ID"` of a `[[guard]]` table, for an error about it.
fn guard_line(text: &str, id: &str) -> Option<usize> {
    let quoted = [format!("\"{id}\""), format!("'{id}'")];
    let mut in_guard = false;
    for (n, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.starts_with('[') {
            in_guard = l.starts_with("[[") && l.ends_with("guard]]");
        } else if in_guard
            && l.starts_with("id")
            && l[2..].trim_start().starts_with('=')
            && quoted.iter().any(|q| l.contains(q.as_str()))
        {
            return Some(n + 1);
        }
    }
    None
}

/// `llmchain config path | profiles`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Print where the config file is (or would be).
    Path,
    /// List the profiles the config file defines, with what each may execute (URLs
    /// without their credentials).
    Profiles,
}

/// Runs `llmchain config`.
pub(crate) fn run(args: ConfigArgs) -> crate::error::CliResult {
    match args.command {
        ConfigCommand::Path => {
            crate::stdout::outln!("{}", path()?.display());
            Ok(())
        }
        ConfigCommand::Profiles => {
            let config = load()?;
            for (name, p) in &config.profiles {
                let mut parts = vec![format!(
                    "provider {}",
                    p.provider.as_deref().unwrap_or("openai")
                )];
                if let Some(m) = &p.model {
                    parts.push(format!("model {m}"));
                }
                if let Some(u) = &p.base_url {
                    parts.push(format!("base URL {}", llmchain::redact::url(u)));
                }
                parts.push(format!(
                    "approve {}",
                    p.approve.as_deref().unwrap_or("auto")
                ));
                for m in &p.mcp {
                    parts.push(format!("mcp {m:?}"));
                }
                for u in &p.mcp_http {
                    parts.push(format!("mcp-http {}", llmchain::redact::url(u)));
                }
                if !p.trust.is_empty() {
                    parts.push(format!("trust {}", p.trust.join(",")));
                }
                if !p.tools.is_empty() {
                    parts.push(format!("tools {}", p.tools.join(",")));
                }
                if let Some(r) = &p.root {
                    parts.push(format!("root {r}"));
                }
                crate::stdout::outln!(
                    "{}: {}",
                    crate::shown::inline(name, 100),
                    crate::shown::inline(&parts.join("; "), 2000)
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example at the top of this file is a config the CLI loads as it is (its
    /// policies, budget and guards included), so the docs cannot rot.
    #[test]
    fn the_documented_example_loads() {
        let docs: String = include_str!("config.rs")
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| {
                l.strip_prefix("//! ")
                    .or_else(|| l.strip_prefix("//!"))
                    .unwrap_or(l)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let toml = docs
            .split("```toml\n")
            .nth(1)
            .and_then(|t| t.split("\n```").next())
            .expect("the docs hold a toml example");
        let config = parse(toml).unwrap();
        let notes = &config.profiles["notes"];
        assert_eq!(notes.guard.len(), 2);
        assert_eq!(notes.policy.len(), 1);
        assert!(notes.budget.is_some());
        assert_eq!(notes.context_window, Some(128_000));
    }

    #[test]
    fn a_config_parses_and_a_misspelt_key_is_named() {
        let c = parse(
            "provider = \"anthropic\"\nmodel = \"m\"\nmcp = [\"python3 s.py\"]\napprove = \"ask\"\n",
        )
        .unwrap();
        let d = c.profile(DEFAULT_PROFILE).unwrap();
        assert_eq!(d.provider.as_deref(), Some("anthropic"));
        assert_eq!(d.mcp, ["python3 s.py"]);
        let e = parse("modle = \"x\"\n").unwrap_err();
        assert!(e.contains("unknown field `modle`"), "{e}");
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn named_profiles_beside_the_default() {
        let c = parse(
            "provider = \"anthropic\"\n[profiles.fs]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmcp = [\"srv\"]\napprove = \"ask\"\n",
        )
        .unwrap();
        assert_eq!(c.names(), ["default", "fs"]);
        assert_eq!(c.profile("fs").unwrap().mcp, ["srv"]);
        let e = c.profile("nope").unwrap_err().to_string();
        assert!(
            e.contains("no profile \"nope\"") && e.contains("default, fs"),
            "{e}"
        );
        let e = parse("[profiles.fs]\nmcpp = []\n").unwrap_err();
        assert!(e.contains("[profiles.fs]") && e.contains("mcpp"), "{e}");
        let e = parse("model = \"m\"\n[profiles.default]\nmodel = \"n\"\n").unwrap_err();
        assert!(e.contains("defined twice"), "{e}");
        // Only [profiles.default]: that is the default.
        let c = parse("[profiles.default]\nmodel = \"n\"\n").unwrap();
        assert_eq!(c.profile("default").unwrap().model.as_deref(), Some("n"));
    }
}
