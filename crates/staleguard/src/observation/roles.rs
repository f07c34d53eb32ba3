//! The ARIA roles as the readers of a tree sort them, in one place: which roles are
//! controls, which hold prose, which repeat, which are landmarks. Each set names what its
//! readers do with it; where two readers cut the page differently (the quote reader's
//! blocks and the lean page's), both sets stand here side by side, each saying why.

/// Aria roles the model can act on. Their role, name, value and states form the page's
/// controls, and a lean live page keeps every line of one (SPEC 2).
pub const CONTROL_ROLES: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "spinbutton",
    "slider",
    "switch",
    "tab",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "treeitem",
];

/// True for roles listed in [`CONTROL_ROLES`].
pub(crate) fn is_control_role(role: &str) -> bool {
    // A match compiles to a switch on length and byte compares: every node line asks.
    matches!(
        role,
        "button"
            | "link"
            | "textbox"
            | "searchbox"
            | "checkbox"
            | "radio"
            | "combobox"
            | "listbox"
            | "option"
            | "spinbutton"
            | "slider"
            | "switch"
            | "tab"
            | "menuitem"
            | "menuitemcheckbox"
            | "menuitemradio"
            | "treeitem"
    )
}

/// Roles whose text the quote reader ([`aria`](super::aria)) takes as one piece: a paragraph,
/// list item, cell or heading with inline children (`- text:`, `strong`, `emphasis`, links,
/// `code`).
pub(crate) const READING_BLOCK_ROLES: &[&str] = &[
    "paragraph",
    "listitem",
    "cell",
    "gridcell",
    "heading",
    "blockquote",
    "caption",
    "row",
    "term",
    "definition",
    "strong",
    "emphasis",
];

/// Roles that hold rows: their first and last rows with numbers are candidates of their own.
pub(crate) const TABLE_ROLES: &[&str] = &["table", "grid", "treegrid"];

/// Roles shown on the way to a kept line: landmarks, tables and their rows (a row's name
/// tells which item its button acts on), groups.
pub(crate) const PATH_ROLES: &[&str] = &[
    "banner",
    "navigation",
    "main",
    "contentinfo",
    "complementary",
    "region",
    "form",
    "search",
    "dialog",
    "alertdialog",
    "table",
    "grid",
    "treegrid",
    "row",
    "menu",
    "menubar",
    "tablist",
    "toolbar",
    "tree",
    "group",
    "tabpanel",
    "article",
];

/// Roles whose nodes are prose blocks to the lean page: the units it ranks and folds. Not
/// [`READING_BLOCK_ROLES`]: the lean page folds a figure, note or article as one, keeps
/// every heading, and folds a cell or a bold run with the row or paragraph around it, where
/// the quote reader joins the text of each of those into one piece.
pub(crate) const FOLD_BLOCK_ROLES: &[&str] = &[
    "paragraph",
    "listitem",
    "row",
    "term",
    "definition",
    "blockquote",
    "figure",
    "note",
    "caption",
    "article",
];

/// Roles whose children may repeat: lists and tables.
pub(crate) const LIST_ROLES: &[&str] = &[
    "list",
    "table",
    "rowgroup",
    "grid",
    "treegrid",
    "tree",
    "menu",
    "listbox",
    "tablist",
    "directory",
];

/// Live regions and dialogs: what the page says about the agent's last action, kept whole
/// wherever they stand.
pub(crate) const LIVE_ROLES: &[&str] = &["alert", "alertdialog", "status", "dialog", "log"];
