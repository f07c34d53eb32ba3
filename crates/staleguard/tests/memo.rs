//! The memo only saves work: every recorded session, in all three wire formats and turn by
//! turn, projects to the same bytes and reports with the memo off, cold and warm.

mod support;

use staleguard::{project, Config, Memo, Options, Projection, RequestFormat};
use support::formats::chat_to_responses;
use support::{on, openai_fixtures, read, shared_fixtures, truncate};

/// Every recorded session: the OpenAI fixtures, the Anthropic ones beside them, and each
/// OpenAI one as a Responses body.
fn sessions() -> Vec<(String, RequestFormat)> {
    let mut out = Vec::new();
    for path in openai_fixtures() {
        let body = read(&path);
        out.push((chat_to_responses(&body), RequestFormat::Responses));
        let anthropic = path
            .to_string_lossy()
            .replace(".openai.json", ".anthropic.json");
        if std::path::Path::new(&anthropic).is_file() {
            out.push((
                read(std::path::Path::new(&anthropic)),
                RequestFormat::Anthropic,
            ));
        }
        out.push((body, RequestFormat::OpenAiChat));
    }
    assert!(out.len() > 40, "only {} sessions", out.len());
    out
}

/// The request of every turn: the first `n` messages (or input items), for each `n`.
fn turns(body: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(body).expect("JSON");
    let n = v["messages"]
        .as_array()
        .or(v["input"].as_array())
        .map_or(0, Vec::len);
    (1..=n).map(|k| truncate_any(body, k)).collect()
}

fn truncate_any(body: &str, n: usize) -> String {
    let mut v: serde_json::Value = serde_json::from_str(body).expect("JSON");
    if let Some(list) = v["input"].as_array_mut() {
        list.truncate(n);
        return v.to_string();
    }
    truncate(body, n)
}

fn run(body: &str, format: RequestFormat, config: &Config, memo: Option<&Memo>) -> Projection {
    let options = Options {
        memo,
        verdicts: true,
        ..Options::default()
    };
    project(body, format, config, options).expect("projects")
}

fn same(a: &Projection, b: &Projection, what: &str) {
    assert_eq!(a.body, b.body, "{what}: body");
    assert_eq!(a.report, b.report, "{what}: report");
    assert_eq!(a.evidence, b.evidence, "{what}: evidence");
    assert_eq!(a.verdicts, b.verdicts, "{what}: verdicts");
    let steps = |p: &Projection| {
        p.progress.as_ref().map(|g| {
            g.steps
                .iter()
                .map(|s| (s.fingerprint, s.no_progress))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(steps(a), steps(b), "{what}: progress");
}

#[test]
fn answers_are_the_same_with_the_memo_off_cold_and_warm() {
    let config = on();
    // One memo for every session and turn: later turns find their history in it.
    let warm = Memo::default();
    for (body, format) in sessions() {
        for (turn, request) in turns(&body).iter().enumerate() {
            let off = run(request, format, &config, None);
            let cold = run(request, format, &config, Some(&Memo::default()));
            let warmed = run(request, format, &config, Some(&warm));
            let what = format!("{} turn {turn}", format.name());
            same(&off, &cold, &what);
            same(&off, &warmed, &what);
        }
    }
    assert!(!warm.is_empty());
}

#[test]
fn a_memo_too_small_for_the_session_still_answers_the_same() {
    let config = on();
    let tiny = Memo::new(16 * 1024);
    let body = read(&shared_fixtures().join("pwmcp-0.0.41/long_page.openai.json"));
    for request in turns(&body) {
        let off = run(&request, RequestFormat::OpenAiChat, &config, None);
        let small = run(&request, RequestFormat::OpenAiChat, &config, Some(&tiny));
        same(&off, &small, "tiny memo");
        assert!(tiny.weight() <= 16 * 1024, "weight {}", tiny.weight());
    }
}

/// The memo's bound holds what it keeps: every reading of every recorded result, as the
/// requests of its session left it in the memo (tree, chunk words, facts and receipt
/// read), holds no more heap than the weight the memo counts for it. Scores are kept
/// beside readings, within their own share of the bound.
#[test]
fn a_kept_reading_holds_no_more_than_its_weight() {
    let config = on();
    let memo = Memo::new(1 << 30);
    let mut fixtures = openai_fixtures();
    fixtures.extend(support::openai_fixtures_in(
        &shared_fixtures().join("cdmcp-1.11.0"),
    ));
    let (mut checked, mut worst) = (0, 0.0f64);
    for path in fixtures {
        let body = read(&path);
        for request in turns(&body) {
            run(&request, RequestFormat::OpenAiChat, &config, Some(&memo));
        }
        for message in support::messages(&body) {
            if message["role"] != "tool" {
                continue;
            }
            let text = support::content_text(&message);
            let key = memo.key(&text);
            let reading = memo.reading(key, &text, staleguard::session::Depth::Header);
            let (held, weight) = (
                reading.heap_bytes(),
                staleguard::memo::weight_of(text.len()),
            );
            checked += 1;
            assert!(
                held as u64 <= weight,
                "{}: a {} byte result holds {held} bytes, weighed {weight}",
                path.display(),
                text.len()
            );
            worst = worst.max(held as f64 / weight as f64);
        }
    }
    assert!(checked > 300, "only {checked} results");
    // Pages as dense as pages get: a ref or a distinct word on every short line.
    let dense = |line: &dyn Fn(usize) -> String, head: &str, tail: &str| {
        let lines: String = (0..20_000).map(line).collect();
        format!("{head}{lines}{tail}")
    };
    let pw = "### Page state\n- Page URL: http://a/dense\n- Page Title: Dense\n- Page Snapshot:\n```yaml\n";
    let cd = "# take_snapshot response\n## Latest page snapshot\n";
    let pages = [
        dense(&|i| format!("- generic [ref=e{i}]\n"), pw, "```"),
        dense(&|i| format!("- text: w{i}x\n"), pw, "```"),
        dense(
            &|i| format!("- button \"b{i}\" [ref=e{i}]: v{i}\n"),
            pw,
            "```",
        ),
        dense(&|i| format!("uid=1_{i} generic\n"), cd, ""),
        dense(&|i| format!("uid=1_{i} StaticText \"w{i}x\"\n"), cd, ""),
    ];
    for page in &pages {
        let next = page.replace("dense", "other").replace("Dense", "Other");
        let body = support::chat_session(
            &[("browser_navigate", page), ("browser_navigate", &next)],
            "what did the first page say about w17x?",
        );
        run(&body, RequestFormat::OpenAiChat, &config, Some(&memo));
        let reading = memo.reading(memo.key(page), page, staleguard::session::Depth::Header);
        let (held, weight) = (
            reading.heap_bytes(),
            staleguard::memo::weight_of(page.len()),
        );
        assert!(
            held as u64 <= weight,
            "a dense page of {} bytes holds {held}, weighed {weight}",
            page.len()
        );
        worst = worst.max(held as f64 / weight as f64);
    }
    eprintln!(
        "{checked} readings; the largest holds {:.2} of its weight",
        worst
    );
}
