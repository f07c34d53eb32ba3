//! The replay's measure checked against the reference implementation `tools/cachecost.py`,
//! run with python3 at test time.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::*;

fn facts_file(session: &Path) -> PathBuf {
    let name = session.file_name().unwrap().to_string_lossy().to_string();
    facts_dir().join(format!("{}.txt", name.split('.').next().unwrap()))
}

/// Runs the reference measure on `sessions`. Besides its own strategies it bills `newest-only`
/// over the observations before the live page state (the reference's own `live_state`): its
/// `newest_only` keeps only the newest observation, which with an incremental server (0.0.56)
/// is a diff without the page it updates.
const REFERENCE: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import cachecost as cc

def newest_only_live(body):
    msgs = [dict(m) for m in body["messages"]]
    rs, live = cc.results(body), cc.live_state(body)
    for k in cc.observations(body):
        if k not in live:
            msgs[rs[k][4][0]]["content"] = "[older browser observation omitted; its refs are stale]"
    return dict(body, messages=msgs)

out = []
for arg in sys.argv[3:]:
    path, facts_path = arg.split("::")
    facts = [l.strip() for l in open(facts_path) if l.strip()]
    body = json.load(open(path))
    res, kept, n = cc.session(sys.argv[2], path, facts)
    live = cc.cost(cc.turns(body), newest_only_live)
    out.append({"turns": n, "kept": kept, "answer_index": cc.answer_index(body),
                "messages": len(body["messages"]), "c1_breaks": len(res["staleguard"][3]),
                "live": list(live[:3]),
                **{k: list(v[:3]) for k, v in res.items()}})
print(json.dumps(out))
"#;

fn reference(sessions: &[PathBuf]) -> Vec<Value> {
    let tools = repo().join("tools");
    assert!(
        tools.join("cachecost.py").is_file(),
        "missing the reference measure {}",
        tools.display()
    );
    let args: Vec<String> = sessions
        .iter()
        .map(|s| format!("{}::{}", s.display(), facts_file(s).display()))
        .collect();
    let out = Command::new("python3")
        .arg("-c")
        .arg(REFERENCE)
        .arg(&tools)
        .arg(env!("CARGO_BIN_EXE_staleguard"))
        .args(&args)
        .output()
        .expect("python3 runs the reference measure (install python3)");
    assert!(
        out.status.success(),
        "cachecost.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// [cost, sent bytes, written bytes] of a strategy, as the reference gives them.
fn assert_same(name: &str, ours: &Value, theirs: &Value) {
    let total = &ours["total"];
    let cost = num(&total["cost"]);
    let reference = num(&theirs[0]);
    assert!(
        (cost - reference).abs() <= 1e-9 * reference.max(1.0),
        "{name}: cost {cost} vs the reference's {reference}"
    );
    assert_eq!(total["sent_bytes"], theirs[1], "{name}: sent bytes");
    assert_eq!(total["written_bytes"], theirs[2], "{name}: written bytes");
}

#[test]
fn agrees_with_the_reference_measure() {
    let sessions = vec![
        repo().join("fixtures/pwmcp-0.0.41/order.openai.json"),
        repo().join("fixtures/pwmcp-0.0.56/rerender.openai.json"),
        repo().join("fixtures/pwmcp-0.0.83/research.openai.json"),
        repo().join("fixtures/pwmcp-0.0.30/long_page.openai.json"),
    ];
    let ours = replay(&["--facts-dir", facts_dir().to_str().unwrap()], &sessions);
    let theirs = reference(&sessions);
    for ((path, ours), theirs) in sessions.iter().zip(&ours).zip(&theirs) {
        let name = path.display().to_string();
        assert_eq!(ours["cache_model"], "prefix", "{name}: OpenAI bodies");
        assert_eq!(ours["turns"], theirs["turns"], "{name}: turns");
        assert_same(&name, strategy(ours, "none"), &theirs["none"]);
        assert_same(&name, strategy(ours, "staleguard"), &theirs["staleguard"]);
        assert_same(&name, strategy(ours, "newest-only"), &theirs["live"]);
        if !name.contains("0.0.56") {
            // One full tree per page: the reference's own newest-only is the same.
            assert_same(&name, strategy(ours, "newest-only"), &theirs["newest-only"]);
        }
        // Frozen history is checked up to the live page state itself (the reference stops
        // one message earlier), so it finds every break the reference finds.
        let breaks = strategy(ours, "staleguard")["frozen_history_broken"]
            .as_array()
            .unwrap()
            .len();
        assert!(
            breaks as u64 >= theirs["c1_breaks"].as_u64().unwrap(),
            "{name}"
        );
        // Facts: in the same request as the reference; only tool results count here, where
        // the reference also reads the messages, so ours are a subset of its.
        let facts = ours["facts"].as_array().unwrap();
        assert!(!facts.is_empty(), "{name}: no facts read");
        for fact in facts {
            let text = fact["fact"].as_str().unwrap();
            let expected = match fact["needed_in"].as_str().unwrap() {
                "answer" => &theirs["answer_index"],
                _ => &theirs["messages"],
            };
            assert_eq!(&fact["request_messages"], expected, "{name}: {text}");
            let kept = theirs["kept"].as_array().unwrap();
            if present(fact, "staleguard") {
                assert!(kept.iter().any(|k| k == text), "{name}: {text}");
            }
        }
    }
}
