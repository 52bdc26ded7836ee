//! Runs one of the cloud test servers beside this file (`bedrock_server.py`,
//! `vertex_server.py`) on a script, with the Python `LLMCHAIN_TEST_CLOUD_PYTHON` names
//! (`.ci/third-party` makes one with botocore and PyJWT). Self-contained (std and
//! serde_json), so the CLI's tests include it by path.

#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The Python that runs the servers, or `None` after printing `SKIPPED` for `test`.
pub(crate) fn python(test: &str) -> Option<String> {
    let python = std::env::var("LLMCHAIN_TEST_CLOUD_PYTHON").ok();
    if python.is_none() {
        eprintln!(
            "SKIPPED {test}: LLMCHAIN_TEST_CLOUD_PYTHON is not set (eval \"$(.ci/third-party)\")"
        );
    }
    python
}

/// A running server; killed when dropped.
pub(crate) struct CloudMock {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    log: PathBuf,
}

impl Drop for CloudMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl CloudMock {
    /// Starts the server at `server` (a path) on `script`, written into `dir` with the
    /// server's log.
    pub(crate) fn start(python: &str, server: &Path, script: &Value, dir: &Path) -> CloudMock {
        let script_path = dir.join("mock-script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let log = dir.join("mock-log.jsonl");
        let mut child = Command::new(python)
            .arg(server)
            .arg(&script_path)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{} said {line:?}", server.display()))
            .to_owned();
        CloudMock { child, base, log }
    }

    /// What it logged, one JSON object a request.
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}
