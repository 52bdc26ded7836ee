//! `llmchain models [--provider P]`: the models a provider serves (from its API), and
//! the config file's aliases.

use llmchain::http::{HttpModel, HttpModelConfig};

use crate::error::{CliError, CliResult};
use crate::job::parse_provider;
use crate::shown::one_line;
use crate::stdout::outln;

/// Arguments of `llmchain models`.
#[derive(Debug, clap::Args)]
pub(crate) struct ModelsArgs {
    /// The provider to ask [default: $LLMCHAIN_PROVIDER, the default profile's, else
    /// openai].
    #[arg(long)]
    provider: Option<String>,
    /// Its base URL (a compatible server, a proxy) [default: the provider's].
    #[arg(long)]
    base_url: Option<String>,
    /// One JSON object: {"provider", "models", "aliases"}.
    #[arg(long)]
    json: bool,
}

/// Runs `llmchain models`.
pub(crate) fn run(args: ModelsArgs) -> CliResult {
    let config = crate::config::load()?;
    let profile = config.profile(crate::config::DEFAULT_PROFILE)?;
    let name = args
        .provider
        .clone()
        .or_else(|| {
            std::env::var("LLMCHAIN_PROVIDER")
                .ok()
                .filter(|p| !p.is_empty())
        })
        .or_else(|| profile.provider.clone())
        .unwrap_or_else(|| "openai".to_owned());
    let spec = parse_provider(&name)?;
    let model_err = |e: llmchain::model::ModelError| {
        CliError::runtime(llmchain::redact::urls_in(&one_line(&e.to_string())))
            .typed(e.error_type())
    };
    let mut http = HttpModelConfig::for_provider(spec, spec.default_model())
        .read_env(crate::keys::lookup_for(spec)?)
        .map_err(model_err)?;
    // The profile's base URL is for its own provider.
    let base_url = args.base_url.clone().or_else(|| {
        (profile.provider.as_deref().unwrap_or("openai") == spec.name())
            .then(|| profile.base_url.clone())
            .flatten()
    });
    if let Some(url) = base_url {
        http.base_url = url;
    }
    let model = HttpModel::new(http).map_err(model_err)?;
    let models = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?
        .block_on(model.list_models())
        .map_err(model_err)?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"provider": spec.name(), "models": models, "aliases": config.aliases})
        );
        return Ok(());
    }
    // Ids come from a server: shown on one line each, control characters escaped.
    for m in &models {
        outln!("{}", crate::shown::inline(m, 200));
    }
    if models.is_empty() {
        eprintln!("{} lists no models", spec.name());
    }
    if !config.aliases.is_empty() {
        eprintln!("aliases (config file):");
        for (alias, target) in &config.aliases {
            eprintln!("  {alias} = {}", crate::shown::inline(target, 200));
        }
    }
    Ok(())
}
