//! One module per subcommand.

pub(crate) mod chat;
pub(crate) mod conversations;
pub(crate) mod decode;
pub(crate) mod demo;
pub(crate) mod encode;
mod id_prefix;
mod input;
pub(crate) mod keys;
pub(crate) mod mcp;
pub(crate) mod models;
pub(crate) mod policy;
pub(crate) mod reviews;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod serve;
pub(crate) mod worker;
