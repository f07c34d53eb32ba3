//! The 10 MB bench request, shared by the core's `projection` bench and the CLI's
//! `whole_process` bench (each includes this file with `#[path]`), so both measure the same
//! bytes.

use std::path::Path;

use scenarios::SCENARIOS;
use serde_json::{json, Value};

#[path = "../../tests/support/scenarios.rs"]
mod scenarios;

const TARGET_BYTES: usize = 10 * 1024 * 1024;

/// The recorded sessions, repeated with fresh call IDs until the body reaches 10 MB.
pub(crate) fn build_request() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let sessions: Vec<Vec<Value>> = ["pwmcp-0.0.41", "pwmcp-0.0.83"]
        .iter()
        .flat_map(|v| SCENARIOS.map(|s| root.join(v).join(format!("{s}.openai.json"))))
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let v: Value = serde_json::from_str(&text).expect("fixture JSON");
            v["messages"].as_array().cloned().unwrap_or_default()
        })
        .collect();
    let mut messages = vec![json!({"role": "system", "content": "You drive a browser."})];
    let (mut bytes, mut round) = (0, 0);
    while bytes < TARGET_BYTES {
        for session in &sessions {
            for m in session.iter().filter(|m| m["role"] != "system") {
                let mut m = m.clone();
                renumber(&mut m, round);
                bytes += m.to_string().len();
                messages.push(m);
            }
        }
        round += 1;
    }
    json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

fn renumber(m: &mut Value, round: usize) {
    if let Some(id) = m["tool_call_id"].as_str() {
        m["tool_call_id"] = format!("r{round}_{id}").into();
    }
    if let Some(calls) = m["tool_calls"].as_array_mut() {
        for c in calls {
            if let Some(id) = c["id"].as_str() {
                c["id"] = format!("r{round}_{id}").into();
            }
        }
    }
}
