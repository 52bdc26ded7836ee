//! One module per subcommand.

pub mod conversations;
pub mod decode;
pub mod demo;
pub mod encode;
mod input;
pub mod mcp;
pub mod run;
pub mod runs;
pub mod worker;
