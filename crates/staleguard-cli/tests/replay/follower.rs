//! The follower (SPEC 3, "In the request, or one call away"; issue 43): for every fact that
//! is not in the request that needs it, `staleguard replay` makes the one call that request
//! names (the guard's `browser_history`, a snapshot again, `browser_find`) and looks for the
//! fact in what it returns.

use std::path::PathBuf;

use serde_json::Value;

use crate::harness::*;

/// The OpenAI (or Anthropic) bodies of a folder, sorted.
fn bodies(dir: &str, format: &str) -> Vec<PathBuf> {
    let dir = repo().join(dir);
    let suffix = format!(".{format}.json");
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(&suffix))
        .collect();
    sessions.sort();
    assert!(
        !sessions.is_empty(),
        "no {format} bodies in {}",
        dir.display()
    );
    sessions
}

/// Facts where needed, facts reached (there or one call away), and how each call went,
/// for the staleguard strategies over `sessions`.
#[derive(Default, Debug)]
struct Tally {
    facts: usize,
    here: [usize; 2],
    reached: [usize; 2],
    ways: Vec<String>,
}

const STALEGUARD: [&str; 2] = ["staleguard", "staleguard-lean"];

fn tally(out: &[Value], into: &mut Tally) {
    for session in out {
        let name = session["session"].as_str().unwrap_or_default();
        for fact in session["facts"].as_array().unwrap() {
            assert!(present(fact, "none"), "{name}: {fact} not even in none");
            into.facts += 1;
            for (k, strategy) in STALEGUARD.iter().enumerate() {
                let here = present(fact, strategy);
                let call = way(fact, strategy);
                assert!(
                    !(here && call.is_some()),
                    "{name}: a call for a fact that is there"
                );
                into.here[k] += usize::from(here);
                into.reached[k] += usize::from(here || call.is_some());
                into.ways.extend(call);
            }
        }
    }
}

/// With the guard in front (`--guard`: every request offers its `browser_history`), every
/// fact of every recorded corpus is in the request that needs it or one named call away, for
/// the defaults and the lean live page: the documentation sets of three servers (held-out
/// sets reported apart), both wire formats on one of them, the real Node.js pages, the test
/// site through Playwright MCP and Chrome DevTools MCP, and the seed format.
#[test]
fn with_the_guard_in_front_every_fact_is_in_the_request_or_one_named_call_away() {
    let docsets = repo().join("fixtures/docsets");
    let held = std::fs::read_to_string(docsets.join("HELDOUT")).expect("HELDOUT");
    let held: Vec<&str> = held.split_whitespace().collect();
    let docset_facts = docsets.join("facts");
    let mut runs: Vec<(String, Vec<PathBuf>, PathBuf)> = Vec::new();
    for server in ["pwmcp-0.0.41", "pwmcp-0.0.83", "cdmcp-1.11.0"] {
        let dir = format!("fixtures/docsets/{server}");
        let (tuned, held_out): (Vec<PathBuf>, Vec<PathBuf>) = bodies(&dir, "openai")
            .into_iter()
            .partition(|p| !held.iter().any(|set| file_name(p).starts_with(set)));
        assert!(
            !held_out.is_empty() && !tuned.is_empty(),
            "{server}: both splits"
        );
        runs.push((format!("{server} tuned"), tuned, docset_facts.clone()));
        runs.push((format!("{server} held out"), held_out, docset_facts.clone()));
    }
    let anthropic = bodies("fixtures/docsets/pwmcp-0.0.83", "anthropic");
    runs.push(("pwmcp-0.0.83 anthropic".into(), anthropic, docset_facts));
    let realdocs = repo().join("fixtures/realdocs/facts");
    runs.push((
        "realdocs".into(),
        bodies("fixtures/realdocs", "openai"),
        realdocs,
    ));
    for dir in ["pwmcp-0.0.41", "pwmcp-0.0.83", "cdmcp-1.11.0"] {
        let sessions = bodies(&format!("fixtures/{dir}"), "openai");
        runs.push((format!("site {dir}"), sessions, facts_dir()));
    }
    let site = bodies("fixtures/pwmcp-0.0.41", "anthropic");
    runs.push(("site pwmcp-0.0.41 anthropic".into(), site, facts_dir()));
    let ankita = vec![repo().join("fixtures/ankita/order.openai.json")];
    runs.push(("seed format".into(), ankita, facts_dir().join("ankita")));

    let mut all = Tally::default();
    for (corpus, sessions, facts) in &runs {
        let out = replay(
            &["--guard", "--facts-dir", facts.to_str().unwrap()],
            sessions,
        );
        let mut t = Tally::default();
        tally(&out, &mut t);
        eprintln!(
            "{corpus}: {} facts; where needed {}/{} (lean {}); with one call {}/{} (lean {})",
            t.facts, t.here[0], t.facts, t.here[1], t.reached[0], t.facts, t.reached[1]
        );
        assert!(t.facts > 0, "{corpus}: no facts read");
        assert_eq!(t.reached, [t.facts; 2], "{corpus}: a fact out of reach");
        all.facts += t.facts;
        all.ways.extend(t.ways);
    }
    // The calls that reach them go through the guard: its history reads collapsed pages and
    // the folds of lean ones.
    let history = all.ways.iter().filter(|w| *w == "history").count();
    assert!(history >= 50, "{history} facts read back through the guard");
    assert!(all.facts >= 470, "{} facts read", all.facts);
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
