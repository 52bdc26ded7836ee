//! The client against deliberately bad servers (tests/servers/bad_server.py, raw
//! JSON-RPC over stdio; needs only a `python3`).

use std::time::Duration;

use llmchain::message::ToolResult;
use llmchain::tool::{CancellationToken, ToolContext};
use llmchain_mcp::{McpClient, McpError, McpOptions, McpTool, ServerSpec};
use serde_json::json;

fn python() -> Option<String> {
    if let Ok(p) = std::env::var("LLMCHAIN_TEST_MCP_PYTHON") {
        return Some(p);
    }
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some("python3".into())
    } else {
        eprintln!("SKIPPED: no python3 (set LLMCHAIN_TEST_MCP_PYTHON)");
        None
    }
}

fn server(py: &str, mode: &str, extra: &[&str]) -> ServerSpec {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/bad_server.py");
    let mut args = vec![script.to_owned(), mode.to_owned()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    ServerSpec::stdio(py, args)
}

fn opts() -> McpOptions {
    McpOptions {
        timeout: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(10),
        ..McpOptions::default()
    }
}

async fn work_tool(spec: ServerSpec, opts: McpOptions) -> McpTool {
    let client = McpClient::connect(spec, opts).await.unwrap();
    let mut tools = client.tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    tools.remove(0)
}

async fn call(t: &McpTool, id: &str) -> ToolResult {
    t.tool.execute(json!({}), ToolContext::new(id)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_is_restarted_on_the_next_call() {
    let Some(py) = python() else { return };
    let dir = tempfile_dir();
    let marker = dir.join("crashed");
    let t = work_tool(
        server(&py, "crash-once", &[marker.to_str().unwrap()]),
        opts(),
    )
    .await;
    let r = call(&t, "c1").await;
    assert!(r.is_error() && !r.is_refusal(), "{r:?}");
    assert!(
        r.content_text().contains("restarted on the next call"),
        "{}",
        r.content_text()
    );
    assert!(marker.exists());
    let r = call(&t, "c2").await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(r.content_text(), "worked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_always_crashes_gives_errors_not_panics() {
    let Some(py) = python() else { return };
    let t = work_tool(server(&py, "crash", &[]), opts()).await;
    for i in 0..2 {
        let r = call(&t, &format!("c{i}")).await;
        assert!(r.is_error(), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_server_times_out_and_can_be_cancelled() {
    let Some(py) = python() else { return };
    let t = work_tool(
        server(&py, "hang", &[]),
        McpOptions {
            timeout: Duration::from_millis(300),
            ..opts()
        },
    )
    .await;
    let r = call(&t, "c1").await;
    assert!(r.is_error(), "{r:?}");
    assert!(
        r.content_text().contains("timed out"),
        "{}",
        r.content_text()
    );

    let t = work_tool(server(&py, "hang", &[]), opts_with_long_timeout()).await;
    let token = CancellationToken::new();
    let ctx = ToolContext::new("c2").with_cancellation(token.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    });
    let r = t.tool.execute(json!({}), ctx).await;
    canceller.await.unwrap();
    assert!(r.is_error(), "{r:?}");
    assert!(r.content_text().contains("cancel"), "{}", r.content_text());
}

fn opts_with_long_timeout() -> McpOptions {
    McpOptions {
        timeout: Duration::from_secs(600),
        ..opts()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_an_error_result() {
    let Some(py) = python() else { return };
    let t = work_tool(
        server(&py, "malformed", &[]),
        McpOptions {
            timeout: Duration::from_millis(800),
            ..opts()
        },
    )
    .await;
    let r = call(&t, "c1").await;
    assert!(r.is_error(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_result_is_capped_with_a_clear_error() {
    let Some(py) = python() else { return };
    let t = work_tool(
        server(&py, "huge", &[]),
        McpOptions {
            timeout: Duration::from_secs(30),
            ..opts()
        },
    )
    .await;
    let r = call(&t, "c1").await;
    assert!(r.is_error(), "{r:?}");
    let text = r.content_text();
    assert!(
        text.contains("more than the 1048576 bytes allowed"),
        "{text}"
    );
    assert!(text.len() < 1000);
}

/// A reply over the message cap (16 MiB by default; rmcp alone drops such a line and the
/// call waits for its whole timeout) fails the call at once, naming the cause, and the
/// server is started again for the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_over_the_message_cap_fails_fast_with_its_cause() {
    let Some(py) = python() else { return };
    let t = work_tool(server(&py, "oversized", &[]), opts_with_long_timeout()).await;
    let started = std::time::Instant::now();
    let r = call(&t, "c1").await;
    let took = started.elapsed();
    assert!(r.is_error(), "{r:?}");
    let text = r.content_text();
    assert!(
        text.contains("sent a message of more than 16777216 bytes")
            && text.contains("during the call to work")
            && text.contains("Ask for less"),
        "{text}"
    );
    assert!(text.len() < 1000, "{}", text.len());
    // Not the 600 s timeout: the connection closed when the cap was passed.
    assert!(took < Duration::from_secs(60), "{took:?}");
    // A smaller cap trips on the same server's reply too.
    let t = work_tool(
        server(&py, "huge", &[]),
        McpOptions {
            max_message_bytes: 1024 * 1024,
            ..opts_with_long_timeout()
        },
    )
    .await;
    let text = call(&t, "c2").await.content_text();
    assert!(text.contains("more than 1048576 bytes"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_over_the_message_cap_is_a_list_error_naming_the_cause() {
    let Some(py) = python() else { return };
    let client = McpClient::connect(
        server(&py, "list-oversized", &[]),
        McpOptions {
            list_timeout: Duration::from_secs(600),
            ..opts()
        },
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let e = client.tools().await.unwrap_err();
    assert!(matches!(e, McpError::ListTools { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("sent a message of more than 16777216 bytes"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// A server that dies at start shows what it wrote on stderr (the default keeps its
/// tail instead of discarding it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_at_start_shows_its_stderr() {
    let Some(py) = python() else { return };
    let e = McpClient::connect(server(&py, "stderr-exit", &[]), opts())
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Handshake { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("its stderr ends with: Traceback (most recent call last):")
            && text.contains("RuntimeError: DATABASE_URL is not set"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_mcp_fails_the_handshake() {
    let Some(py) = python() else { return };
    let e = McpClient::connect(
        server(&py, "garbage-handshake", &[]),
        McpOptions {
            handshake_timeout: Duration::from_secs(3),
            ..opts()
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(e, McpError::Handshake { .. }), "{e:?}");
    assert!(
        e.to_string().contains("did not complete the MCP handshake"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_a_typed_error() {
    let e = McpClient::connect(ServerSpec::stdio("/nonexistent/mcp-server", ["x"]), opts())
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Spawn { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("MCP server `/nonexistent/mcp-server` could not start"),
        "{e}"
    );

    let e = McpClient::connect(ServerSpec::stdio("false", Vec::<String>::new()), opts())
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Handshake { .. }), "{e:?}");
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "llmchain-mcp-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A server that never answers `tools/list` fails within the list timeout, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_lists_its_tools_times_out() {
    let Some(py) = python() else { return };
    let opts = McpOptions {
        list_timeout: Duration::from_millis(800),
        ..opts()
    };
    let started = std::time::Instant::now();
    let client = McpClient::connect(server(&py, "list-hang", &[]), opts)
        .await
        .unwrap();
    let e = client.tools().await.unwrap_err();
    assert!(
        e.to_string().contains("no answer to tools/list within"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A server whose `nextCursor` never ends is cut off after a bounded number of pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_tool_pages_are_cut_off() {
    let Some(py) = python() else { return };
    let client = McpClient::connect(server(&py, "endless-pages", &[]), opts())
        .await
        .unwrap();
    let e = client.tools().await.unwrap_err();
    assert!(
        e.to_string().contains("still paging after 100 pages"),
        "{e}"
    );
}

/// A server that starts a helper of its own (a forked grandchild): when the client is
/// done with it, the whole process group ends, not only the server.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_forked_helpers_end_with_it() {
    let Some(py) = python() else { return };
    let dir = tempfile_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("helper.pid");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/bad_server.py");
    let spec = ServerSpec::stdio(
        "sh",
        vec![
            "-c".into(),
            format!(
                "sleep 300 & echo $! > {}; exec {py} {script} ok",
                pidfile.display()
            ),
        ],
    );
    let t = work_tool(spec, opts()).await;
    assert_eq!(call(&t, "c1").await.content_text(), "worked");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
    };
    assert!(alive(pid), "the helper runs while the server does");
    drop(t);
    let mut gone = false;
    for _ in 0..100 {
        if !alive(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the forked helper {pid} outlived its server");
    let _ = std::fs::remove_dir_all(dir);
}

/// A server whose helpers leave its process group: one calls `setsid()` (a session of
/// its own), another double-forks and is adopted by init. Both end when the client is
/// done with the server: each carries the server's instance mark in its environment.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_helpers_that_leave_its_group_end_with_it() {
    let Some(py) = python() else { return };
    let dir = tempfile_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/bad_server.py");
    // The helpers, started by the server's shell before it execs the server.
    let helpers = format!(
        "{py} -c 'import os,time; os.setsid(); open(\"{sid}\",\"w\").write(str(os.getpid())); time.sleep(300)' & \
         {py} -c 'import os,time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\nopen(\"{daemon}\",\"w\").write(str(os.getpid())); time.sleep(300)' & ",
        sid = dir.join("sid.pid").display(),
        daemon = dir.join("daemon.pid").display(),
    );
    let spec = ServerSpec::stdio(
        "sh",
        vec!["-c".into(), format!("{helpers} exec {py} {script} ok")],
    );
    let t = work_tool(spec, opts()).await;
    assert_eq!(call(&t, "c1").await.content_text(), "worked");
    let read_pid = |path: std::path::PathBuf| async move {
        for _ in 0..200 {
            if let Some(pid) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the helper never wrote {}", path.display());
    };
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
    };
    let (sid, daemon) = (
        read_pid(dir.join("sid.pid")).await,
        read_pid(dir.join("daemon.pid")).await,
    );
    assert!(
        alive(sid) && alive(daemon),
        "the helpers run while the server does"
    );
    drop(t);
    let mut gone = false;
    for _ in 0..100 {
        if !alive(sid) && !alive(daemon) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        gone,
        "a helper outlived its server (setsid {sid}: {}, double fork {daemon}: {})",
        alive(sid),
        alive(daemon)
    );
    let _ = std::fs::remove_dir_all(dir);
}
