//! Observations as agents get them today (SPEC 1, SPEC 5): snapshot files read back
//! through the agent's own file and shell tools, partial views (`browser_find`, targeted
//! and depth-limited snapshots), selectors as targets, page reports without a tree, and a
//! guard that reads the call's description.
//!
//! The read-back sessions are built from the real Playwright MCP 0.0.83 recordings: after
//! every result that links its snapshot file, the agent reads that file (the recording
//! keeps it) with Claude Code's `Read` (both numberings), `Bash` `cat`, Gemini CLI's
//! `read_file` or opencode's `read`, in both OpenAI and Anthropic bodies.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use staleguard::{Engine, Options, RequestFormat, Status, Verdict, RECEIPT_TAG};
use support::*;

/// How an agent reads a file back, and what its tool prints.
#[derive(Debug, Clone, Copy)]
enum Reader {
    ClaudeArrow,
    ClaudeTab,
    BashCat,
    GeminiReadFile,
    OpencodeRead,
}

const READERS: [Reader; 5] = [
    Reader::ClaudeArrow,
    Reader::ClaudeTab,
    Reader::BashCat,
    Reader::GeminiReadFile,
    Reader::OpencodeRead,
];

impl Reader {
    fn tool(self) -> &'static str {
        match self {
            Reader::ClaudeArrow | Reader::ClaudeTab => "Read",
            Reader::BashCat => "Bash",
            Reader::GeminiReadFile => "read_file",
            Reader::OpencodeRead => "read",
        }
    }

    fn arguments(self, path: &str) -> Value {
        match self {
            Reader::ClaudeArrow | Reader::ClaudeTab => json!({"file_path": path}),
            Reader::BashCat => {
                json!({"command": format!("cat {path}"), "description": "Read the snapshot"})
            }
            Reader::GeminiReadFile => json!({"absolute_path": path}),
            Reader::OpencodeRead => json!({"filePath": path}),
        }
    }

    fn output(self, file: &str) -> String {
        let numbered = |f: &dyn Fn(usize, &str) -> String| -> Vec<String> {
            file.lines().enumerate().map(|(i, l)| f(i + 1, l)).collect()
        };
        match self {
            Reader::ClaudeArrow => numbered(&|n, l| format!("{n:>6}\u{2192}{l}")).join("\n"),
            Reader::ClaudeTab => numbered(&|n, l| format!("{n:>6}\t{l}")).join("\n"),
            Reader::BashCat | Reader::GeminiReadFile => file.to_string(),
            Reader::OpencodeRead => {
                let lines = numbered(&|n, l| format!("{n:05}| {l}")).join("\n");
                let total = file.lines().count();
                format!("<file>\n{lines}\n\n(End of file - total {total} lines)\n</file>")
            }
        }
    }
}

fn scenarios() -> Vec<PathBuf> {
    let dir = fixtures().join("pwmcp-0.0.83");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".openai.json"))
        .collect();
    found.sort();
    assert!(found.len() >= 6, "{found:?}");
    found
}

/// The snapshot file a result links, if any.
fn linked(text: &str) -> Option<&str> {
    let at = text.find("- [Snapshot](")? + "- [Snapshot](".len();
    let rest = &text[at..];
    Some(&rest[..rest.find(')')?])
}

fn artifact(scenario: &Path, link: &str) -> String {
    let name = scenario
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.trim_end_matches(".openai.json");
    read(
        &scenario
            .with_file_name(format!("{stem}.artifacts"))
            .join(link),
    )
}

/// One read inserted into a session: its call ID and the file's text.
struct Inserted {
    id: String,
    file: String,
}

/// `body` (OpenAI Chat) with a read of every linked snapshot file after the results that
/// link it, cut after the last read when `cut`; and the reads, in order.
fn with_reads_chat(scenario: &Path, reader: Reader, cut: bool) -> (String, Vec<Inserted>) {
    // Reads go after the run of tool messages that linked them, never inside it.
    let links_after = |messages: &[Value], i: usize| {
        if messages.get(i + 1).is_some_and(|m| m["role"] == "tool") {
            return Vec::new();
        }
        let run = messages[..=i]
            .iter()
            .rev()
            .take_while(|m| m["role"] == "tool");
        let mut links: Vec<String> = run
            .filter_map(|m| linked(m["content"].as_str().unwrap_or("")).map(str::to_string))
            .collect();
        links.reverse();
        links
    };
    let read_messages = |id: &str, args: Value, output: String| {
        [
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                "function": {"name": reader.tool(), "arguments": args.to_string()}}]}),
            json!({"role": "tool", "tool_call_id": id, "content": output}),
        ]
    };
    with_reads(scenario, scenario, reader, cut, links_after, read_messages)
}

/// The same session as an Anthropic body: `tool_use` and `tool_result` blocks.
fn with_reads_anthropic(scenario: &Path, reader: Reader, cut: bool) -> (String, Vec<Inserted>) {
    let name = scenario
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let path = scenario.with_file_name(name.replace(".openai.", ".anthropic."));
    let links_after = |messages: &[Value], i: usize| {
        let results = messages[i]["content"].as_array().into_iter().flatten();
        results
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| {
                linked(&content_text(&json!({"content": b["content"]}))).map(str::to_string)
            })
            .collect()
    };
    let read_messages = |id: &str, input: Value, output: String| {
        [
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": reader.tool(), "input": input}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
        ]
    };
    with_reads(scenario, &path, reader, cut, links_after, read_messages)
}

/// The body at `path` with, after message `i`, a read of each file `links_after` names
/// (the two messages `read_messages` writes), cut after the last read when `cut`.
fn with_reads(
    scenario: &Path,
    path: &Path,
    reader: Reader,
    cut: bool,
    links_after: impl Fn(&[Value], usize) -> Vec<String>,
    read_messages: impl Fn(&str, Value, String) -> [Value; 2],
) -> (String, Vec<Inserted>) {
    let mut body: Value = serde_json::from_str(&read(path)).expect("JSON");
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let (mut out, mut reads, mut last_read) = (Vec::new(), Vec::new(), 0);
    for (i, message) in messages.iter().enumerate() {
        out.push(message.clone());
        for link in links_after(&messages, i) {
            let id = format!("read_{}", reads.len() + 1);
            let file = artifact(scenario, &link);
            let args = reader.arguments(&format!("/work/agent/{link}"));
            out.extend(read_messages(&id, args, reader.output(&file)));
            reads.push(Inserted { id, file });
            last_read = out.len();
        }
    }
    if cut {
        out.truncate(last_read);
    }
    body["messages"] = Value::Array(out);
    (body.to_string(), reads)
}

/// Every `[ref=X]` of a tree.
fn refs_of(tree: &str) -> Vec<String> {
    tree.match_indices("[ref=")
        .filter_map(|(at, _)| {
            let rest = &tree[at + 5..];
            Some(rest[..rest.find(']')?].to_string())
        })
        .collect()
}

fn result_texts(body: &str) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(body).expect("JSON");
    let mut out = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            out.push((
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                content_text(m),
            ));
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                let text = content_text(&json!({"content": b["content"]}));
                out.push((b["tool_use_id"].as_str().unwrap_or("").to_string(), text));
            }
        }
    }
    out
}

/// Every recorded scenario read back by every reader, in OpenAI Chat and Anthropic bodies cut
/// after each read: what it is, the reader, the format, the body and its reads.
fn read_back_cases() -> Vec<(String, Reader, RequestFormat, String, Vec<Inserted>)> {
    let mut cases = Vec::new();
    for scenario in scenarios() {
        for reader in READERS {
            for (format, build) in [
                (
                    RequestFormat::OpenAiChat,
                    with_reads_chat as fn(&Path, Reader, bool) -> (String, Vec<Inserted>),
                ),
                (RequestFormat::Anthropic, with_reads_anthropic),
            ] {
                let what = format!("{} {reader:?} {format:?}", scenario.display());
                let (body, reads) = build(&scenario, reader, true);
                cases.push((what, reader, format, body, reads));
            }
        }
    }
    cases
}

#[test]
fn every_read_of_an_older_page_collapses_and_the_newest_stays() {
    let (mut sessions, mut reads_seen, mut collapsed_reads) = (0, 0, 0);
    for (what, reader, format, body, reads) in read_back_cases() {
        assert!(reads.len() >= 2, "{what}: {} reads", reads.len());
        let p = project_on(&body, format).unwrap_or_else(|e| panic!("{what}: {e}"));
        sessions += 1;
        let report = p.report();
        let of_reads: Vec<_> = report
            .results
            .iter()
            .filter(|r| &*r.tool == reader.tool())
            .collect();
        assert_eq!(of_reads.len(), reads.len(), "{what}: every read is a page");
        let (last, older) = of_reads.split_last().expect("reads");
        assert_eq!(last.status, Status::Live, "{what}: the newest read is live");
        let sent = result_texts(&body);
        let got = result_texts(&p.body);
        for (read, result) in reads.iter().zip(&of_reads) {
            let after = &got.iter().find(|(id, _)| *id == read.id).expect("result").1;
            let before = &sent
                .iter()
                .find(|(id, _)| *id == read.id)
                .expect("result")
                .1;
            reads_seen += 1;
            if std::ptr::eq(*result, *last) {
                // Guidance may follow it; its own bytes are sent as they were.
                assert!(
                    after.starts_with(before.as_str()),
                    "{what}: the newest read is sent as it was"
                );
                continue;
            }
            assert_eq!(result.status, Status::Collapsed, "{what}: {}", read.id);
            assert!(after.starts_with(RECEIPT_TAG), "{what}: {after}");
            assert!(!after.contains("[ref="), "{what}: a ref survives: {after}");
            assert!(
                after.contains("url=\"http://127.0.0.1:8431/"),
                "{what}: the receipt names the page: {after}"
            );
            collapsed_reads += 1;
        }
        assert!(
            older.iter().all(|r| r.status == Status::Collapsed),
            "{what}"
        );
        check_guard(&body, format, reads.as_slice(), &what);
    }
    eprintln!("{sessions} sessions, {reads_seen} reads recognised, {collapsed_reads} collapsed");
    assert!(collapsed_reads > 0);
}

/// SPEC 2, idempotence, on read-back pages (found by the `page_by_content` fuzz target): a
/// read that collapsed is a receipt with no ref in it, and projecting the projected body
/// again must still take it as that step; otherwise the newest page moves back one result
/// and an Anthropic body gets a second breakpoint.
#[test]
fn a_projected_read_back_session_projects_to_itself() {
    let mut checked = 0;
    for (what, reader, format, body, _) in read_back_cases() {
        let p = project_on(&body, format).unwrap_or_else(|e| panic!("{what}: {e}"));
        let again = project_on(&p.body, format).unwrap_or_else(|e| panic!("{what}: {e}"));
        let reads = |p: &staleguard::Projection| {
            let report = p.report();
            (report.results.iter())
                .filter(|r| &*r.tool == reader.tool())
                .map(|r| (r.call_id.clone(), r.status))
                .collect::<Vec<_>>()
        };
        assert_eq!(reads(&again), reads(&p), "{what}: the same reads are steps");
        assert_eq!(again.body, p.body, "{what}: idempotent");
        checked += 1;
    }
    assert!(checked > 0);
}

/// A ref seen only in an older read is refused; one in the newest read is allowed.
fn check_guard(body: &str, format: RequestFormat, reads: &[Inserted], what: &str) {
    let engine = Engine::new(on());
    let (newest, older) = reads.split_last().expect("reads");
    let live = refs_of(&newest.file);
    let stale = older
        .iter()
        .rev()
        .flat_map(|r| refs_of(&r.file))
        .find(|r| !live.contains(r));
    let click = |id: &str| json!({"element": "the element", "target": id}).to_string();
    let allowed = engine
        .check_call(body, format, "browser_click", &click(&live[live.len() / 2]))
        .expect("verdict");
    assert!(allowed.is_allowed(), "{what}: {allowed:?}");
    if let Some(stale) = stale {
        let refused = engine
            .check_call(body, format, "browser_click", &click(&stale))
            .expect("verdict");
        assert!(
            matches!(refused, Verdict::Refuse { .. }),
            "{what}: {stale} {refused:?}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// The new recordings: browser_find, targeted snapshots, selectors, page reports, the otp page

fn agents_recording(name: &str) -> PathBuf {
    fixtures().join("pwmcp-0.0.83-agents").join(name)
}

/// Each browser call of an OpenAI body with its arguments and whether its result failed.
fn calls(body: &str) -> Vec<(usize, String, String, bool)> {
    let v: Value = serde_json::from_str(body).expect("JSON");
    let messages = v["messages"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or("");
            let result = messages
                .iter()
                .find(|r| r["tool_call_id"] == id)
                .map(content_text)
                .unwrap_or_default();
            let failed = result.starts_with("### Error") || result.starts_with("Error");
            let f = &c["function"];
            out.push((
                i,
                f["name"].as_str().unwrap_or("").to_string(),
                f["arguments"].as_str().unwrap_or("").to_string(),
                failed,
            ));
        }
    }
    out
}

/// `(tool, arguments, worked, verdict)` of every browser call of a recording, in order.
fn judged(body: &str) -> Vec<(String, String, bool, Verdict)> {
    let p = staleguard::project(
        body,
        RequestFormat::OpenAiChat,
        &on(),
        Options {
            verdicts: true,
            ..Options::default()
        },
    )
    .expect("projects");
    let calls = calls(body);
    assert_eq!(
        calls.len(),
        p.verdicts.len(),
        "one verdict per browser call"
    );
    calls
        .into_iter()
        .zip(p.verdicts)
        .map(|((m, tool, args, failed), v)| {
            assert_eq!((m, &tool), (v.message, &v.tool));
            (tool, args, !failed, v.verdict)
        })
        .collect()
}

#[test]
fn calls_that_worked_on_partial_views_and_page_reports_are_allowed() {
    for name in ["find_target.openai.json", "page_reports.openai.json"] {
        let body = read(&agents_recording(name));
        for (tool, args, worked, verdict) in judged(&body) {
            if worked {
                assert!(
                    verdict.is_allowed(),
                    "{name}: {tool} {args} worked and was refused: {verdict:?}"
                );
            }
        }
    }
}

#[test]
fn a_description_that_names_another_element_is_refused() {
    let body = read(&agents_recording("otp_mismatch.openai.json"));
    let judged = judged(&body);
    let refused: Vec<_> = judged.iter().filter(|(.., v)| !v.is_allowed()).collect();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    let (tool, args, _, verdict) = refused[0];
    assert_eq!(tool, "browser_click");
    assert!(args.contains("Verify & Sign In"), "{args}");
    let Verdict::Refuse { message, .. } = verdict else {
        unreachable!()
    };
    assert!(
        message.contains("\"Resend in 39s\", not \"Verify & Sign In button\""),
        "{message}"
    );
}

/// Every call of every recording that carried its own description: how many the description
/// rule examined, and that it refused only calls that acted on another element than the one
/// described: the recorded mismatch, and two clicks (Playwright MCP 0.0.41, documentation
/// sets) described as a section's link ("7.1 Invoking the msgmerge Program link") with the
/// ref of its chapter's, which the server clicked instead (its code names the chapter).
#[test]
fn the_description_rule_refuses_nothing_that_worked() {
    // (recording, the element the server clicked, as its code names it)
    const ACTED_ON_ANOTHER: &[(&str, &str)] = &[
        ("otp_mismatch.openai.json", "getByText('Resend in 39s')"),
        (
            "gettext-fuzzy_entries.openai.json",
            "getByRole('link', { name: 'Producing Binary MO Files' })",
        ),
        (
            "gettext-msgmerge_update.openai.json",
            "getByRole('link', { name: 'Updating Existing PO Files' })",
        ),
    ];
    let mut bodies = Vec::new();
    collect_openai(&fixtures(), &mut bodies);
    let (mut examined, mut refused) = (0, 0);
    for path in &bodies {
        let body = read(path);
        let Ok(p) = staleguard::project(
            &body,
            RequestFormat::Auto,
            &on(),
            Options {
                verdicts: true,
                ..Options::default()
            },
        ) else {
            continue;
        };
        for (call, v) in calls(&body).iter().zip(&p.verdicts) {
            let described = call.2.contains("\"element\"") || call.2.contains("\"fields\"");
            examined += usize::from(described);
            if let Verdict::Refuse { message, .. } = &v.verdict {
                if message.contains(", not \"") {
                    refused += 1;
                    let name = path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or_default();
                    let clicked = ACTED_ON_ANOTHER.iter().find(|(n, _)| *n == name);
                    let Some((_, clicked)) = clicked else {
                        panic!("{}: {message}", path.display());
                    };
                    assert!(body.contains(clicked), "{}: {clicked}", path.display());
                }
            }
        }
    }
    eprintln!(
        "{examined} described calls examined in {} recordings, {refused} refused",
        bodies.len()
    );
    assert_eq!(refused, ACTED_ON_ANOTHER.len());
    assert!(examined > 50, "{examined}");
}

fn collect_openai(dir: &Path, found: &mut Vec<PathBuf>) {
    for path in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
    {
        let name = path.to_string_lossy().to_string();
        if path.is_dir() && !name.ends_with(".artifacts") {
            collect_openai(&path, found);
        } else if name.ends_with(".openai.json") {
            found.push(path);
        }
    }
    found.sort();
}

#[test]
fn a_targeted_snapshot_refines_the_page_and_a_newer_full_tree_supersedes_it() {
    let body = read(&agents_recording("find_target.openai.json"));
    let p = project_on(&body, RequestFormat::OpenAiChat).expect("projects");
    let statuses: Vec<_> = p
        .report()
        .results
        .iter()
        .map(|r| (&*r.tool, r.status))
        .collect();
    // The find result and both partial snapshots collapse once a full tree follows.
    assert!(
        statuses.contains(&("browser_find", Status::Collapsed)),
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|(_, s)| *s == Status::Live).count(),
        1,
        "{statuses:?}"
    );
    // Cut after the depth-limited snapshot: the find result is gone (the click after it
    // linked a new tree), and the targeted and depth-limited snapshots are live together.
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let messages = v["messages"].as_array().cloned().unwrap_or_default();
    let depth = messages
        .iter()
        .position(|m| {
            m["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .is_some_and(|a| a.contains("\"depth\""))
        })
        .expect("a depth-limited snapshot");
    let mut cut = v.clone();
    cut["messages"] = Value::Array(messages[..depth + 2].to_vec());
    let p = project_on(&cut.to_string(), RequestFormat::OpenAiChat).expect("projects");
    let statuses: Vec<_> = p
        .report()
        .results
        .iter()
        .map(|r| (&*r.tool, r.status))
        .collect();
    let live: Vec<_> = statuses
        .iter()
        .filter(|(_, s)| *s == Status::Live)
        .collect();
    assert_eq!(live.len(), 2, "{statuses:?}");
    assert!(
        statuses.contains(&("browser_find", Status::Collapsed)),
        "{statuses:?}"
    );
}

/// An older snapshot file read again after a newer one is an old page: it collapses, the
/// newest page stays live, and its refs are stale (SPEC 1: the file's stamp orders it).
#[test]
fn an_older_file_read_again_is_no_newer_page() {
    let scenario = fixtures().join("pwmcp-0.0.83/order.openai.json");
    let (body, reads) = with_reads_chat(&scenario, Reader::ClaudeArrow, true);
    let mut v: Value = serde_json::from_str(&body).expect("JSON");
    let messages = v["messages"].as_array_mut().expect("messages");
    // Read the first file once more, after everything.
    let mut again = messages
        .iter()
        .find(|m| m["tool_calls"][0]["id"] == reads[0].id)
        .cloned()
        .expect("the first read");
    again["tool_calls"][0]["id"] = json!("read_again");
    messages.push(again);
    messages.push(json!({"role": "tool", "tool_call_id": "read_again", "content": Reader::ClaudeArrow.output(&reads[0].file)}));
    let body = v.to_string();
    let p = project_on(&body, RequestFormat::OpenAiChat).expect("projects");
    let results = &p.report().results;
    let last = results.last().expect("results");
    assert_eq!(
        last.status,
        Status::Collapsed,
        "the old file read again collapses"
    );
    let newest = results
        .iter()
        .rev()
        .find(|r| r.status == Status::Live)
        .expect("a live page");
    assert_eq!(
        newest.call_id.as_deref(),
        Some(reads.last().expect("reads").id.as_str())
    );
    // A ref only in the old file is refused; one in the newest is allowed.
    let live = refs_of(&reads.last().expect("reads").file);
    let stale = refs_of(&reads[0].file)
        .into_iter()
        .find(|r| !live.contains(r))
        .expect("a stale ref");
    let engine = Engine::new(on());
    let click = |id: &str| json!({"element": "the element", "target": id}).to_string();
    let verdict = engine
        .check_call(
            &body,
            RequestFormat::OpenAiChat,
            "browser_click",
            &click(&stale),
        )
        .expect("verdict");
    assert!(!verdict.is_allowed(), "{stale}: {verdict:?}");
    let verdict = engine
        .check_call(
            &body,
            RequestFormat::OpenAiChat,
            "browser_click",
            &click(&live[1]),
        )
        .expect("verdict");
    assert!(verdict.is_allowed(), "{verdict:?}");
}

/// Turn by turn with one memo (as the proxy runs), a read-back session answers as it does
/// cold: the page that linked a file and the stamps that order files may lie before a
/// checkpoint, so the memo must not change a receipt.
#[test]
fn read_back_sessions_answer_the_same_with_a_memo() {
    for scenario in scenarios() {
        for (format, build) in [
            (
                RequestFormat::OpenAiChat,
                with_reads_chat as fn(&Path, Reader, bool) -> (String, Vec<Inserted>),
            ),
            (RequestFormat::Anthropic, with_reads_anthropic),
        ] {
            let (body, _) = build(&scenario, Reader::ClaudeTab, false);
            let memo = staleguard::Memo::default();
            let n = messages(&body).len();
            for k in 1..=n {
                let request = truncate(&body, k);
                let cold = staleguard::project(&request, format, &on(), Options::default())
                    .expect("projects");
                let with_memo = Options {
                    memo: Some(&memo),
                    ..Options::default()
                };
                let warm =
                    staleguard::project(&request, format, &on(), with_memo).expect("projects");
                let what = format!("{} {format:?} turn {k}", scenario.display());
                assert_eq!(cold.body, warm.body, "{what}");
                assert_eq!(cold.report(), warm.report(), "{what}");
            }
        }
    }
}

/// Each client's spelling of Playwright MCP's tools, written into recorded sessions: the
/// default tool set sees the same pages, collapses the same results and gives the same
/// verdicts as with the bare names.
#[test]
fn every_client_form_of_a_tool_name_is_recognised() {
    let clients = [
        ("Claude Code", "mcp__playwright__"),
        ("Gemini CLI", "mcp_playwright_"),
        ("server__tool", "playwright__"),
        ("opencode", "playwright_"),
    ];
    for version in ["pwmcp-0.0.41", "pwmcp-0.0.83"] {
        for name in ["order", "tabs_iframe"] {
            let body = read(&fixtures().join(format!("{version}/{name}.openai.json")));
            let seen = |body: &str| {
                let options = Options {
                    verdicts: true,
                    ..Options::default()
                };
                let p = staleguard::project(body, RequestFormat::OpenAiChat, &on(), options)
                    .expect("projects");
                let statuses: Vec<Status> = p.report().results.iter().map(|r| r.status).collect();
                let verdicts: Vec<bool> =
                    p.verdicts.iter().map(|v| v.verdict.is_allowed()).collect();
                (statuses, verdicts)
            };
            let bare = seen(&body);
            assert!(bare.0.contains(&Status::Collapsed), "{version}/{name}");
            for (client, prefix) in clients {
                let renamed = body.replace("\"browser_", &format!("\"{prefix}browser_"));
                assert_ne!(renamed, body);
                assert_eq!(seen(&renamed), bare, "{client}: {version}/{name}");
            }
        }
    }
}

/// Codex's spelling: in a Responses body a call to an MCP tool gives the tool's own name and
/// its server's namespace apart (`"namespace": "mcp__playwright", "name": "browser_click"`),
/// and the tools come in a `namespace` tool. The default tool set sees the same pages,
/// collapses the same results and gives the same verdicts as with the bare names, and a tool
/// set that names only the server (`mcp__playwright__*`) sees them too.
#[test]
fn codex_namespaced_calls_are_recognised() {
    let seen = |body: &str, config: &staleguard::Config| {
        let options = Options {
            verdicts: true,
            ..Options::default()
        };
        let p =
            staleguard::project(body, RequestFormat::Responses, config, options).expect("projects");
        let statuses: Vec<Status> = p.report().results.iter().map(|r| r.status).collect();
        let verdicts: Vec<bool> = p.verdicts.iter().map(|v| v.verdict.is_allowed()).collect();
        (statuses, verdicts)
    };
    let server_only = staleguard::Config {
        browser_tools: vec!["mcp__playwright__*".into()],
        ..on()
    };
    for version in ["pwmcp-0.0.41", "pwmcp-0.0.83"] {
        for name in ["order", "tabs_iframe"] {
            let chat = read(&fixtures().join(format!("{version}/{name}.openai.json")));
            let bare = support::formats::chat_to_responses(&chat);
            let mut codex: Value = serde_json::from_str(&bare).expect("JSON");
            for item in codex["input"].as_array_mut().expect("input") {
                if item["type"] == "function_call" {
                    item["namespace"] = json!("mcp__playwright");
                }
            }
            let codex = codex.to_string();
            let want = seen(&bare, &on());
            assert!(want.0.contains(&Status::Collapsed), "{version}/{name}");
            assert_eq!(seen(&codex, &on()), want, "{version}/{name}");
            assert_eq!(seen(&codex, &server_only), want, "{version}/{name}");
            assert_ne!(seen(&bare, &server_only), want, "{version}/{name}");
        }
    }
}
