//! The `staleguard` command, run as a user runs it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_staleguard"))
}

fn fixture(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    assert!(path.is_file(), "missing fixture {}", path.display());
    path
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn staleguard");
    if let Some(input) = stdin {
        // The command may refuse its arguments and exit before it reads: a closed pipe is fine.
        match child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
        {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.expect("write stdin"),
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("wait")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn project_file_and_stdin_agree_and_keep_messages() {
    let path = fixture("pwmcp-0.0.41/order.openai.json");
    let body = std::fs::read_to_string(&path).unwrap();
    let from_file = run(&["project", path.to_str().unwrap()], None);
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let from_stdin = run(&["project", "-"], Some(&body));
    let from_default = run(&["project"], Some(&body));
    assert_eq!(from_file.stdout, from_stdin.stdout);
    assert_eq!(from_file.stdout, from_default.stdout);
    let before: serde_json::Value = serde_json::from_str(&body).unwrap();
    let after: serde_json::Value =
        serde_json::from_slice(&from_file.stdout).expect("valid JSON out");
    assert_eq!(
        before["messages"].as_array().unwrap().len(),
        after["messages"].as_array().unwrap().len()
    );
    assert!(from_file.stdout.len() < body.len());
    assert!(stdout(&from_file).contains("[staleguard receipt]"));
}

/// Files of a MiB and more are mapped instead of read: the same projection as from
/// standard input, and the same clear error for bytes that are not UTF-8.
#[test]
fn a_large_file_projects_as_standard_input_does() {
    let dir = std::env::temp_dir().join(format!("staleguard-large-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body = std::fs::read_to_string(fixture("pwmcp-0.0.41/long_page.openai.json")).unwrap();
    let mut request: serde_json::Value = serde_json::from_str(&body).unwrap();
    // Padding in a field projection leaves alone takes the file past the mapping threshold.
    request["metadata"] = serde_json::json!({ "padding": "x".repeat(1 << 20) });
    let large = serde_json::to_string(&request).unwrap();
    let path = dir.join("large.json");
    std::fs::write(&path, &large).unwrap();
    let from_file = run(&["project", path.to_str().unwrap()], None);
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let from_stdin = run(&["project"], Some(&large));
    assert_eq!(from_file.stdout, from_stdin.stdout);
    assert!(stdout(&from_file).contains("[staleguard receipt]"));

    let mut bad = large.into_bytes();
    let at = bad.len() - 3;
    bad[at] = 0xff;
    std::fs::write(&path, &bad).unwrap();
    let out = run(&["project", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let expected = format!("large.json is not UTF-8 (byte {at})");
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).ok();
}
#[test]
fn inspect_table_and_json() {
    let path = fixture("pwmcp-0.0.41/long_page.openai.json");
    let table = run(&["inspect", path.to_str().unwrap()], None);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    for needle in [
        "collapsed",
        "live",
        "browser_navigate",
        "Parts catalog",
        "tokens:",
        "o200k_base",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    let json = run(&["inspect", "--json", path.to_str().unwrap()], None);
    let v: serde_json::Value =
        serde_json::from_slice(&json.stdout).expect("inspect --json is JSON");
    let totals = &v["totals"];
    assert_eq!(totals["collapsed"], 3);
    let (before, after) = (
        totals["tokens_before"].as_u64().unwrap(),
        totals["tokens_after"].as_u64().unwrap(),
    );
    assert!(after * 2 < before, "{before} -> {after}");
    assert!(totals["bytes_after"].as_u64().unwrap() * 2 < totals["bytes_before"].as_u64().unwrap());
    let statuses: Vec<_> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["collapsed", "collapsed", "collapsed", "live"]);
    assert_eq!(v["results"][0]["refs_withheld"], 1214);
}

#[test]
fn demo_runs_the_bundled_recording() {
    let out = run(&["demo"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("3 collapsed"), "{text}");
    assert!(text.contains("[staleguard receipt] observation="), "{text}");
    assert!(
        text.contains("- Page Snapshot:"),
        "the before part shows the original tree"
    );
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (
            &["project"],
            Some("{\"messages\": [\n  {\"role\": \"user\",, }\n]}"),
            "line 2, column 19",
        ),
        (&["project"], Some(""), "invalid JSON"),
        (&["project"], Some("[1,2]"), "not a"),
        (
            &["project", "--format", "yaml"],
            Some("{}"),
            "auto, openai, anthropic, responses",
        ),
        (
            &["project", "--format", "anthropic"],
            Some("{\"input\":[]}"),
            "not an anthropic request body: no `messages`",
        ),
        (
            &["inspect"],
            Some("{\"model\": \"x\"}"),
            "not a model request body: no `messages` or `input` array",
        ),
        (
            &["check-call", "--call", "{}"],
            Some("{\"messages\": []}"),
            "--call names no tool: give an OpenAI tool_calls entry",
        ),
        (
            &["check-call", "--call", "{"],
            Some("{\"messages\": []}"),
            "--call is not JSON",
        ),
        (
            &["project", "/no/such/file.json"],
            None,
            "cannot read /no/such/file.json",
        ),
        (
            &["project", "--config", "/no/such/staleguard.toml"],
            Some("{}"),
            "cannot read /no/such/staleguard.toml",
        ),
    ];
    for (args, stdin, needle) in cases {
        let out = run(args, *stdin);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn not_utf8_is_a_clear_error() {
    let mut child = bin()
        .arg("project")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"messages\":[\xff]}")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not UTF-8 (byte 13)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn config_errors_name_the_file_and_the_variable() {
    let dir = std::env::temp_dir().join(format!("staleguard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("staleguard.toml");
    std::fs::write(&file, "receipt_max_bytes = \"big\"\n").unwrap();
    let out = run(&["project", "--config", file.to_str().unwrap()], Some("{}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("staleguard.toml"), "{}", stderr(&out));
    let out = bin()
        .args(["project"])
        .env("BROWSER_EVIDENCE_RETENTION", "sometimes")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("BROWSER_EVIDENCE_RETENTION=\"sometimes\""),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn inspect_lists_evidence_and_explicit_items() {
    let dir = std::env::temp_dir().join(format!("staleguard-ev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let items = dir.join("evidence.json");
    std::fs::write(
        &items,
        r#"[{"source_url":"https://shop.example/confirm","observation":"00000000-0000-4000-8000-000000000003","quote":"Order total: $99"}]"#,
    )
    .unwrap();
    let path = fixture("ankita/order.openai.json");
    let out = run(
        &[
            "inspect",
            "--evidence",
            items.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("evidence: 2 retained"), "{text}");
    assert!(text.contains("Price: $19.99 per widget."), "{text}");
    assert!(
        text.contains("(quote not found in the page text)"),
        "{text}"
    );
    std::fs::write(&items, "{}").unwrap();
    let out = run(
        &[
            "project",
            "--evidence",
            items.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a JSON array of evidence items"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The order session up to (not including) the assistant message that makes `call_id`, and
/// that call as it appears in the request.
fn before_call(fixture_path: &str, call_id: &str) -> (String, String) {
    let body = std::fs::read_to_string(fixture(fixture_path)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let messages = v["messages"].as_array().unwrap().clone();
    let at = messages
        .iter()
        .position(|m| {
            m["tool_calls"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["id"] == call_id))
        })
        .unwrap();
    let call = messages[at]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == call_id)
        .unwrap()
        .to_string();
    v["messages"] = serde_json::Value::Array(messages[..at].to_vec());
    (v.to_string(), call)
}

#[test]
fn check_call_refuses_the_stale_place_order_and_allows_a_live_ref() {
    let (body, call) = before_call("pwmcp-0.0.41/order.openai.json", "call_9");
    let out = run(&["check-call", "--call", &call], Some(&body));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Cancel this order") && text.contains("Place order"),
        "{text}"
    );
    let live = r#"{"type":"tool_use","id":"t1","name":"browser_click","input":{"element":"New order link","ref":"e1"}}"#;
    let out = run(&["check-call", "--call", live], Some(&body));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run(&["check-call", "--call", "{\"x\":1}"], Some(&body));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("names no tool"), "{}", stderr(&out));
}

#[test]
fn inspect_shows_fingerprints_progress_and_verdicts() {
    let path = fixture("pwmcp-0.0.41/invalid_form.openai.json");
    let out = run(&["inspect", "--json", path.to_str().unwrap()], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["stalled"], true);
    let counts: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["no_progress"].as_u64())
        .collect();
    assert_eq!(counts.last(), Some(&3));
    assert!(v["results"][0]["fingerprint"]
        .as_str()
        .is_some_and(|f| f.len() == 8));
    let path = fixture("pwmcp-0.0.41/order.openai.json");
    let out = run(&["inspect", "--json", path.to_str().unwrap()], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let refused = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "refuse")
        .count();
    assert_eq!(refused, 2, "the stale Place order and the repeated one");
    // Each refusal names its kind, as the README and the MCP guard's log do: on Chrome
    // DevTools MCP, a uid after an unseen navigation, a stale uid, a repeated submission.
    let path = fixture("cdmcp-1.11.0/order_inline.openai.json");
    let out = run(&["inspect", "--json", path.to_str().unwrap()], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let kinds: Vec<&str> = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["refusal"].as_str())
        .collect();
    assert_eq!(kinds, ["StaleRef", "RepeatedSubmission"]);
    let table = stdout(&run(&["inspect", path.to_str().unwrap()], None));
    assert!(
        table.contains("refuse   [StaleRef]  staleguard refused this call: ref 6_5"),
        "{table}"
    );
}

/// `archive` lists the observations and reads one back by the ID its receipt shows.
#[test]
fn archive_reads_back_what_a_receipt_names() {
    let order = fixture("pwmcp-0.0.41/order.openai.json");
    let order = order.to_str().expect("path");
    let projected = run(&["project", order], None);
    let body = String::from_utf8_lossy(&projected.stdout).into_owned();
    let at = body.find("observation=").expect("a receipt") + "observation=".len();
    let id = &body[at..at + 8];
    let list = run(&["archive", order], None);
    assert!(list.status.success());
    assert!(String::from_utf8_lossy(&list.stdout).contains(id));
    let old = run(&["archive", order, "--id", id], None);
    assert!(old.status.success());
    let text = String::from_utf8_lossy(&old.stdout);
    assert!(
        text.starts_with("[staleguard archive] STALE observation"),
        "{text}"
    );
    assert!(
        text.contains("Order a widget") && !text.contains("[ref="),
        "{text}"
    );
    let missing = run(&["archive", order, "--id", "00000000"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("without --id lists them"));
    // `--lines` reads the part a fold marker names: those lines of the page alone.
    let whole: Vec<&str> = text.lines().skip(1).collect();
    let part = run(&["archive", order, "--id", id, "--lines", "2-4"], None);
    assert!(part.status.success(), "{}", stderr(&part));
    let part = String::from_utf8_lossy(&part.stdout);
    let (banner, lines) = part.split_once('\n').expect("banner, then lines");
    // The page ends with a line break, which the whole read prints one more of.
    let count = text.trim_end().lines().count() - 1;
    assert!(
        banner.ends_with(&format!("These are its lines 2-4 of {count}.")),
        "{banner}"
    );
    assert_eq!(lines.lines().collect::<Vec<_>>(), whole[1..4]);
    for bad in ["0", "9-3", "x", "1-"] {
        let out = run(&["archive", order, "--id", id, "--lines", bad], None);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(stderr(&out).contains("--lines"), "{bad}: {}", stderr(&out));
    }
    let no_id = run(&["archive", order, "--lines", "2-4"], None);
    assert_eq!(no_id.status.code(), Some(2));
}

/// `inspect` says what became of the cache breakpoint of ours in an Anthropic request, and
/// says so when the client's four left no room (SPEC 9).
#[test]
fn inspect_says_when_there_is_no_room_for_a_breakpoint() {
    let path = fixture("pwmcp-0.0.41/order.anthropic.json");
    let body = std::fs::read_to_string(&path).unwrap();
    let added = run(&["inspect", "--json", "-"], Some(&body));
    assert!(added.status.success(), "{}", stderr(&added));
    let report: serde_json::Value = serde_json::from_slice(&added.stdout).expect("JSON");
    assert_eq!(report["breakpoint"], "added");
    let mut full: serde_json::Value = serde_json::from_str(&body).unwrap();
    full["system"] = serde_json::json!([{"type": "text", "text": "Drive the browser.", "cache_control": {"type": "ephemeral"}}]);
    for tool in full["tools"].as_array_mut().unwrap().iter_mut().take(3) {
        tool["cache_control"] = serde_json::json!({"type": "ephemeral"});
    }
    let full = full.to_string();
    let table = run(&["inspect", "-"], Some(&full));
    assert!(
        stdout(&table).contains("cache breakpoint: no room"),
        "{}",
        stdout(&table)
    );
    let json = run(&["inspect", "--json", "-"], Some(&full));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(report["breakpoint"], "no_room");
    let chat = run(
        &[
            "inspect",
            "--json",
            fixture("pwmcp-0.0.41/order.openai.json").to_str().unwrap(),
        ],
        None,
    );
    let report: serde_json::Value = serde_json::from_slice(&chat.stdout).expect("JSON");
    assert!(report["breakpoint"].is_null());
}

#[test]
fn inspect_says_what_a_lean_live_page_folded() {
    // The catalog's first snapshot as the live page: 55 KB, 300 rows.
    let body: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("pwmcp-0.0.41/long_page.openai.json")).unwrap(),
    )
    .unwrap();
    let mut cut = body.clone();
    cut["messages"].as_array_mut().unwrap().truncate(4);
    let path = std::env::temp_dir().join(format!("staleguard-lean-{}.json", std::process::id()));
    std::fs::write(&path, cut.to_string()).unwrap();
    let inspect = |lean: bool, json: bool| {
        let mut cmd = bin();
        cmd.arg("inspect").arg(&path);
        if json {
            cmd.arg("--json");
        }
        // Lean by default; `whole` sends the page as the server wrote it.
        if !lean {
            cmd.env("STALEGUARD_LIVE_PAGE", "whole");
        }
        let out = cmd.output().expect("runs");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let table = inspect(true, false);
    assert!(table.contains("lean live page at message 3"), "{table}");
    assert!(!inspect(false, false).contains("lean live page"));
    let v: serde_json::Value = serde_json::from_str(&inspect(true, true)).unwrap();
    let page = &v["results"][0];
    assert_eq!(page["status"], "live");
    assert!(page["folded"]["runs"].as_u64().unwrap() >= 1, "{page}");
    assert!(page["bytes_after"].as_u64().unwrap() * 4 < page["bytes_before"].as_u64().unwrap());
    let whole: serde_json::Value = serde_json::from_str(&inspect(false, true)).unwrap();
    assert!(whole["results"][0]["folded"].is_null());
    std::fs::remove_file(&path).ok();
}

/// Issue 41: a task with Chinese right against a URL made `project` exit 101 with a
/// backtrace. Every command that reads the body now answers it.
#[test]
fn a_task_with_chinese_before_a_url_projects_inspects_and_checks() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/unicode/order_zh.openai.json");
    let path = path.to_str().unwrap();
    let projected = run(&["project", path], None);
    assert!(projected.status.success(), "{}", stderr(&projected));
    assert!(stdout(&projected).contains("[staleguard receipt]"));
    assert!(stdout(&projected).contains("打开http://127.0.0.1:8431/order/form.html"));
    let inspected = run(&["inspect", "--json", path], None);
    assert!(inspected.status.success(), "{}", stderr(&inspected));
    let call = r#"{"type": "function", "id": "c", "function": {"name": "browser_click", "arguments": "{\"element\": \"打开https://a.example 按钮\", \"ref\": \"e2\"}"}}"#;
    let checked = run(&["check-call", "--call", call, path], None);
    assert!(
        matches!(checked.status.code(), Some(0 | 3)),
        "{:?}: {}",
        checked.status,
        stderr(&checked)
    );
}
