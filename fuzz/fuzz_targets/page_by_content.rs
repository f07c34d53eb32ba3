//! Observations by content: the results of tools that are no browser tools (a snapshot file
//! read back with `Read`, `cat`, `read_file`), in sessions built from a script
//! (`staleguard_fuzz::script`: the seeds are the recorded sessions, the read-backs among
//! them). Flag 0 picks `page_tools`, flag 1 bit 1 an Anthropic body.
//!
//! Asserts: never a panic; a non-browser result is a page exactly when the first format that
//! reads it is one that finds pages by content (`by_content`) and sees refs in it, and its
//! tool may carry pages (SPEC 1: "a result is a page by what it says, never by a ref
//! anywhere in it"); every browser result is a step; the SPEC 2 body invariants hold
//! (`check_any`). For each result's text on its own: the by-content formats find a page at
//! header depth exactly when they do at full depth, and a bare snapshot tree read back with
//! line numbers (Claude Code's `→`, `cat -n`, opencode's `00001| ` and `1: `) is the same page.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard::internal::observation::{self, TreeKind, FORMATS};
use staleguard::{Config, Options, RequestFormat};
use staleguard_fuzz::check::{check_any, on};
use staleguard_fuzz::script::Script;

fuzz_target!(|text: &str| {
    let script = Script::parse(text);
    let config = Config {
        page_tools: match script.flag(0) % 4 {
            0 => vec!["*".into()],
            1 => vec![],
            2 => vec!["Read".into(), "read_file".into(), "read".into()],
            _ => vec!["Bash".into(), "mcp__*".into()],
        },
        ..on()
    };
    let body = match script.flag(1) & 2 {
        0 => script.chat(),
        _ => script.anthropic(),
    }
    .to_string();
    let p = staleguard::project(&body, RequestFormat::Auto, &config, Options::default())
        .expect("a rendered body projects");
    check_any(&body, &p, RequestFormat::Auto, &config);

    let tools = config.tools();
    let report = p.report();
    for (id, call) in script.calls() {
        let reported = report
            .results
            .iter()
            .any(|r| r.call_id.as_deref() == Some(id.as_str()));
        let text = call.result.as_str();
        if tools.is_browser(&call.name) {
            assert!(reported, "{id}: a browser result is a step");
            continue;
        }
        one_text(text);
        // A string that holds JSON parts is read as those parts: another text.
        if text.trim_start().starts_with(['[', '{']) {
            continue;
        }
        let page = tools.carries_pages(&call.name)
            && text.contains("[ref=")
            && observation::parse_header(text).is_some_and(|o| {
                o.is_observation()
                    && FORMATS
                        .iter()
                        .any(|f| f.name() == o.format && f.by_content())
            });
        assert_eq!(reported, page, "{id} ({}): page by content", call.name);
    }
});

/// What one result's text must show on its own.
fn one_text(text: &str) {
    for format in FORMATS.iter().filter(|f| f.by_content()) {
        let full = format.parse(text);
        let header = format.parse_header(text);
        assert_eq!(
            full.as_ref().map(|o| (o.kind, o.is_observation())),
            header.as_ref().map(|o| (o.kind, o.is_observation())),
            "{}: full and header depth disagree",
            format.name()
        );
    }
    // A bare tree, every line an aria line: read back with numbers, the same page.
    let lines: Vec<&str> = text.lines().collect();
    let aria = |l: &&str| {
        let body = l.trim_start_matches(' ');
        (l.len() - body.len()).is_multiple_of(2) && body.starts_with("- ")
    };
    if lines.len() < 2 || !lines.iter().all(aria) || text.contains('\r') {
        return;
    }
    let Some(file) = FORMATS
        .iter()
        .find(|f| f.name() == "playwright-snapshot-file")
    else {
        return;
    };
    let Some(bare) = file.parse(text).filter(|o| o.kind == TreeKind::Full) else {
        return;
    };
    let bare_ids: Vec<String> = bare.refs.iter().map(|r| r.id.to_string()).collect();
    let number = |style: usize| -> String {
        let numbered: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| match style {
                0 => format!("{:>6}→{l}", i + 1),
                1 => format!("{:>6}\t{l}", i + 1),
                2 => format!("{:05}| {l}", i + 1),
                _ => format!("{}: {l}", i + 1),
            })
            .collect();
        numbered.join("\n")
    };
    for style in 0..4 {
        let read = number(style);
        let back = file
            .parse(&read)
            .unwrap_or_else(|| panic!("numbered ({style}) is no page: {read:?}"));
        assert_eq!(back.kind, TreeKind::Full, "numbered ({style}): {read:?}");
        let ids: Vec<String> = back.refs.iter().map(|r| r.id.to_string()).collect();
        assert_eq!(ids, bare_ids, "numbered ({style}): {read:?}");
    }
}
