//! Property tests of SPEC 2 over transcripts generated from real recorded tool results.

mod support;

use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{json, Value};
use support::*;

/// Every (tool name, result text) pair of the recorded sessions, plus a non-browser
/// result that mentions refs.
fn pool() -> &'static Vec<(String, String)> {
    static POOL: OnceLock<Vec<(String, String)>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool = vec![(
            "read_file".to_string(),
            "notes\n- [ref=e7] was Place order".to_string(),
        )];
        for path in openai_fixtures() {
            if path.to_string_lossy().contains("long_page") {
                continue; // size, not variety
            }
            let msgs = messages(&read(&path));
            let mut names = std::collections::HashMap::new();
            for m in &msgs {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    names.insert(
                        c["id"].as_str().unwrap_or("").to_string(),
                        c["function"]["name"].as_str().unwrap_or("").to_string(),
                    );
                }
                if m["role"] == "tool" {
                    let id = m["tool_call_id"].as_str().unwrap_or("");
                    if let (Some(name), Some(text)) = (names.get(id), m["content"].as_str()) {
                        pool.push((name.clone(), text.to_string()));
                    }
                }
            }
        }
        assert!(
            pool.len() > 100,
            "pool of real results too small: {}",
            pool.len()
        );
        pool
    })
}

/// A session: steps of (pool index, call id number), with duplicate ids possible.
fn build(steps: &[(usize, u8)]) -> String {
    let pool = pool();
    let mut messages = vec![json!({"role": "user", "content": "do the task"})];
    for &(i, id) in steps {
        let (name, text) = &pool[i % pool.len()];
        let id = format!("call_{id}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
    }
    json!({"model": "gpt-4.1", "messages": messages, "tools": []}).to_string()
}

fn steps() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), 0u8..12), 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn invariants_hold(steps in steps()) {
        let body = build(&steps);
        let p = project(&body);
        check_invariants(&body, &p);
        // Only one page state is live, and it is the newest observation's.
        let live = live_message(&p);
        let collapsed_after_live = p.report().results.iter().any(|r| {
            r.status == staleguard::Status::Collapsed && live.is_some_and(|l| r.message > l)
        });
        prop_assert!(!collapsed_after_live);
    }

    #[test]
    fn prefix_stable(steps in steps(), cut in any::<prop::sample::Index>()) {
        let body = build(&steps);
        let n = messages(&body).len();
        let k = 1 + cut.index(n);
        let a = project(&truncate(&body, k));
        let b = project(&body);
        check_prefix_stable(&a, &b);
    }

    #[test]
    fn trimming_the_front_keeps_receipts(steps in steps(), drop in 1usize..6) {
        // Receipts name the observation itself, so trimming history keeps their lines. (The
        // quotes after them were chosen from the transcript, which trimming changed, and the
        // full stale notice moves to the oldest receipt left: once per request.)
        let body = build(&steps);
        let full = project(&body);
        let mut v: Value = serde_json::from_str(&body).unwrap();
        let list = v["messages"].as_array_mut().unwrap();
        let drop = (drop * 2).min(list.len().saturating_sub(1));
        list.drain(1..1 + drop);
        let trimmed = project(&v.to_string());
        let receipts = |p: &staleguard::Projection| -> Vec<String> {
            messages(&p.body)
                .iter()
                .map(content_text)
                .filter(|t| t.starts_with("[staleguard receipt]"))
                .map(|t| t.lines().next().unwrap_or_default().to_string())
                .collect()
        };
        for p in [&full, &trimmed] {
            let notices = p.body.matches(staleguard::STALE_NOTICE).count();
            prop_assert!(notices <= 1, "{} stale notices", notices);
        }
        let (rf, rt) = (receipts(&full), receipts(&trimmed));
        for r in &rt {
            prop_assert!(rf.contains(r), "receipt changed after trimming: {}", r);
        }
    }
}

/// A case the property found (CI, seed unknown): no observation is live in the shorter
/// request, so stall guidance sat on its newest browser result, a tab list, and moved on.
/// Every cut of that session keeps the frozen history.
#[test]
fn prefix_stable_when_no_observation_is_live() {
    let steps = [
        (15129652489992062342, 0),
        (9678736907427883529, 0),
        (2767691380044700676, 0),
        (3576240124939854601, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (414996138, 0),
    ];
    let body = build(&steps);
    let b = project(&body);
    for k in 1..=messages(&body).len() {
        check_prefix_stable(&project(&truncate(&body, k)), &b);
    }
}

/// A regression found by `prefix_stable`: with no observation in the request and a failed
/// newest result, guidance had ridden on an older result and moved when the session went on.
#[test]
fn guidance_stays_put_without_a_live_page() {
    let steps = [
        (8347818668876566493usize, 0u8),
        (2622975483902179674, 0),
        (4050212629517068971, 0),
        (9224260211485195543, 0),
        (0, 0),
        (1, 0),
    ];
    let body = build(&steps);
    let n = messages(&body).len();
    let full = project(&body);
    for k in 1..n {
        check_prefix_stable(&project(&truncate(&body, k)), &full);
    }
}
