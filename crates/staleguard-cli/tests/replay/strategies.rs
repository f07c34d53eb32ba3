//! What two strategies send: `newest-only`'s one-line placeholder for every older
//! observation, and `clear-oldest-3`'s rewrite of old history once triggered.

use serde_json::Value;

use crate::common;
use crate::harness::*;

const PLACEHOLDER: &str = "[older browser observation omitted; its refs are stale]";

/// The tool results of a request: (call ID, text) in order, for both formats.
fn results(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        if m["role"] == "tool" {
            out.push((
                m["tool_call_id"].as_str().unwrap().into(),
                common::text_of(&m["content"]),
            ));
        }
        for part in m["content"].as_array().into_iter().flatten() {
            if part["type"] == "tool_result" {
                out.push((
                    part["tool_use_id"].as_str().unwrap().into(),
                    common::text_of(&part["content"]),
                ));
            }
        }
    }
    out
}

#[test]
fn newest_only_replaces_every_older_observation_with_one_line() {
    let dir = scratch("newest-only");
    for session in [
        repo().join("fixtures/pwmcp-0.0.41/order.openai.json"),
        repo().join("fixtures/pwmcp-0.0.41/order.anthropic.json"),
        repo().join("fixtures/pwmcp-0.0.83/rerender.openai.json"),
    ] {
        let out = run(
            &["--save-requests", dir.to_str().unwrap()],
            std::slice::from_ref(&session),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let saved = dir.join(session.file_name().unwrap());
        let turns = std::fs::read_dir(&saved)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".none.json")
            })
            .count();
        assert!(turns > 5, "{}", saved.display());
        for turn in 1..=turns {
            let read = |strategy: &str| -> Value {
                let file = saved.join(format!("turn-{turn:02}.{strategy}.json"));
                serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
            };
            let (original, sent) = (results(&read("none")), results(&read("newest-only")));
            assert_eq!(original.len(), sent.len());
            // An observation: a non-failed result with a page tree (refs) in it.
            let is_page = |t: &str| t.contains("[ref=") && !t.contains("Error:");
            let newest = original.iter().rposition(|(_, t)| is_page(t));
            for (i, ((id, before), (sent_id, after))) in original.iter().zip(&sent).enumerate() {
                assert_eq!(id, sent_id, "call IDs stay");
                if is_page(before) && Some(i) != newest {
                    assert_eq!(after, PLACEHOLDER, "{session:?} turn {turn}: {id}");
                } else {
                    assert_eq!(after, before, "{session:?} turn {turn}: {id} untouched");
                }
            }
            assert!(!PLACEHOLDER.contains('\n'));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn clear_oldest_rewrites_old_history_when_triggered() {
    let path = repo().join("fixtures/pwmcp-0.0.41/order.openai.json");
    let v = &replay(&["--trigger-tokens", "1000"], std::slice::from_ref(&path))[0];
    let cleared = strategy(v, "clear-oldest-3");
    assert!(
        !cleared["frozen_history_broken"]
            .as_array()
            .unwrap()
            .is_empty(),
        "clear-oldest-3 rewrites old history: {cleared}"
    );
    assert!(
        num(&cleared["total"]["written_bytes"])
            > num(&strategy(v, "none")["total"]["written_bytes"])
    );
    let untriggered = &replay(&[], &[path])[0];
    assert_eq!(
        strategy(untriggered, "clear-oldest-3")["total"],
        strategy(untriggered, "none")["total"],
        "default trigger is 100,000 tokens"
    );
}
