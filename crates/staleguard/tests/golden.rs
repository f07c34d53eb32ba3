//! Outputs held still: the projected bytes, reports, evidence, progress and verdicts of every
//! recorded session (every fixture folder, every wire format, several configs, whole and
//! resumed) and of the 10 MB bench request, against digests in `tests/golden/digests.txt`.
//!
//! The digests were taken before the core was reorganised (issue 26); a change that moves
//! code must not move a byte. A change that means to change what the model sees re-takes
//! them with `STALEGUARD_BLESS=1 cargo test -p staleguard --test golden` and says why.

mod support;

// It includes the scenario list (`tests/support/scenarios.rs`), as `support` does.
#[allow(clippy::duplicate_mod)]
#[path = "../benches/support/request.rs"]
mod bench_request;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use staleguard::{project, Config, Memo, Options, Projection, RequestFormat};
use support::formats::{chat_to_gemini, chat_to_responses, GeminiClient};
use support::*;

const DIGESTS: &str = "tests/golden/digests.txt";

/// Every request body recorded in a fixture folder.
fn bodies() -> Vec<PathBuf> {
    let mut found = Vec::new();
    collect(&fixtures(), &mut found);
    found.sort();
    assert!(found.len() >= 60, "only {} recorded bodies", found.len());
    found
}

fn collect(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let name = path.to_string_lossy();
        if path.is_dir() && !name.ends_with(".artifacts") {
            collect(&path, found);
        } else if name.ends_with(".openai.json") || name.ends_with(".anthropic.json") {
            found.push(path);
        }
    }
}

/// Everything a projection answers, written out in one deterministic text.
fn describe(p: &Projection) -> String {
    let mut out = String::new();
    let body = Sha256::digest(p.body.as_str().as_bytes());
    let _ = writeln!(out, "body {} {:x}", p.body.len(), body);
    let _ = writeln!(out, "format {:?} {}", p.format, p.format_reason);
    let _ = writeln!(out, "collapsed {}", p.collapsed());
    // Written as the plan's Debug was before it had a batch: digests of sessions where no
    // collapse waits stay as they were.
    // Results are written as their Debug was before they had `folded`, which is `None`
    // unless the live page is lean.
    let plan = p.report();
    let results = format!("{:?}", plan.results).replace(", folded: None }", " }");
    let _ = write!(
        out,
        "plan Plan {{ results: {results}, edits: {:?} }}",
        plan.edits
    );
    if let Some(batch) = plan.batch {
        let _ = write!(out, " batch {batch}");
    }
    out.push('\n');
    let _ = writeln!(out, "evidence {:?}", p.evidence);
    let _ = writeln!(out, "server_side {}", p.server_side_history);
    // Steps are written as their Debug was before they had `look`: only looks change.
    let progress = format!("{:?}", p.progress).replace(", look: false }", " }");
    let _ = writeln!(out, "progress {progress}");
    let _ = writeln!(out, "verdicts {:?}", p.verdicts);
    let _ = writeln!(out, "breakpoint {:?}", p.breakpoint);
    out
}

fn digest(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// The configs each body is projected under: everything on, the header-only reading
/// (progress and evidence off), and a request budget that forces evidence out.
fn configs() -> Vec<(&'static str, Config)> {
    let off = Config {
        evidence_retention: Some(false),
        progress_tracking: Some(false),
        ..on()
    };
    let budget = Config {
        request_budget_bytes: Some(24 * 1024),
        ..on()
    };
    let lean = Config {
        live_page: staleguard::LivePage::Lean,
        ..on()
    };
    vec![
        ("on", on()),
        ("bare", off),
        ("budget", budget),
        ("lean", lean),
    ]
}

/// The body of `path` in every wire format it can be written in.
fn formats(path: &Path) -> Vec<(&'static str, RequestFormat, String)> {
    let body = read(path);
    if path.to_string_lossy().ends_with(".anthropic.json") {
        return vec![("anthropic", RequestFormat::Anthropic, body)];
    }
    vec![
        (
            "responses",
            RequestFormat::Responses,
            chat_to_responses(&body),
        ),
        (
            "gemini-cli",
            RequestFormat::Gemini,
            chat_to_gemini(&body, GeminiClient::Cli),
        ),
        (
            "gemini-ids",
            RequestFormat::Gemini,
            chat_to_gemini(&body, GeminiClient::WithIds),
        ),
        ("auto", RequestFormat::Auto, body.clone()),
        ("chat", RequestFormat::OpenAiChat, body),
    ]
}

/// The projections of one body: plain, with verdicts, and twice with one memo (the second
/// resumes from the first's checkpoint where the format resumes).
fn projections(body: &str, format: RequestFormat, config: &Config) -> Vec<(&'static str, String)> {
    let run = |options: Options<'_>| match project(body, format, config, options) {
        Ok(p) => describe(&p),
        Err(e) => format!("error {e}"),
    };
    let memo = Memo::default();
    let with_memo = Options {
        memo: Some(&memo),
        ..Options::default()
    };
    let verdicts = Options {
        verdicts: true,
        ..Options::default()
    };
    vec![
        ("plain", run(Options::default())),
        ("verdicts", run(verdicts)),
        ("memo1", run(with_memo)),
        ("memo2", run(with_memo)),
    ]
}

/// Every output's digest. The bodies are shared out among the machine's cores: this is the
/// longest test of the suite, and cargo runs test binaries one after another.
fn current() -> BTreeMap<String, String> {
    let bodies = bodies();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut digests = std::thread::scope(|scope| {
        // Every n-th body to each: big recordings sit side by side in the sorted list.
        let parts: Vec<_> = (0..threads)
            .map(|first| {
                let part: Vec<&PathBuf> = bodies.iter().skip(first).step_by(threads).collect();
                scope.spawn(move || digests_of(&part))
            })
            .collect();
        let mut all = BTreeMap::new();
        for part in parts {
            all.extend(part.join().expect("a digest thread"));
        }
        all
    });
    let big = bench_request::build_request();
    for (run, text) in projections(&big, RequestFormat::OpenAiChat, &on()) {
        digests.insert(format!("bench-10MB chat on {run}"), digest(&text));
    }
    digests
}

fn digests_of(paths: &[&PathBuf]) -> BTreeMap<String, String> {
    let mut digests = BTreeMap::new();
    let root = fixtures();
    for path in paths {
        let rel = path
            .strip_prefix(&root)
            .expect("a body under the fixture folder");
        let shown = rel.display();
        for (format_name, format, body) in formats(path) {
            for (config_name, config) in configs() {
                for (run, text) in projections(&body, format, &config) {
                    let key = format!("{shown} {format_name} {config_name} {run}");
                    digests.insert(key, digest(&text));
                }
            }
        }
    }
    digests
}

#[test]
fn outputs_match_the_digests_taken_before_the_reorganisation() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIGESTS);
    let now = current();
    if std::env::var_os("STALEGUARD_BLESS").is_some() {
        let text: String = now.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        std::fs::write(&path, text).expect("write digests");
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (take them with STALEGUARD_BLESS=1)",
            path.display()
        )
    });
    let kept: BTreeMap<String, String> = kept
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let changed: Vec<&String> = kept
        .keys()
        .filter(|k| now.get(*k).is_some_and(|v| Some(v) != kept.get(*k)))
        .collect();
    let new: Vec<&String> = now.keys().filter(|k| !kept.contains_key(*k)).collect();
    let missing: Vec<&String> = kept.keys().filter(|k| !now.contains_key(*k)).collect();
    assert!(
        changed.is_empty() && new.is_empty() && missing.is_empty(),
        "of {} outputs, {} changed, {} are new (a new recording: take them), {} missing;\nchanged: {:#?}\nnew: {:?}\nmissing: {:?}",
        now.len(),
        changed.len(),
        new.len(),
        missing.len(),
        changed.iter().take(40).collect::<Vec<_>>(),
        new.first(),
        missing.first()
    );
    assert!(now.len() > 1000, "only {} outputs held", now.len());
}
