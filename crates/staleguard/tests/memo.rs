//! The memo only saves work: every recorded session, in all three wire formats and turn by
//! turn, projects to the same bytes and reports with the memo off, cold and warm.

mod support;

use staleguard::{
    project, project_resumed_parts, Config, LivePage, Memo, Options, Projection, RequestFormat,
};
use support::formats::chat_to_responses;
use support::{fixtures, on, openai_fixtures, read, truncate};

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
    assert!(!a.resumed, "{what}: resumed without a memo");
    assert_eq!(a.body, b.body, "{what}: body");
    assert_eq!(a.report(), b.report(), "{what}: report");
    assert_eq!(b.collapsed(), b.report().collapsed(), "{what}: collapsed");
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

/// Turn by turn, as an agent sends them, every recorded session in the formats that resume
/// (Chat Completions, Anthropic Messages) projects to the same bytes and reports when later
/// turns resume from the checkpoint an earlier turn left in the memo; most turns do.
#[test]
fn answers_are_the_same_resumed_from_checkpoints() {
    let memo = Memo::default();
    let count = resume_all(&on(), &memo, |request, _| vec![request.to_string()]);
    let (turns_run, resumable) = (count.requests, count.collapsed);
    let resumed = memo.resumed() as usize;
    eprintln!("{resumed} of {turns_run} turns resumed ({resumable} with a collapsed page)");
    assert!(
        resumed * 2 > resumable,
        "{resumed} of {resumable} turns resumed"
    );
}

/// The same under other settings (evidence caps so tight that old quotes are dropped,
/// evidence or progress off) and for requests that do not simply extend the previous turn:
/// its newest result replaced, a follow-up question from the user, a result failed.
#[test]
fn answers_are_the_same_resumed_under_other_settings_and_shapes() {
    let tight = Config {
        evidence_max_items: 3,
        evidence_max_bytes: 400,
        ..on()
    };
    let no_evidence = Config {
        evidence_retention: Some(false),
        ..on()
    };
    let no_progress = Config {
        progress_tracking: Some(false),
        max_repeats: 2,
        ..on()
    };
    for config in [tight, no_evidence, no_progress] {
        let memo = Memo::default();
        let resumable = resume_all(&config, &memo, variants).collapsed;
        assert!(memo.resumed() as usize * 4 > resumable, "{config:?}");
    }
}

/// A lean live page (SPEC 2) resumes from a checkpoint too: its form weighs the user's
/// messages and what the model wrote before the tail, which the checkpoint keeps. Lean from
/// 1 KB, so that the recorded pages are made lean; with evidence on and off, every shape.
#[test]
fn lean_pages_are_the_same_resumed_from_checkpoints() {
    let lean = Config {
        live_page: LivePage::Lean,
        lean_min_bytes: 1024,
        ..on()
    };
    let lean_alone = Config {
        evidence_retention: Some(false),
        ..lean.clone()
    };
    for config in [lean, lean_alone] {
        let memo = Memo::default();
        let shapes = |request: &str, format| {
            let mut out = variants(request, format);
            out.extend(asked_again(request, format));
            out
        };
        let count = resume_all(&config, &memo, shapes);
        eprintln!("{} resumed: {count:?}", memo.resumed());
        assert!(memo.resumed() as usize * 4 > count.collapsed, "{config:?}");
        // Every shape but the plain next turn goes the whole way (a question, a newest
        // result replaced or failed reaches back), as does a session's first lean page.
        assert!(
            count.lean_resumed * 5 > count.lean,
            "{count:?}: too few lean pages resumed"
        );
    }
}

/// Checkpoints stay within the memo's bound (a quarter of it) and still answer the same
/// when the bound leaves room for few of them.
#[test]
fn checkpoints_stay_within_a_small_memo() {
    let bound = 256 * 1024;
    let memo = Memo::new(bound);
    let body = read(&fixtures().join("pwmcp-0.0.41/long_page.openai.json"));
    let config = on();
    for request in turns(&body) {
        let off = project(
            &request,
            RequestFormat::OpenAiChat,
            &config,
            Options::default(),
        );
        let options = Options {
            memo: Some(&memo),
            ..Options::default()
        };
        let small = project(&request, RequestFormat::OpenAiChat, &config, options);
        same(
            &off.expect("projects"),
            &small.expect("projects"),
            "small memo",
        );
        assert!(memo.weight() <= bound as u64, "weight {}", memo.weight());
    }
    assert!(memo.resumed() > 0, "no turn resumed");
}

/// The request of a turn, and others that share its history: its newest result replaced,
/// a user's follow-up question after it, its newest result marked failed.
fn variants(request: &str, format: RequestFormat) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(request).expect("JSON");
    let mut out = vec![request.to_string()];
    let question = match format {
        RequestFormat::Anthropic => serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "What was the price of the first part and the order number?"}]}),
        _ => serde_json::json!({"role": "user",
            "content": "What was the price of the first part and the order number?"}),
    };
    let mut asked = v.clone();
    if let Some(messages) = asked["messages"].as_array_mut() {
        messages.push(question);
        out.push(asked.to_string());
    }
    for failed in [false, true] {
        let mut changed = v.clone();
        let Some(messages) = changed["messages"].as_array_mut() else {
            continue;
        };
        let newest = messages.iter_mut().rev().find_map(|m| match format {
            RequestFormat::Anthropic => m["content"]
                .as_array_mut()?
                .iter_mut()
                .rev()
                .find(|b| b["type"] == "tool_result"),
            _ => (m["role"] == "tool").then_some(m),
        });
        let Some(result) = newest else {
            continue;
        };
        let text = result["content"].as_str().unwrap_or("").to_string();
        match (failed, format) {
            (false, _) => result["content"] = format!("{text}\n- text: turn again").into(),
            (true, RequestFormat::Anthropic) => result["is_error"] = true.into(),
            (true, _) => result["content"] = "### Result\nError: Timeout 5000ms exceeded.".into(),
        }
        out.push(changed.to_string());
    }
    out
}

/// The request of a turn with the newest result's page asked for again, once, twice and
/// three times (a snapshot call and the same page each time), each extending the one
/// before: "Ask again, get it whole" alternates whole and lean across turns that resume.
fn asked_again(request: &str, format: RequestFormat) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(request).expect("JSON");
    let Some(messages) = v["messages"].as_array() else {
        return Vec::new();
    };
    let page = messages.iter().rev().find_map(|m| match format {
        RequestFormat::Anthropic => m["content"]
            .as_array()?
            .iter()
            .rev()
            .find(|b| b["type"] == "tool_result")
            .map(|b| b["content"].clone()),
        _ => (m["role"] == "tool").then(|| m["content"].clone()),
    });
    let Some(page) = page else {
        return Vec::new();
    };
    let mut asked = v.clone();
    let mut out = Vec::new();
    for k in 0..3 {
        let id = format!("again_{k}");
        let (call, result) = match format {
            RequestFormat::Anthropic => (
                serde_json::json!({"role": "assistant", "content": [{"type": "tool_use",
                    "id": id, "name": "browser_snapshot", "input": {}}]}),
                serde_json::json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": page}]}),
            ),
            _ => (
                serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": id, "type": "function",
                    "function": {"name": "browser_snapshot", "arguments": "{}"}}]}),
                serde_json::json!({"role": "tool", "tool_call_id": id, "content": page}),
            ),
        };
        if let Some(list) = asked["messages"].as_array_mut() {
            list.extend([call, result]);
        }
        out.push(asked.to_string());
    }
    out
}

/// Projects every turn of every session in the formats that resume, each as `shapes` makes
/// it, with `memo` and without, and checks the answers are the same, and counts them.
fn resume_all(
    config: &Config,
    memo: &Memo,
    shapes: impl Fn(&str, RequestFormat) -> Vec<String>,
) -> Count {
    let mut count = Count::default();
    for (body, format) in sessions() {
        if format == RequestFormat::Responses {
            continue;
        }
        for (turn, request) in turns(&body).iter().enumerate() {
            for (shape, request) in shapes(request, format).iter().enumerate() {
                let off = project(request, format, config, Options::default()).expect("projects");
                let options = Options {
                    memo: Some(memo),
                    ..Options::default()
                };
                let resumed = project(request, format, config, options).expect("projects");
                same(
                    &off,
                    &resumed,
                    &format!("{} turn {turn} shape {shape}", format.name()),
                );
                count.requests += 1;
                count.collapsed += usize::from(off.report().collapsed() > 0);
                let lean = resumed.report().results.iter().any(|r| r.folded.is_some());
                count.lean += usize::from(lean);
                count.lean_resumed += usize::from(resumed.resumed && lean);
            }
        }
    }
    count
}

/// What [`resume_all`] projected: requests, those with a collapsed page, those with a lean
/// page, and of those the ones that resumed.
#[derive(Debug, Default)]
struct Count {
    requests: usize,
    collapsed: usize,
    lean: usize,
    lean_resumed: usize,
}

/// `project_resumed`, which a host runs where the request arrived, answers exactly the turns
/// that resume from a checkpoint, with what `project` answers; nothing without a memo, on a
/// session's first turn, or when the guard's verdicts are asked for.
#[test]
fn project_resumed_answers_the_next_turn_as_project_does_and_nothing_else() {
    let config = on();
    let memo = Memo::default();
    let (mut answered, mut turns_run) = (0, 0);
    for (body, format) in sessions() {
        if format == RequestFormat::Responses {
            continue;
        }
        for (turn, request) in turns(&body).iter().enumerate() {
            let what = format!("{} turn {turn}", format.name());
            let with = |memo, verdicts| Options {
                memo,
                verdicts,
                ..Options::default()
            };
            assert!(project_resumed_parts(
                &[request.as_bytes()],
                format,
                &config,
                &with(None, false)
            )
            .is_none());
            let asked = project_resumed_parts(
                &[request.as_bytes()],
                format,
                &config,
                &with(Some(&memo), true),
            );
            assert!(asked.is_none(), "{what}: resumed with verdicts asked for");
            let fresh = Memo::default();
            assert!(project_resumed_parts(
                &[request.as_bytes()],
                format,
                &config,
                &with(Some(&fresh), false)
            )
            .is_none());
            let off = project(request, format, &config, Options::default()).expect("projects");
            // The same body as parts cut anywhere, characters included, answers alike.
            let bytes = request.as_bytes();
            let cuts = [
                bytes.len() / 3,
                bytes.len() / 2 + 1,
                bytes.len().saturating_sub(7),
            ];
            let (a, rest) = bytes.split_at(cuts[0].min(bytes.len()));
            let (b, rest) = rest.split_at((cuts[1] - cuts[0]).min(rest.len()));
            let (c, d) = rest.split_at(cuts[2].saturating_sub(cuts[1]).min(rest.len()));
            let from_parts =
                project_resumed_parts(&[a, b, c, d], format, &config, &with(Some(&memo), false));
            match project_resumed_parts(
                &[request.as_bytes()],
                format,
                &config,
                &with(Some(&memo), false),
            ) {
                Some(resumed) => {
                    assert!(resumed.resumed, "{what}: not marked resumed");
                    same(&off, &resumed, &what);
                    let parts = from_parts.expect("resumed from parts too");
                    same(&off, &parts, &format!("{what}, from parts"));
                    answered += 1;
                }
                // Leaves the checkpoint the next turn resumes from.
                None => {
                    assert!(from_parts.is_none(), "{what}: resumed from parts only");
                    let whole = project(request, format, &config, with(Some(&memo), false));
                    same(&off, &whole.expect("projects"), &what);
                }
            }
            turns_run += 1;
        }
    }
    assert_eq!(memo.resumed() as usize, 2 * answered);
    assert!(
        answered * 3 > turns_run,
        "{answered} of {turns_run} turns resumed"
    );
}

#[test]
fn a_memo_too_small_for_the_session_still_answers_the_same() {
    let config = on();
    let tiny = Memo::new(16 * 1024);
    let body = read(&fixtures().join("pwmcp-0.0.41/long_page.openai.json"));
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
    let mut bodies = openai_fixtures();
    bodies.extend(support::openai_fixtures_in(
        &fixtures().join("cdmcp-1.11.0"),
    ));
    let (mut checked, mut worst) = (0, 0.0f64);
    for path in bodies {
        let body = read(&path);
        for request in turns(&body) {
            run(&request, RequestFormat::OpenAiChat, &config, Some(&memo));
        }
        for message in support::messages(&body) {
            if message["role"] != "tool" {
                continue;
            }
            let text = support::content_text(&message);
            let (held, weight) = (
                staleguard::internal::memo::reading_bytes(&memo, &text),
                staleguard::internal::memo::weight_of(text.len()),
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
        let (held, weight) = (
            staleguard::internal::memo::reading_bytes(&memo, page),
            staleguard::internal::memo::weight_of(page.len()),
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

/// Found by the `resume` fuzz target. A page's quotes are weighed by what the model wrote
/// from where it began reading the page: the first of the results right before it that
/// showed the same URL. A checkpoint cut at the page was read again from the page's own
/// call on only, so the next turn, resumed from it, left out the model's words before that
/// call (here "Details A-04", which no user word names) and dropped the quotes they chose:
/// it answered differently with the memo than without.
#[test]
fn a_resumed_turn_weighs_a_page_by_what_the_model_wrote_since_it_first_read_its_url() {
    let page = |rows: &[&str], status: &str| {
        let mut tree = String::from("- generic [ref=e1]:\n  - heading \"Warehouse stock\" [level=1] [ref=e2]\n  - button \"Refresh list\" [ref=e3]\n  - list [ref=e4]:\n");
        for (i, row) in rows.iter().enumerate() {
            let bin = row.split(' ').next().unwrap_or("");
            tree += &format!("    - listitem [ref=e{}]:\n      - text: {row}\n      - button \"Details {bin}\" [ref=e{}]\n", 10 + 2 * i, 11 + 2 * i);
        }
        if !status.is_empty() {
            tree += &format!("  - status [ref=e9]: \"{status}\"\n");
        }
        format!("### Page\n- Page URL: http://127.0.0.1:8431/rerender/list.html\n- Page Title: Warehouse stock\n### Snapshot\n```yaml\n{tree}```")
    };
    let first = ["A-01 Hex bolt M6", "A-04 Washer 6 mm", "B-01 Hinge 40 mm"];
    let details = page(&first, "Bin A-04: Washer 6 mm, 430 in stock.");
    let refreshed = page(&["B-02 Hinge 60 mm", "C-01 Rivet 4 mm"], "");
    let call = |id: &str, name: &str, args: &str| {
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
    };
    let result = |id: &str, text: &str| serde_json::json!({"role": "tool", "tool_call_id": id, "content": text});
    let body = serde_json::json!({"model": "m", "messages": [
        {"role": "user", "content": "Look through the warehouse list for me."},
        call("c1", "browser_navigate", r#"{"url":"http://127.0.0.1:8431/rerender/list.html"}"#),
        result("c1", &page(&first, "")),
        call("c2", "browser_click", r#"{"element":"Details A-04 button","ref":"e13"}"#),
        result("c2", &details),
        call("c3", "browser_click", r#"{"element":"Refresh list button","ref":"e3"}"#),
        result("c3", &refreshed),
    ]})
    .to_string();
    let config = on();
    let memo = Memo::default();
    let mut resumed = 0;
    for (turn, request) in turns(&body).iter().enumerate() {
        let off = project(
            request,
            RequestFormat::OpenAiChat,
            &config,
            Options::default(),
        );
        let off = off.expect("projects");
        let options = Options {
            memo: Some(&memo),
            ..Options::default()
        };
        let with = project(request, RequestFormat::OpenAiChat, &config, options);
        let with = with.expect("projects");
        same(&off, &with, &format!("turn {turn}"));
        resumed += usize::from(with.resumed);
    }
    let last = project(
        &body,
        RequestFormat::OpenAiChat,
        &config,
        Options::default(),
    );
    let quotes: Vec<String> = last
        .expect("projects")
        .evidence
        .retained
        .into_iter()
        .map(|q| q.quote)
        .collect();
    assert!(
        quotes.iter().any(|q| q.contains("A-04")),
        "the model's words chose no quote: {quotes:?}"
    );
    assert!(resumed > 0, "no turn resumed");
}
