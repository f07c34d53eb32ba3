//! What the `staleguard-lean` strategy did to each page it sent lean: tokens before and
//! after, and whether every actionable ref of the page is still in its lean form.

use serde::Serialize;
use staleguard::{Request, RequestFormat, ResultReport, CONTROL_ROLES};

use crate::Failure;

/// One page the lean strategy sent lean, measured the first turn it was.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LeanPage {
    /// The first turn (1-based) whose request carried it.
    pub turn: usize,
    pub message: usize,
    pub url: Option<String>,
    pub bytes_whole: usize,
    pub bytes_lean: usize,
    pub tokens_whole: usize,
    pub tokens_lean: usize,
    /// Refs of the page's controls (a control role, or `[cursor=pointer]`).
    pub actionable_refs: usize,
    /// Those missing from the lean form: each one is a failure of the lean page.
    pub missing_refs: Vec<String>,
}

/// The pages of `lean` (a request as the lean strategy sent it) that `reports` say were
/// folded and `seen` does not hold yet, measured against `whole` (the request as recorded).
pub(crate) fn pages(
    turn: usize,
    whole: &str,
    lean: &str,
    reports: &[ResultReport],
    bpe: &tiktoken_rs::CoreBPE,
    seen: &mut Vec<LeanPage>,
) -> Result<(), Failure> {
    let folded: Vec<&ResultReport> = reports
        .iter()
        .filter(|r| r.folded.is_some())
        .filter(|r| !seen.iter().any(|p| p.message == r.message))
        .collect();
    if folded.is_empty() {
        return Ok(());
    }
    let whole = Request::read(whole, RequestFormat::Auto)?;
    let lean = Request::read(lean, RequestFormat::Auto)?;
    for r in folded {
        let (Some(before), Some(after)) = (result_text(&whole, r.item), result_text(&lean, r.item))
        else {
            continue;
        };
        let actionable = actionable_refs(before);
        let missing_refs = actionable
            .iter()
            .filter(|id| !after.contains(&format!("[ref={id}]")))
            .cloned()
            .collect();
        seen.push(LeanPage {
            turn: turn + 1,
            message: r.message,
            url: r.url.as_deref().map(str::to_string),
            bytes_whole: before.len(),
            bytes_lean: after.len(),
            tokens_whole: bpe.encode_ordinary(before).len(),
            tokens_lean: bpe.encode_ordinary(after).len(),
            actionable_refs: actionable.len(),
            missing_refs,
        });
    }
    Ok(())
}

/// The text of the tool result at transcript index `item`, if that is one.
fn result_text<'r>(request: &'r Request<'_>, item: usize) -> Option<&'r str> {
    request
        .tool_results()
        .find_map(|(i, text)| (i == item).then_some(text))
}

/// The refs of a page tree's controls: lines whose role is a control role or that carry
/// `[cursor=pointer]`. Read here from the lines themselves, apart from the core's folding.
fn actionable_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let role: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        if !(CONTROL_ROLES.contains(&role.as_str()) || line.contains("[cursor=pointer]")) {
            continue;
        }
        let Some(at) = line.find("[ref=") else {
            continue;
        };
        let id: String = line[at + 5..].chars().take_while(|&c| c != ']').collect();
        out.push(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_pointer_lines_are_actionable() {
        let tree = "```yaml\n- paragraph [ref=e1]: Hi\n- link \"A\" [ref=e2] [cursor=pointer]:\n  - /url: a\n- generic [ref=e3] [cursor=pointer]: card\n- button \"Go\" [ref=e4]\n- text: \"- link [ref=e9]\"\n```";
        assert_eq!(actionable_refs(tree), ["e2", "e3", "e4"]);
    }
}
