//! One module per subcommand.

pub mod decode;
pub mod encode;
mod input;
