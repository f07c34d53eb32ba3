//! What the tests share: the recordings and their facts, `staleguard replay` run and its
//! report read, and what SPEC 9 and the lean live page ask of a replayed session.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::SCENARIOS;

pub(crate) const STRATEGIES: [&str; 4] = ["none", "newest-only", "staleguard", "clear-oldest-3"];

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The recorded sessions of every @playwright/mcp version, in both request formats.
pub(crate) fn recordings() -> Vec<PathBuf> {
    let dirs = [
        repo().join("fixtures/pwmcp-0.0.30"),
        repo().join("fixtures/pwmcp-0.0.41"),
        repo().join("fixtures/pwmcp-0.0.56"),
        repo().join("fixtures/pwmcp-0.0.83"),
    ];
    let mut out = Vec::new();
    for dir in dirs {
        for s in SCENARIOS {
            for format in ["openai", "anthropic"] {
                let path = dir.join(format!("{s}.{format}.json"));
                assert!(path.is_file(), "missing {}", path.display());
                out.push(path);
            }
        }
    }
    out
}

pub(crate) fn facts_dir() -> PathBuf {
    repo().join("fixtures/facts")
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("staleguard-replay-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn run(args: &[&str], sessions: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .arg("replay")
        .args(args)
        .args(sessions)
        .output()
        .expect("run staleguard replay")
}

/// `staleguard replay --json ARGS SESSIONS`, its sessions.
pub(crate) fn replay(args: &[&str], sessions: &[PathBuf]) -> Vec<Value> {
    let out = run(&[&["--json"], args].concat(), sessions);
    assert!(
        out.status.success(),
        "{sessions:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("replay --json is JSON");
    v["sessions"].as_array().unwrap().clone()
}

/// SPEC 9's targets for a session of pages that are not tiny: staleguard at most 1.10 x
/// `none` and 1.08 x `newest-only`, history frozen on every turn.
pub(crate) fn meets_spec_9_targets(session: &Value) {
    let name = session["session"].as_str().unwrap_or_default();
    let sg = strategy(session, "staleguard");
    let vs_none = num(&sg["relative_to_none"]);
    let vs_newest = num(&sg["relative_to_newest_only"]);
    assert!(vs_none <= 1.10, "{name}: {vs_none:.3} x none");
    assert!(vs_newest <= 1.08, "{name}: {vs_newest:.3} x newest-only");
    assert!(
        sg["frozen_history_broken"].as_array().unwrap().is_empty(),
        "{name}: C1 broke"
    );
}

pub(crate) fn strategy<'a>(session: &'a Value, name: &str) -> &'a Value {
    session["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == name)
        .unwrap_or_else(|| panic!("no strategy {name}"))
}

pub(crate) fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub(crate) fn present(fact: &Value, name: &str) -> bool {
    fact["present"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[0] == name)
        .unwrap_or_else(|| panic!("{name} not checked: {fact}"))[1]
        .as_bool()
        .unwrap()
}

/// The call that reached a fact a strategy's request lacks (`history`, `again`, `find`), as
/// `replay --json` lists it under `one_call`.
pub(crate) fn way(fact: &Value, name: &str) -> Option<String> {
    let calls = fact["one_call"].as_array()?;
    let call = calls.iter().find(|c| c[0] == name)?;
    call[1].as_str().map(str::to_string)
}

pub(crate) fn write_session(dir: &Path, name: &str, body: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

/// What SPEC 2's lean live page must hold on a replayed session: every control of every
/// lean page in its lean form, history frozen on every turn, and never dearer than sending
/// pages whole. Returns (bytes, lean tokens / whole tokens) of each lean page.
pub(crate) fn lean_holds(v: &Value) -> Vec<(u64, f64)> {
    let name = v["session"].as_str().unwrap();
    let lean = strategy(v, "staleguard-lean");
    let broken = lean["frozen_history_broken"].as_array().unwrap();
    assert!(broken.is_empty(), "{name}: lean broke C1 at {broken:?}");
    let (whole, thin) = (
        num(&strategy(v, "staleguard")["total"]["cost"]),
        num(&lean["total"]["cost"]),
    );
    assert!(
        thin <= whole * 1.0001,
        "{name}: lean {thin} > whole {whole}"
    );
    let mut out = Vec::new();
    for page in v["lean_pages"].as_array().unwrap() {
        let missing = page["missing_refs"].as_array().unwrap();
        assert!(missing.is_empty(), "{name}: {page} lost controls");
        let share = num(&page["tokens_lean"]) / num(&page["tokens_whole"]);
        out.push((page["bytes_whole"].as_u64().unwrap(), share));
    }
    out
}
