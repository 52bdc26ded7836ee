//! `-a FILE|URL`: attachments to the prompt, as content parts placed on each wire by the
//! library's placement rules (`docs/content-placement.md`). An image or a PDF goes as
//! such, a text file as its text (or a text document), a URL as a link; one the
//! provider would only name in a placeholder is refused here, saying so.
//!
//! The media type comes from the file's first bytes (images, PDF) or its extension
//! (text), not from a crate: the placement rules tell only a few kinds apart, and the
//! bytes are the truth for those.

use std::path::Path;

use base64::Engine as _;
use llmchain::message::ContentPart;
use llmchain::provider::Codec;

use crate::error::CliError;

/// The largest file attached (the providers' own limits are 20 to 50 MiB a request).
const MAX_BYTES: u64 = 32 << 20;

/// The kernel's and the processes' state, not documents: `/proc/self/environ` holds every
/// key of this process, `/dev/stdin` whatever is piped in.
const PSEUDO_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// The parts of `given` (paths relative to `cwd`, or http(s) URLs), each checked against
/// `codec` (what the provider would not take is an error naming it).
pub(crate) fn parts(
    given: &[String],
    cwd: &Path,
    codec: &dyn Codec,
    provider: &str,
) -> Result<Vec<ContentPart>, CliError> {
    let mut out = Vec::with_capacity(given.len());
    for g in given {
        let part = part(g, cwd)?;
        if let Some(instead) = llmchain::provider::unsent_in_user_message(codec, &part) {
            return Err(CliError::usage(format!(
                "-a {}: {provider} does not take it; it would get only this: {}",
                crate::shown::inline(g, 200),
                crate::shown::inline(&instead, 300)
            )));
        }
        out.push(part);
    }
    Ok(out)
}

/// The parts of `given` without the check (a queued run: the worker's provider places
/// them).
pub(crate) fn parts_unchecked(given: &[String], cwd: &Path) -> Result<Vec<ContentPart>, CliError> {
    given.iter().map(|g| part(g, cwd)).collect()
}

/// One attachment as a content part.
fn part(given: &str, cwd: &Path) -> Result<ContentPart, CliError> {
    let lower = given.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        let path = lower.split(['?', '#']).next().unwrap_or("");
        return Ok(match image_media_by_name(path) {
            Some(m) => ContentPart::image_url(given).with_option("media", m),
            None if path.ends_with(".pdf") => {
                ContentPart::file_url(given).with_option("media", "application/pdf")
            }
            None => ContentPart::file_url(given),
        });
    }
    if lower.contains("://") {
        return Err(CliError::usage(format!(
            "-a {}: only files and http(s) URLs can be attached",
            crate::shown::inline(given, 200)
        )));
    }
    let path = cwd.join(given);
    let bytes = read(&path, given)?;
    // No secret of this process leaves in an attachment (a `.env`, a log): text is masked
    // as any other text is; a binary file holding one is refused (masking would corrupt it).
    let bytes = match std::str::from_utf8(&bytes) {
        Ok(text) => match llmchain::secrets::mask(text) {
            std::borrow::Cow::Owned(masked) => masked.into_bytes(),
            std::borrow::Cow::Borrowed(_) => bytes,
        },
        Err(_) if llmchain::secrets::found_in(&bytes) => {
            return Err(CliError::usage(format!(
                "-a {}: it holds a secret of this process (an API key or token); not attached",
                crate::shown::inline(given, 200)
            )));
        }
        Err(_) => bytes,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let media = sniff(&bytes)
        .map(str::to_owned)
        .or_else(|| text_media_by_name(&name).map(str::to_owned))
        .unwrap_or_else(|| {
            if std::str::from_utf8(&bytes).is_ok() {
                "text/plain".to_owned()
            } else {
                "application/octet-stream".to_owned()
            }
        });
    let part = if media.starts_with("image/") {
        ContentPart::image(data, media)
    } else {
        ContentPart::file(data, media)
    };
    Ok(part.with_option("filename", name))
}

/// The file's bytes, bounded. Anything but a regular file (a FIFO, a device, a
/// directory) is refused before a byte is read: it is opened without blocking (a FIFO
/// with no writer would otherwise block the open forever) and looked at first.
fn read(path: &Path, given: &str) -> Result<Vec<u8>, CliError> {
    use std::io::Read as _;
    let shown = crate::shown::inline(given, 200);
    let pseudo = || {
        CliError::usage(format!(
            "-a {shown}: a file under /proc, /sys or /dev is never attached (it holds the \
             system's state and this process's keys); copy what you need into a file"
        ))
    };
    // Where the path really leads: links, `..`, /proc/self and /dev/fd resolved.
    let real = std::fs::canonicalize(path)
        .map_err(|e| CliError::usage(format!("-a {shown}: cannot read it: {e}")))?;
    if PSEUDO_ROOTS.iter().any(|root| real.starts_with(root)) {
        return Err(pseudo());
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options
        .open(&real)
        .map_err(|e| CliError::usage(format!("-a {shown}: cannot read it: {e}")))?;
    // And by file system: a procfs or sysfs mounted elsewhere, or a link swapped in
    // after the check above.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Ok(fs) = rustix::fs::fstatfs(&file) {
        const PSEUDO_FS: [i64; 6] = [
            0x9fa0,      // proc
            0x6265_6572, // sysfs
            0x6462_6720, // debugfs
            0x7472_6163, // tracefs
            0x7363_6673, // securityfs
            0xde5e_81e4, // efivarfs
        ];
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let kind = i64::from(fs.f_type as i64);
        if PSEUDO_FS.contains(&kind) {
            return Err(pseudo());
        }
    }
    let meta = file
        .metadata()
        .map_err(|e| CliError::usage(format!("-a {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(CliError::usage(format!("-a {shown}: not a file")));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::usage(format!("-a {shown}: cannot read it: {e}")))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(CliError::usage(format!(
            "-a {shown}: larger than {} MiB, more than providers take in a request",
            MAX_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// The media type the first bytes say: the image formats and PDF.
fn sniff(b: &[u8]) -> Option<&'static str> {
    Some(match b {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xFF, 0xD8, 0xFF, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => "image/webp",
        [b'%', b'P', b'D', b'F', b'-', ..] => "application/pdf",
        _ => return None,
    })
}

fn image_media_by_name(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1;
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// Text files by extension (their content is checked to be UTF-8 by the placement).
fn text_media_by_name(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "txt" | "log" | "rs" | "py" | "go" | "js" | "ts" | "java" | "c" | "h" | "cpp" | "sh"
        | "toml" | "ini" | "sql" | "tsv" | "css" => "text/plain",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO with no writer is refused at once, not read (or opened) forever.
    #[cfg(unix)]
    #[test]
    fn pseudo_files_are_refused_however_they_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = vec![
            std::path::PathBuf::from("/proc/self/environ"),
            std::path::PathBuf::from("/proc/self/cmdline"),
        ];
        #[cfg(unix)]
        {
            let link = dir.path().join("innocent.txt");
            std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
            paths.push(link);
            paths.push(dir.path().join("../../proc/self/environ"));
        }
        if std::path::Path::new("/sys/kernel/mm").exists() {
            paths.push("/sys/kernel/mm/transparent_hugepage/enabled".into());
        }
        for p in paths {
            if !p.exists() {
                continue;
            }
            let e = read(&p, "given").unwrap_err().to_string();
            assert!(e.contains("/proc, /sys or /dev"), "{}: {e}", p.display());
        }
    }

    #[test]
    fn known_secrets_are_masked_in_attached_text() {
        llmchain::secrets::register("sk-attached-secret-5e6f7a8b");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("notes.env"),
            "OPENAI_API_KEY=sk-attached-secret-5e6f7a8b\nOTHER=1\n",
        )
        .unwrap();
        let attached = part("notes.env", dir.path()).unwrap();
        let json = serde_json::to_string(&attached).unwrap();
        let data =
            base64::engine::general_purpose::STANDARD.encode("OPENAI_API_KEY=***\nOTHER=1\n");
        assert!(json.contains(&data), "{json}");
        // A binary file holding it is refused.
        let mut bin = vec![0xffu8, 0xfe, 0];
        bin.extend_from_slice(b"sk-attached-secret-5e6f7a8b");
        std::fs::write(dir.path().join("blob.bin"), bin).unwrap();
        let e = part("blob.bin", dir.path()).unwrap_err().to_string();
        assert!(e.contains("holds a secret"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.txt");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read(&fifo, "pipe.txt").map_err(|e| e.to_string()));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("-a on a FIFO returns instead of blocking");
        let error = result.unwrap_err();
        assert!(error.contains("not a file"), "{error}");
        assert!(
            read(dir.path(), "dir")
                .unwrap_err()
                .to_string()
                .contains("not a file")
        );
    }

    #[test]
    fn the_first_bytes_win_over_the_name() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff(b"%PDF-1.7\n"), Some("application/pdf"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"hello"), None);
        assert_eq!(text_media_by_name("notes.MD"), Some("text/markdown"));
        assert_eq!(image_media_by_name("https://x/a.jpeg"), Some("image/jpeg"));
    }
}
