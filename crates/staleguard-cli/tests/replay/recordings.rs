//! Every recording replays with every fact in `none` and no stale ref from staleguard, and
//! Gemini bodies replay as their OpenAI twins.

use std::process::Command;

use crate::common::SCENARIOS;
use crate::harness::*;

#[test]
fn every_recording_replays_with_every_fact_in_none_and_no_stale_ref_from_staleguard() {
    let sessions = recordings();
    let out = replay(&["--facts-dir", facts_dir().to_str().unwrap()], &sessions);
    assert_eq!(out.len(), sessions.len());
    for (path, v) in sessions.iter().zip(&out) {
        let name = path.display();
        let facts = v["facts"].as_array().unwrap();
        assert!(!facts.is_empty(), "{name}");
        for fact in facts {
            assert!(present(fact, "none"), "{name}: the recording lacks {fact}");
        }
        assert_eq!(strategy(v, "staleguard")["stale_refs"], 0, "{name}");
        let none = strategy(v, "none");
        assert_eq!(none["relative_to_none"], 1.0);
        assert!(none["frozen_history_broken"].as_array().unwrap().is_empty());
        let newest = strategy(v, "newest-only");
        assert_eq!(newest["relative_to_newest_only"], 1.0);
        assert!(num(&newest["total"]["sent_bytes"]) <= num(&none["total"]["sent_bytes"]));
    }
}

/// Every shared recording as Gemini CLI would send it (`tests/proxy/clients.py
/// chat-to-gemini`) replays as its OpenAI body does: the same turns, every fact in `none`,
/// the same stale refs left by each strategy, none by staleguard, no frozen history broken.
#[test]
fn gemini_bodies_replay_as_their_openai_bodies_do() {
    let dir = scratch("gemini");
    let mut pairs = Vec::new();
    for version in ["pwmcp-0.0.41", "pwmcp-0.0.83"] {
        for s in SCENARIOS {
            let chat = repo().join(format!("fixtures/{version}/{s}.openai.json"));
            let gemini = dir.join(format!("{s}.gemini.{version}.json"));
            let out = Command::new("python3")
                .arg(repo().join("tests/proxy/clients.py"))
                .arg("chat-to-gemini")
                .args([&chat, &gemini])
                .output()
                .expect("run python3 tests/proxy/clients.py");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            pairs.extend([chat, gemini]);
        }
    }
    let out = replay(&["--facts-dir", facts_dir().to_str().unwrap()], &pairs);
    for (two, paths) in out.chunks(2).zip(pairs.chunks(2)) {
        let (chat, gemini) = (&two[0], &two[1]);
        let name = paths[1].display();
        assert_eq!(gemini["format"], "gemini", "{name}");
        assert_eq!(gemini["turns"], chat["turns"], "{name}");
        let facts = gemini["facts"].as_array().unwrap();
        assert!(!facts.is_empty(), "{name}");
        assert!(
            facts.iter().all(|f| present(f, "none")),
            "{name}: {facts:?}"
        );
        for strategy_name in STRATEGIES {
            let (g, c) = (
                strategy(gemini, strategy_name),
                strategy(chat, strategy_name),
            );
            assert_eq!(g["stale_refs"], c["stale_refs"], "{name} {strategy_name}");
        }
        let ours = strategy(gemini, "staleguard");
        assert_eq!(ours["stale_refs"], 0, "{name}");
        assert!(
            ours["frozen_history_broken"].as_array().unwrap().is_empty(),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
