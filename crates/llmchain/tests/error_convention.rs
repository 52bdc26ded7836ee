//! The convention of `std::error::Error`: an error shows its cause in its own text or
//! returns it from `source()`, never both, so a reporter that walks the chain (anyhow,
//! eyre, `llmchain`'s own) prints each cause once.

use std::error::Error;

use llmchain::chain::{ChainError, SinkError, SinkErrorKind};
use llmchain::model::{Cause, ModelError};

/// Fails when an error in the chain repeats its source's text.
pub fn each_cause_shown_once(e: &(dyn Error + 'static)) -> Result<(), String> {
    let mut at: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(x) = at {
        if let Some(s) = x.source() {
            let (mine, theirs) = (x.to_string(), s.to_string());
            if !theirs.is_empty() && mine.contains(&theirs) {
                return Err(format!(
                    "{mine:?} shows its source {theirs:?} and returns it"
                ));
            }
        }
        at = x.source();
    }
    Ok(())
}

fn io(text: &str) -> Cause {
    Cause::new(std::io::Error::other(text.to_owned()))
}

#[test]
fn the_chain_and_model_errors_show_each_cause_once() {
    let connect = ModelError::Connect {
        provider: "openai".into(),
        url: "https://api.openai.com/v1".into(),
        message: "error sending request: connection refused".into(),
        cause: Some(io("connection refused")),
    };
    let errors: Vec<Box<dyn Error>> = vec![
        Box::new(connect.clone()),
        Box::new(ModelError::StreamInterrupted {
            provider: "anthropic".into(),
            message: "connection reset".into(),
            cause: Some(io("connection reset")),
        }),
        Box::new(ModelError::Credentials {
            message: "the AWS file ~/.aws/credentials cannot be read: denied".into(),
            cause: Some(io("denied")),
        }),
        Box::new(ChainError::Model(connect.clone())),
        Box::new(ChainError::AllFallbacksFailed(connect)),
        Box::new(ChainError::Persist(SinkError::from_source(
            SinkErrorKind::Other,
            std::io::Error::other("disk full"),
        ))),
    ];
    for e in &errors {
        each_cause_shown_once(e.as_ref()).unwrap();
    }
    // The check sees a repeat.
    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Twice(#[source] std::io::Error);
    assert!(each_cause_shown_once(&Twice(std::io::Error::other("inner"))).is_err());
}
