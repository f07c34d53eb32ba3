//! Helpers shared by the CLI's test binaries (each includes this module and uses some).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[path = "../../../staleguard/tests/support/scenarios.rs"]
mod scenarios;
// Not every test binary uses it.
#[allow(unused_imports)]
pub(crate) use scenarios::SCENARIOS;

/// `staleguard project --format <format> FILE`, run in the file's folder under the proxy's
/// configuration (compaction on, evidence and progress at their defaults): what a proxy
/// started there forwards for the body in `file`.
pub(crate) fn project_file(file: &Path, format: &str) -> Vec<u8> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_staleguard"));
    command
        .args(["project", "--format", format])
        .arg(file)
        .env("BROWSER_HISTORY_COMPACTION", "on")
        .env_remove("BROWSER_EVIDENCE_RETENTION")
        .env_remove("BROWSER_PROGRESS_TRACKING");
    if let Some(dir) = file.parent() {
        command.current_dir(dir);
    }
    let out = command.output().expect("run staleguard project");
    assert!(
        out.status.success(),
        "staleguard project {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The text of a content value: a string, or its text parts joined with `\n`.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
