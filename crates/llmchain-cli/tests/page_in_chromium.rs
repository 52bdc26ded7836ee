//! The page `llmchain serve` serves at `/`, in a real browser (issue 28): Debian's
//! `chromium`, headless, driven over the DevTools protocol by `puppeteer-core` (pinned in
//! `.ci/third-party`), runs `tests/js/page_in_chromium.mjs` against the real binary: type,
//! send, watch the text stream in, click Approve, see the result, reload and see the
//! conversation; at phone width (390 px) the chats are a drawer and the chat has the
//! width, at 1280 px the list is beside it; a new chat requests nothing that is not
//! there. Screenshots are kept in `target/test-artifacts/serve-page*.png` (CI artifacts).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Reply, Served, files_calls, files_server_cmd, serve_replies, write_config};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

/// The browser: `$LLMCHAIN_TEST_CHROMIUM`, else Debian's `chromium` on the path.
fn chromium(test: &str) -> Option<String> {
    if let Ok(path) = std::env::var("LLMCHAIN_TEST_CHROMIUM") {
        return Some(path);
    }
    for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(path).exists() {
            return Some(path.into());
        }
    }
    eprintln!(
        "SKIPPED {test}: no chromium (apt-get install chromium, or set LLMCHAIN_TEST_CHROMIUM)"
    );
    None
}

#[test]
fn the_page_chats_approves_and_reloads_in_chromium() {
    let test = "the_page_chats_approves_and_reloads_in_chromium";
    let Some(puppeteer) = common::third_party("LLMCHAIN_TEST_PUPPETEER", test) else {
        return;
    };
    let Some(chromium) = chromium(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = dir.join("files");
    std::fs::create_dir(&root).unwrap();
    let Some(files) = files_server_cmd(test, &root, 0) else {
        return;
    };
    let call = ResponseScript::tool_call(
        "call_1",
        "write_file",
        r#"{"path":"notes.txt","content":"Ship on Friday."}"#,
    )
    .with_text("I will write the notes file for you now.");
    let (base, _seen) = serve_replies(vec![
        // Slow enough for the page to draw the text more than once as it streams.
        Reply::Trickle(
            render_stream(Format::OPENAI_CHAT, &call).unwrap(),
            Duration::from_millis(120),
        ),
        Reply::Body(
            render_stream(
                Format::OPENAI_CHAT,
                &ResponseScript::text("Saved <b>notes.txt</b> <img src=x onerror=alert(1)>."),
            )
            .unwrap(),
        ),
    ]);
    write_config(
        dir,
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\napprove = \"ask\"\n"
        ),
    );
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = Served::start(dir, &["--db", &db]);

    let js = dir.join("js");
    std::fs::create_dir(&js).unwrap();
    std::os::unix::fs::symlink(format!("{puppeteer}/node_modules"), js.join("node_modules"))
        .unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/page_in_chromium.mjs"),
        js.join("page.mjs"),
    )
    .unwrap();
    let artifacts = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let screenshot = artifacts.join("serve-page.png");
    let out = Command::new("node")
        .arg(js.join("page.mjs"))
        .arg(&served.base)
        .arg(&chromium)
        .arg(&screenshot)
        .arg(dir.join("chromium-profile"))
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK "),
        "the page test failed:\n{stdout}\n{}\nserver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        served.log()
    );
    eprintln!("{stdout}screenshot: {}", screenshot.display());
    for shot in [
        "serve-page.png",
        "serve-page-390.png",
        "serve-page-390-drawer.png",
        "serve-page-1280.png",
    ] {
        let len = std::fs::metadata(artifacts.join(shot)).map_or(0, |m| m.len());
        assert!(len > 5_000, "{shot}: {len} bytes");
    }
    let ran = files_calls(&root);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "Ship on Friday."
    );
}
