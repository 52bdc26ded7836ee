//! The registry of wire formats: one line per built-in format (its descriptor, a
//! [`FormatSpec`] in its own folder), and the formats registered at run time by code
//! outside this crate. Names, aliases, titles, codecs and renderers are read from here
//! by the HTTP client, the CLI, errors and rendering; nothing else holds a `match` over
//! formats (`tests/format_registry.rs` keeps it so).

use std::str::FromStr;
use std::sync::RwLock;

use super::format::{Format, FormatSpec};

impl Format {
    /// The built-in formats, one line each.
    pub const ALL: &'static [Format] = &[
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OLLAMA,
        Format::BEDROCK_CONVERSE,
    ];

    /// Every known format: the built-in ones, then those registered, in order.
    pub fn all() -> Vec<Format> {
        let mut all = Format::ALL.to_vec();
        all.extend(registered().iter().copied());
        all
    }

    /// The format named `name` (its name or an alias, ignoring case), built in or
    /// registered.
    pub fn named(name: &str) -> Option<Format> {
        let name = name.trim();
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.spec().is_named(name))
            .or_else(|| {
                registered()
                    .iter()
                    .copied()
                    .find(|f| f.spec().is_named(name))
            })
    }

    /// Makes a format defined outside this crate known by its name and aliases, for
    /// [`Format::named`], `parse` and everything that reads names (the CLI's
    /// `--format`, errors). Registering the same descriptor again is a no-op; a name
    /// or alias another format has is refused.
    pub fn register(spec: &'static FormatSpec) -> Result<Format, FormatTaken> {
        let mut list = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = list.iter().find(|f| std::ptr::eq(f.spec(), spec)) {
            return Ok(*f);
        }
        let names = std::iter::once(spec.name).chain(spec.aliases.iter().copied());
        for name in names {
            let taken = Format::ALL
                .iter()
                .chain(list.iter())
                .find(|f| f.spec().is_named(name));
            if let Some(other) = taken {
                return Err(FormatTaken {
                    name: name.to_owned(),
                    by: other.as_str(),
                });
            }
        }
        let format = Format::new(spec);
        list.push(format);
        Ok(format)
    }
}

/// The formats registered at run time.
static REGISTERED: RwLock<Vec<Format>> = RwLock::new(Vec::new());

fn registered() -> Vec<Format> {
    REGISTERED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A name [`Format::register`] refused: another format has it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the format name '{name}' is taken by the format {by}")]
pub struct FormatTaken {
    /// The name asked for.
    pub name: String,
    /// The format that has it.
    pub by: &'static str,
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format '{0}': expected one of {known}", known = known())]
pub struct UnknownFormat(pub String);

/// The known names, each with its aliases: `openai_chat (or openai, chat), …`.
fn known() -> String {
    Format::all()
        .iter()
        .map(|f| match f.aliases() {
            [] => f.as_str().to_owned(),
            aliases => format!("{} (or {})", f.as_str(), aliases.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::named(s).ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Framing;

    #[test]
    fn names_and_aliases_find_their_format_and_are_unique() {
        let mut all: Vec<String> = Vec::new();
        for f in Format::ALL {
            assert_eq!(Format::named(f.as_str()), Some(*f));
            assert_eq!(f.codec().format(), *f, "{f}'s codec names another format");
            all.push(f.as_str().to_owned());
            for a in f.aliases() {
                assert_eq!(Format::named(&a.to_ascii_uppercase()), Some(*f));
                all.push((*a).to_owned());
            }
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias is used twice");
        assert_eq!("bedrock".parse::<Format>(), Ok(Format::BEDROCK_CONVERSE));
        let e = "nope".parse::<Format>().unwrap_err().to_string();
        assert!(
            e.starts_with("unknown format 'nope': expected one of openai_chat (or "),
            "{e}"
        );
        assert!(e.contains("bedrock_converse (or bedrock, converse)"), "{e}");
    }

    static OURS: FormatSpec = FormatSpec::new("registry_test_format", "Registry Test", &TestCodec)
        .aliases(&["registry_test_alias"])
        .framing(Framing::Ndjson);
    static CLASH: FormatSpec =
        FormatSpec::new("registry_test_clash", "Clash", &TestCodec).aliases(&["OpenAI"]);

    struct TestCodec;
    impl crate::provider::Codec for TestCodec {
        fn format(&self) -> Format {
            Format::new(&OURS)
        }
        fn encode(
            &self,
            conv: &crate::conversation::Conversation,
            opts: &crate::provider::RequestOptions,
        ) -> Result<Vec<u8>, crate::provider::EncodeError> {
            Format::OLLAMA.codec().encode(conv, opts)
        }
        fn stream_decoder(
            &self,
            config: crate::provider::DecoderConfig,
        ) -> Box<dyn crate::provider::StreamDecoder> {
            Format::OLLAMA.codec().stream_decoder(config)
        }
        fn decode_response(
            &self,
            body: &[u8],
            config: crate::provider::DecoderConfig,
        ) -> Result<crate::provider::DecodeOutcome, crate::provider::DecodeError> {
            Format::OLLAMA.codec().decode_response(body, config)
        }
    }

    #[test]
    fn a_registered_format_is_found_by_name_and_a_taken_name_is_refused() {
        assert_eq!(Format::named("registry_test_alias"), None);
        let f = Format::register(&OURS).unwrap();
        assert_eq!(Format::register(&OURS), Ok(f));
        assert_eq!("REGISTRY_TEST_ALIAS".parse::<Format>(), Ok(f));
        assert_eq!(f.title(), "Registry Test");
        assert_eq!(f.framing(), Framing::Ndjson);
        assert!(Format::all().contains(&f));
        assert!(
            "nope"
                .parse::<Format>()
                .unwrap_err()
                .to_string()
                .ends_with("registry_test_format (or registry_test_alias)")
        );
        let e = Format::register(&CLASH).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the format name 'OpenAI' is taken by the format openai_chat"
        );
        assert_eq!(Format::named("registry_test_clash"), None);
    }
}
