//! Anthropic's breakpoint rules: a request reads the cache only at its breakpoints, back at
//! most 20 blocks, while the entry lives, and with at most 4 breakpoints.

use serde_json::{json, Value};

use crate::harness::*;

fn turns<'a>(session: &'a Value, name: &str) -> &'a Vec<Value> {
    strategy(session, name)["turns"].as_array().unwrap()
}

/// An Anthropic session: a task, then `steps` model turns of `calls` browser calls each
/// (one tool_use block and one tool_result block a call), a final answer and a follow-up.
fn anthropic_session(steps: usize, calls: usize, system: Value) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Look through the catalogue."})];
    for step in 0..steps {
        let ids: Vec<String> = (0..calls).map(|c| format!("toolu_{step}_{c}")).collect();
        let uses: Vec<Value> = ids
            .iter()
            .map(|id| json!({"type": "tool_use", "id": id, "name": "browser_evaluate", "input": {"function": "() => 1"}}))
            .collect();
        let results: Vec<Value> = ids
            .iter()
            .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": format!("### Result\nvalue {id} {}", "x".repeat(200))}))
            .collect();
        messages.push(json!({"role": "assistant", "content": uses}));
        messages.push(json!({"role": "user", "content": results}));
    }
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
    messages.push(json!({"role": "user", "content": "Thanks. Anything else?"}));
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": system,
        "tools": [{"name": "browser_evaluate", "description": "Run JavaScript", "input_schema": {"type": "object"}}],
        "messages": messages,
    })
}

fn bills(session: &Value) -> Vec<(u64, u64, u64, u64)> {
    turns(session, "none")
        .iter()
        .map(|t| {
            let n = |k: &str| t[k].as_u64().unwrap();
            (
                n("sent_bytes"),
                n("read_bytes"),
                n("written_bytes"),
                n("uncached_bytes"),
            )
        })
        .collect()
}

#[test]
fn breakpoints_model_reads_only_at_breakpoints() {
    let dir = scratch("breakpoints");
    // Recorded Anthropic bodies carry no breakpoint: by default a request without one (any
    // strategy's but one that adds its own) is not cached at all.
    let recorded = repo().join("fixtures/pwmcp-0.0.41/order.anthropic.json");
    let v = &replay(&[], std::slice::from_ref(&recorded))[0];
    assert_eq!(
        v["cache_model"], "breakpoints",
        "the default for Anthropic bodies"
    );
    assert!(turns(v, "none").iter().all(|t| t["breakpoints"] == 0));
    for s in STRATEGIES {
        for t in turns(v, s).iter().filter(|t| t["breakpoints"] == 0) {
            assert_eq!(t["read_bytes"], 0, "{s}: {t}");
            assert_eq!(t["uncached_bytes"], t["sent_bytes"], "{s}: {t}");
        }
    }
    let prefix = &replay(
        &["--cache-model", "prefix"],
        std::slice::from_ref(&recorded),
    )[0];
    assert!(num(&strategy(prefix, "none")["total"]["read_bytes"]) > 0.0);

    // One breakpoint, on the system prompt: every later turn reads exactly what the first
    // wrote (tools and system), however much more of the request is the same.
    let system = json!([{"type": "text", "text": "You drive a browser.", "cache_control": {"type": "ephemeral"}}]);
    let path = write_session(
        &dir,
        "system.anthropic.json",
        &anthropic_session(4, 2, system.clone()),
    );
    let v = &replay(&[], std::slice::from_ref(&path))[0];
    let b = bills(v);
    let head = b[0].2;
    assert!(
        head > 0 && b[0].3 > 0,
        "turn 1 writes up to the breakpoint: {b:?}"
    );
    for (sent, read, written, uncached) in &b[1..] {
        assert_eq!((*read, *written), (head, 0), "{b:?}");
        assert_eq!(*uncached, sent - head);
    }
    let prefix = &replay(&["--cache-model", "prefix"], std::slice::from_ref(&path))[0];
    assert!(
        bills(prefix)[2].1 > head,
        "the prefix model reads past the breakpoint"
    );

    // A breakpoint on the last block of every turn: the previous request is found by walking
    // back, as long as it is at most 20 blocks back (9 calls: 18 blocks a turn).
    let plain = json!("You drive a browser.");
    let near = write_session(
        &dir,
        "near.anthropic.json",
        &anthropic_session(4, 9, plain.clone()),
    );
    let v = &replay(
        &["--client-breakpoints", "last-block"],
        std::slice::from_ref(&near),
    )[0];
    let b = bills(v);
    for t in 1..b.len() {
        assert_eq!(
            b[t].1,
            b[t - 1].0,
            "turn {} reads turn {}'s request: {b:?}",
            t + 1,
            t
        );
        assert_eq!(b[t].3, 0, "nothing after the last breakpoint");
    }
    // 11 calls: 22 blocks a turn, out of reach; only the final request (2 blocks more) reads.
    let far = write_session(&dir, "far.anthropic.json", &anthropic_session(4, 11, plain));
    let v = &replay(
        &["--client-breakpoints", "last-block"],
        std::slice::from_ref(&far),
    )[0];
    let b = bills(v);
    let last = b.len() - 1;
    for (t, bill) in b.iter().enumerate().take(last).skip(1) {
        assert_eq!(bill.1, 0, "turn {}: {b:?}", t + 1);
    }
    assert_eq!(b[last].1, b[last - 1].0, "{b:?}");

    // Entries expire: turns 400 s apart outlive a 300 s entry, not a 1-hour one, whose
    // writes cost 2 times an input byte.
    let v = &replay(&["--turn-spacing-secs", "400"], std::slice::from_ref(&path))[0];
    assert!(bills(v).iter().all(|b| b.1 == 0), "{:?}", bills(v));
    let hour = json!([{"type": "text", "text": "You drive a browser.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]);
    let hourly = write_session(&dir, "hour.anthropic.json", &anthropic_session(4, 2, hour));
    let v = &replay(
        &["--turn-spacing-secs", "400"],
        std::slice::from_ref(&hourly),
    )[0];
    let b = bills(v);
    assert!(b[1..].iter().all(|t| t.1 == head), "{b:?}");
    let first = &turns(v, "none")[0];
    let expected = 2.0 * b[0].2 as f64 + b[0].3 as f64;
    assert!((num(&first["cost"]) - expected).abs() < 1e-6, "{first}");

    // More than 4 breakpoints: Anthropic rejects the request; the replay says so.
    let five: Vec<Value> = (0..5)
        .map(|i| json!({"type": "text", "text": format!("rule {i}"), "cache_control": {"type": "ephemeral"}}))
        .collect();
    let many = write_session(
        &dir,
        "many.anthropic.json",
        &anthropic_session(2, 1, Value::Array(five)),
    );
    let v = &replay(&[], std::slice::from_ref(&many))[0];
    assert_eq!(turns(v, "none")[0]["breakpoints"], 5);
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("more than 4")),
        "{warnings:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
