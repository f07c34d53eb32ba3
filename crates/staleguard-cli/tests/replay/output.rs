//! What the replay prints: a table per session and a summary, CSV and a plot, and the
//! bad arguments it names.

use std::path::PathBuf;

use crate::harness::*;

#[test]
fn a_table_per_session_and_a_summary() {
    let sessions = vec![
        repo().join("fixtures/pwmcp-0.0.41/order.openai.json"),
        repo().join("fixtures/pwmcp-0.0.41/long_page.anthropic.json"),
    ];
    let out = run(&["--facts-dir", facts_dir().to_str().unwrap()], &sessions);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("pwmcp-0.0.41/order.openai.json: openai, 12 turns, cache model prefix"),
        "{text}"
    );
    assert!(
        text.contains(
            "pwmcp-0.0.41/long_page.anthropic.json: anthropic, 6 turns, cache model breakpoints"
        ),
        "{text}"
    );
    assert!(text.contains("x none x newest-only"), "{text}");
    let summary = text.split("summary:").nth(1).expect("a summary");
    let (table, corpora) = summary
        .split_once("\nfacts where needed, by corpus\n")
        .expect("facts by corpus");
    assert_eq!(
        table.trim_end().lines().count(),
        2 + sessions.len(),
        "{summary}"
    );
    // Both sessions are of one corpus, the folder they were read from: 9 facts, all kept.
    let lines: Vec<&str> = corpora.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| !l.is_empty()).count(),
        2,
        "{corpora}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..5],
        ["pwmcp-0.0.41", "2", "9/9", "9/9", "100.0%"],
        "{corpora}"
    );
}

#[test]
fn csv_and_plot() {
    let path = repo().join("fixtures/pwmcp-0.0.41/long_page.openai.json");
    let svg = std::env::temp_dir().join(format!("staleguard-replay-{}.svg", std::process::id()));
    let out = run(&["--csv", "--plot", svg.to_str().unwrap()], &[path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(csv.starts_with("session,turn,strategy,sent_bytes,read_bytes,written_bytes,"));
    assert_eq!(
        csv.lines().count(),
        1 + 5 * 6,
        "5 strategies x (5 model turns + the final request)"
    );
    let drawing = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawing.contains("<svg") && drawing.contains("newest-only") && drawing.contains("polyline"),
        "{}",
        &drawing[..200.min(drawing.len())]
    );
    std::fs::remove_file(&svg).ok();
}

#[test]
fn bad_arguments_are_named() {
    let path = repo().join("fixtures/pwmcp-0.0.41/order.openai.json");
    for (args, says) in [
        (vec!["--cache-model", "lru"], "--cache-model"),
        (vec!["--client-breakpoints", "all"], "--client-breakpoints"),
    ] {
        let out = run(&args, std::slice::from_ref(&path));
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says));
    }
    let missing = run(&[], &[PathBuf::from("/nonexistent/session.json")]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/session.json"));
}
