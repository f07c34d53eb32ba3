//! What a call's arguments say about the page its result shows: the file a file or shell
//! tool reads (a snapshot file names its page, SPEC 1), and whether the call asked for part
//! of the page only (a targeted or depth-limited snapshot, part of a file).

use serde_json::Value;

/// Argument keys that name the file a file tool reads: Claude Code's `Read`, Gemini CLI's
/// `read_file`, opencode's `read`, and the usual spellings of others.
const FILE_KEYS: &[&str] = &[
    "file_path",
    "filePath",
    "absolute_path",
    "path",
    "file",
    "filename",
];

/// Argument keys that read part of a file (`Read`'s `offset`/`limit`, `read_file`'s
/// `offset`/`limit`, others' line ranges).
const RANGE_KEYS: &[&str] = &[
    "offset",
    "limit",
    "view_range",
    "start_line",
    "end_line",
    "line_start",
    "line_end",
    "lines",
];

/// Arguments of `browser_snapshot` that take part of the page: a subtree (`target`) or the
/// top levels (`depth`).
const PART_KEYS: &[&str] = &["target", "depth", "ref", "selector"];

/// Shell commands that print part of a file.
const PART_COMMANDS: &[&str] = &["head ", "tail ", "sed ", "awk ", "grep "];

/// What the arguments of one call say about its result's page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CallArgs {
    /// The file the call reads, as the call names it (a path, or a shell command's word
    /// that names a file).
    pub file: Option<String>,
    /// The call asks for part of what it reads.
    pub partial: bool,
}

impl CallArgs {
    /// Reads `arguments` (JSON text; anything else says nothing).
    pub(crate) fn of(arguments: &str) -> CallArgs {
        let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
            return CallArgs::default();
        };
        let given = |key: &&str| args.get(*key).is_some_and(|v| !v.is_null());
        let file = FILE_KEYS
            .iter()
            .find_map(|k| args.get(*k)?.as_str())
            .map(str::to_string);
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let file = file.or_else(|| file_in_command(command));
        let partial = RANGE_KEYS.iter().any(given)
            || PART_KEYS.iter().any(given)
            || PART_COMMANDS.iter().any(|c| command.contains(c));
        CallArgs { file, partial }
    }
}

/// The word of a shell command that names a snapshot file (`cat .playwright-mcp/page-x.yml`).
fn file_in_command(command: &str) -> Option<String> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '<' | '>'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"'))
        .find(|w| w.ends_with(".yml") || w.ends_with(".yaml") || w.ends_with(".md"))
        .map(str::to_string)
}

/// The file name of a path (what follows its last `/` or `\`).
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_names_the_file_it_reads() {
        let file = ".playwright-mcp/page-2026-11-30T08-09-13-405Z.yml";
        let calls = [
            serde_json::json!({"file_path": format!("/w/{file}")}),
            serde_json::json!({"absolute_path": format!("/w/{file}")}),
            serde_json::json!({"filePath": format!("/w/{file}")}),
            serde_json::json!({"command": format!("cat '/w/{file}'"), "description": "Read"}),
        ];
        for call in calls {
            let args = CallArgs::of(&call.to_string());
            let read = args.file.as_deref().map(file_name);
            assert_eq!(read, Some("page-2026-11-30T08-09-13-405Z.yml"), "{call}");
            assert!(!args.partial, "{call}");
        }
    }

    #[test]
    fn part_of_a_page_or_file() {
        for call in [
            r#"{"file_path": "/w/p.yml", "offset": 40, "limit": 20}"#,
            r#"{"command": "sed -n 40,80p /w/p.yml"}"#,
            r#"{"target": "e679"}"#,
            r#"{"depth": 2}"#,
        ] {
            assert!(CallArgs::of(call).partial, "{call}");
        }
        for call in [
            r#"{}"#,
            r#"{"target": null}"#,
            "not json",
            r#"{"filename": "x.md"}"#,
        ] {
            assert!(!CallArgs::of(call).partial, "{call}");
        }
    }
}
