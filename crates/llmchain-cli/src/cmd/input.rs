//! Shared input handling for the codec subcommands.

use std::io::Read;

use llmchain::provider::{Codec, Format};

use crate::error::CliError;

/// Opens a file, or stdin for `-` / no path, for reading as it arrives.
pub(super) fn open_input(path: Option<&str>) -> Result<Box<dyn Read>, CliError> {
    match path {
        None | Some("-") => Ok(Box::new(std::io::stdin().lock())),
        Some(p) => std::fs::File::open(p)
            .map(|f| Box::new(f) as Box<dyn Read>)
            .map_err(|e| CliError::usage(format!("cannot read {p}: {e}"))),
    }
}

/// Reads a file, or stdin for `-` / no path.
pub(super) fn read_input(path: Option<&str>) -> Result<Vec<u8>, CliError> {
    match path {
        None | Some("-") => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?;
            Ok(buf)
        }
        Some(p) => std::fs::read(p).map_err(|e| CliError::usage(format!("cannot read {p}: {e}"))),
    }
}

/// The codec for a format name.
pub(super) fn codec_for(name: &str) -> Result<(Format, &'static dyn Codec), CliError> {
    let format: Format = name.parse().map_err(|e| CliError::usage(format!("{e}")))?;
    Ok((format, format.codec()))
}
