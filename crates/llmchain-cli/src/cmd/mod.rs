//! One module per subcommand.

pub mod decode;
pub mod demo;
pub mod encode;
pub mod run;
