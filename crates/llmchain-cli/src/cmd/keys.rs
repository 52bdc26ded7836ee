//! `llmchain keys set | list | remove`: provider keys in a file of the user's own
//! ([`crate::keys`]), for when exporting `OPENAI_API_KEY` in every shell is a chore.

use std::io::IsTerminal;

use crate::error::{CliError, CliResult};
use crate::job::parse_provider;
use crate::stdout::outln;

/// Arguments of `llmchain keys`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Keys are kept in a file only you can read (mode 0600): $LLMCHAIN_KEYS, else \
                  $XDG_CONFIG_HOME/llmchain/keys.json. A provider's key variable in the \
                  environment (OPENAI_API_KEY...) wins over the file. No key is ever printed."
)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Store PROVIDER's key: typed without echo at a terminal, else read from stdin.
    Set {
        /// The provider (`llmchain run --help` lists them).
        provider: String,
    },
    /// The providers that have a key, and where each comes from.
    List,
    /// Forget PROVIDER's stored key.
    Remove {
        /// The provider.
        provider: String,
    },
}

/// Runs `llmchain keys`.
pub(crate) fn run(args: KeysArgs) -> CliResult {
    match args.action {
        Action::Set { provider } => {
            let spec = parse_provider(&provider)?;
            if spec.key_env().is_empty() {
                return Err(CliError::usage(format!(
                    "{} takes no key{}",
                    spec.name(),
                    if spec.credentials_help().is_empty() {
                        String::new()
                    } else {
                        format!(" (it uses {})", spec.credentials_help())
                    }
                )));
            }
            let key = read_key(spec.name())?;
            let mut keys = crate::keys::load()?;
            keys.insert(spec.name().to_owned(), key);
            let path = crate::keys::save(&keys)?;
            eprintln!("stored the key of {} in {}", spec.name(), path.display());
            if let Some(var) = spec
                .key_env()
                .iter()
                .find(|v| std::env::var_os(v).is_some())
            {
                eprintln!("note: {var} is set in this environment, and wins over the file");
            }
            Ok(())
        }
        Action::List => {
            let keys = crate::keys::load()?;
            for spec in llmchain::http::providers::PROVIDERS {
                let env = spec
                    .key_env()
                    .iter()
                    .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
                let where_ = match (env, keys.contains_key(spec.name())) {
                    (Some(var), true) => {
                        format!("{var} (environment; the keys file's is not used)")
                    }
                    (Some(var), false) => format!("{var} (environment)"),
                    (None, true) => "keys file".to_owned(),
                    (None, false) => continue,
                };
                outln!("{:<18} {where_}", spec.name());
            }
            // Names the file holds that are no provider (a typo, an old name).
            for name in keys.keys() {
                if llmchain::http::provider(name).is_none() {
                    outln!(
                        "{:<18} keys file (no such provider)",
                        crate::shown::inline(name, 40)
                    );
                }
            }
            Ok(())
        }
        Action::Remove { provider } => {
            let name = llmchain::http::provider(&provider).map_or(provider.as_str(), |s| s.name());
            let mut keys = crate::keys::load()?;
            if keys.remove(name).is_none() {
                return Err(CliError::usage(format!("no key stored for {name}")));
            }
            let path = crate::keys::save(&keys)?;
            eprintln!("removed the key of {name} from {}", path.display());
            Ok(())
        }
    }
}

/// The key, typed without echo at a terminal, else the first line of stdin.
fn read_key(provider: &str) -> Result<String, CliError> {
    let key = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("key for {provider} (not shown): "))
            .map_err(|e| CliError::io("cannot read the key", e))?
    } else {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| CliError::io("cannot read the key from stdin", e))?;
        line
    };
    let key = key.trim().to_owned();
    if key.is_empty() {
        return Err(CliError::usage("no key given"));
    }
    if key.chars().any(char::is_control) || key.contains(' ') {
        return Err(CliError::usage(
            "a key has no spaces or control characters: was something else pasted?",
        ));
    }
    Ok(key)
}
