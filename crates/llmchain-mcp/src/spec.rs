//! [`ServerSpec`]: how to reach an MCP server.

use std::path::PathBuf;

use crate::McpError;

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerSpec {
    /// Start a child process and speak MCP over its stdin/stdout.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: Vec<(String, String)>,
        /// Working directory (the current one when `None`).
        cwd: Option<PathBuf>,
    },
    /// Connect to a streamable-HTTP endpoint.
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:8000/mcp`.
        url: String,
    },
}

impl ServerSpec {
    /// A child process `program args...`.
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerSpec::Stdio {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Parses a `"CMD ARGS"` string with shell quoting rules (no expansion):
    /// `python3 "my server.py" --flag`.
    pub fn parse_command(command: &str) -> Result<Self, McpError> {
        let words = shell_words::split(command).map_err(|e| McpError::BadCommand {
            command: command.to_owned(),
            reason: e.to_string(),
        })?;
        let mut it = words.into_iter();
        let Some(program) = it.next() else {
            return Err(McpError::BadCommand {
                command: command.to_owned(),
                reason: "it is empty; give a program and its arguments".into(),
            });
        };
        Ok(Self::stdio(program, it))
    }

    /// A streamable-HTTP endpoint.
    pub fn http(url: impl Into<String>) -> Self {
        ServerSpec::Http { url: url.into() }
    }

    /// Adds an environment variable (stdio only; ignored for HTTP).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let ServerSpec::Stdio { env, .. } = &mut self {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// Sets the working directory (stdio only; ignored for HTTP).
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let ServerSpec::Stdio { cwd, .. } = &mut self {
            *cwd = Some(dir.into());
        }
        self
    }

    /// The command line or URL, for messages (a URL without its credentials:
    /// [`llmchain::redact::url`]).
    pub fn label(&self) -> String {
        match self {
            ServerSpec::Stdio { program, args, .. } => {
                let mut s = program.clone();
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
            ServerSpec::Http { url } => llmchain::redact::url(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_commands() {
        let s = ServerSpec::parse_command(r#"python3 "my server.py" --x 1"#).unwrap();
        assert_eq!(
            s,
            ServerSpec::stdio("python3", ["my server.py", "--x", "1"])
        );
        assert_eq!(s.label(), "python3 my server.py --x 1");
        assert!(matches!(
            ServerSpec::parse_command("  "),
            Err(McpError::BadCommand { .. })
        ));
        assert!(matches!(
            ServerSpec::parse_command("a \"b"),
            Err(McpError::BadCommand { .. })
        ));
    }
}
