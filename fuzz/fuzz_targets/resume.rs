//! The proxy's frame reader: a request's body as the frames it arrived in, projected from the
//! checkpoint an earlier turn of the same session left in the memo
//! (`staleguard::project_resumed_parts`, which the proxy calls on the frames it read).
//!
//! A session script (`staleguard_fuzz::script`; seeds: the recorded sessions) is written as
//! an OpenAI Chat or Anthropic body (flag 0 bit 0), compact or pretty-printed (bit 1), under
//! a config the flags change (bit 2 a lean live page, bit 3 the guard in front, bit 4 no
//! evidence; flag 1 bit 0 a moving Anthropic breakpoint). Three of its turns (the first
//! `k` messages; flags 5 and 6 pick the earlier two) go through one memo in order, each cut
//! into frames anywhere, characters included (flags 7 to 10).
//!
//! Asserts: never a panic; a turn answered from the frames is marked resumed and answers
//! exactly what `project` of the joined body answers without a memo (body, report,
//! evidence, progress, breakpoint); it resumes from its frames exactly when it resumes
//! from one frame (asked right after); a turn that does not resume is projected with the
//! memo alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use staleguard::{Config, LivePage, Memo, Options, RequestFormat};
use staleguard_fuzz::check::{on, same};
use staleguard_fuzz::script::Script;

fuzz_target!(|text: &str| {
    let script = Script::parse(text);
    let flags = script.flag(0);
    let (format, full) = match flags & 1 {
        0 => (RequestFormat::OpenAiChat, script.chat()),
        _ => (RequestFormat::Anthropic, script.anthropic()),
    };
    let config = Config {
        live_page: match flags & 4 {
            0 => LivePage::Whole,
            _ => LivePage::Lean,
        },
        lean_min_bytes: 256,
        guard_in_front: (flags & 8 != 0).then_some(true),
        evidence_retention: (flags & 16 != 0).then_some(false),
        ..on()
    };
    let n = full["messages"].as_array().map_or(0, Vec::len);
    if n == 0 {
        return;
    }
    let first = 1 + usize::from(script.flag(5)) % n;
    let second = first + usize::from(script.flag(6)) % (n - first + 1);
    let memo = Memo::default();
    let with_memo = Options {
        memo: Some(&memo),
        ..Options::default()
    };
    for (turn, k) in [first, second, n].into_iter().enumerate() {
        let body = turn_body(&full, k, format, script.flag(1) & 1 == 1, flags & 2 != 0);
        let what = format!("turn {turn} ({k} of {n} messages)");
        let whole = staleguard::project(&body, format, &config, Options::default())
            .expect("a rendered body projects");
        if turn == 0 {
            let p = staleguard::project(&body, format, &config, with_memo).expect("projects");
            same(&whole, &p, &what);
            continue;
        }
        let bytes = body.as_bytes();
        let mut cuts: Vec<usize> = (7..11)
            .map(|i| usize::from(script.flag(i)) * bytes.len() / 255)
            .collect();
        cuts.sort_unstable();
        let mut frames: Vec<&[u8]> = Vec::new();
        let mut from = 0;
        for cut in cuts {
            frames.push(&bytes[from..cut]);
            from = cut;
        }
        frames.push(&bytes[from..]);
        let from_frames = staleguard::project_resumed_parts(&frames, format, &config, &with_memo);
        let single = staleguard::project_resumed_parts(&[bytes], format, &config, &with_memo);
        assert_eq!(
            from_frames.is_some(),
            single.is_some(),
            "{what}: resumed from {} frames, not from one",
            frames.len()
        );
        match from_frames.zip(single) {
            Some((resumed, once)) => {
                assert!(
                    resumed.resumed && once.resumed,
                    "{what}: not marked resumed"
                );
                same(&whole, &resumed, &format!("{what}, from frames"));
                same(&whole, &once, &format!("{what}, from one frame"));
            }
            None => {
                let p = staleguard::project(&body, format, &config, with_memo).expect("projects");
                same(&whole, &p, &format!("{what}, with the memo"));
            }
        }
    }
});

/// The body of the turn that holds the first `k` messages; an Anthropic breakpoint, when
/// asked for, on its last block, as Claude Code moves it along.
fn turn_body(
    full: &Value,
    k: usize,
    format: RequestFormat,
    breakpoint: bool,
    pretty: bool,
) -> String {
    let mut body = full.clone();
    if let Some(messages) = body["messages"].as_array_mut() {
        messages.truncate(k);
        if let (RequestFormat::Anthropic, true) = (format, breakpoint) {
            if let Some(Value::Array(blocks)) = messages.last_mut().map(|m| &mut m["content"]) {
                if let Some(Value::Object(block)) = blocks.last_mut() {
                    block.insert("cache_control".into(), json!({"type": "ephemeral"}));
                }
            }
        }
    }
    match pretty {
        true => serde_json::to_string_pretty(&body).unwrap_or_default(),
        false => body.to_string(),
    }
}
