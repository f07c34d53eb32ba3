//! Whether a call's own description of its target plainly disagrees with the element its
//! ref names (SPEC 5, "The description must fit the ref").
//!
//! Plainly means: no content word of the name in the description, and none of the
//! description's in the name. Case, punctuation, role words and stop words aside. A
//! description that names only a role, or only says where something is ("the first
//! result", "Submit"), says nothing to disagree with, and passes; so does an element
//! without a name. False refusals cost a task: when in doubt, it agrees.

/// Words that say nothing about which element is meant: articles, prepositions, role
/// names, and the vague words models use for "that one".
const NOT_CONTENT: &[&str] = &[
    // stop words
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "on",
    "for",
    "and",
    "or",
    "with",
    "at",
    "by",
    "from",
    "this",
    "that",
    "these",
    "those",
    "is",
    "it",
    "its",
    "into",
    "as",
    "my",
    "your",
    "our",
    "me",
    "i",
    "you",
    "we",
    "be",
    "s",
    // roles and what models call them
    "button",
    "btn",
    "link",
    "links",
    "textbox",
    "text",
    "box",
    "field",
    "input",
    "checkbox",
    "check",
    "radio",
    "radiobutton",
    "combobox",
    "combo",
    "dropdown",
    "drop",
    "down",
    "select",
    "selector",
    "option",
    "menu",
    "menuitem",
    "item",
    "tab",
    "heading",
    "header",
    "image",
    "img",
    "icon",
    "spinbutton",
    "spinner",
    "slider",
    "switch",
    "toggle",
    "listbox",
    "list",
    "listitem",
    "row",
    "cell",
    "column",
    "table",
    "region",
    "dialog",
    "modal",
    "form",
    "search",
    "searchbox",
    "label",
    "element",
    "control",
    "area",
    "generic",
    "paragraph",
    "section",
    "card",
    "banner",
    "navigation",
    "nav",
    "tile",
    "entry",
    "field's",
    // where, which one, how vague
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "last",
    "next",
    "previous",
    "prev",
    "main",
    "primary",
    "secondary",
    "top",
    "bottom",
    "left",
    "right",
    "upper",
    "lower",
    "one",
    "result",
    "results",
    "submit",
    "action",
    "here",
    "new",
    "other",
    "current",
    "selected",
    "page",
    "close",
    "open",
    "more",
    "cta",
    "arrow",
    "clickable",
];

/// The content words of `text`: lower-cased alphanumeric runs that are not [`NOT_CONTENT`].
fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !NOT_CONTENT.contains(&w.as_str()))
        .collect()
}

/// Two words that name the same thing: equal, or one a prefix of the other over at least
/// four characters (`verify` and `verification`, `subscribe` and `subscription`).
fn same_word(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.chars().count() >= 4 && long.starts_with(short))
}

/// True when `description` (the call's words) and the element named `name` plainly
/// disagree: both have content words, and no content word of one is in the other.
pub(crate) fn plainly_disagrees(description: &str, name: &str) -> bool {
    let said = content_words(description);
    let named = content_words(name);
    if said.is_empty() || named.is_empty() {
        return false;
    }
    // A name run together in the description ("signin" for "Sign in") is no disagreement.
    let joined_name: String = named.concat();
    let joined_said: String = said.concat();
    let shared = said
        .iter()
        .any(|d| named.iter().any(|n| same_word(d, n)) || joined_name.contains(d.as_str()))
        || named.iter().any(|n| joined_said.contains(n.as_str()));
    !shared
}

/// True when `description` and the element named `name` plainly agree: both have content
/// words, and one of them is in the other. An element without a name agrees with nothing.
pub(crate) fn plainly_agrees(description: &str, name: &str) -> bool {
    !content_words(description).is_empty()
        && !content_words(name).is_empty()
        && !plainly_disagrees(description, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_mismatch_disagrees() {
        assert!(plainly_disagrees(
            "Verify & Sign In button",
            "Resend in 39s"
        ));
        // A shared word is no plain disagreement, even where the element is another.
        assert!(!plainly_disagrees(
            "Place order button",
            "Cancel this order"
        ));
        assert!(plainly_disagrees("Review order button", "Home"));
    }

    #[test]
    fn loose_descriptions_pass() {
        for (description, name) in [
            ("the button", "Place order"),
            ("first result", "Review: Northwind H2 home battery"),
            ("Submit", "Place order"),
            ("Submit button", "Subscribe"),
            ("icon button", "Close"),
            ("", "Place order"),
            ("Close dialog", "×"),
            ("Name textbox", "Name"),
            ("Quantity spinbutton", "Quantity"),
            ("Colour dropdown", "Colour"),
            ("Details A-03 button", "Details A-03"),
            ("signin button", "Sign in"),
            ("Verify & Sign In button", "Verify & Sign In"),
            ("Email address field", "Your email"),
            ("Subscribe to newsletter", "Subscribe"),
            ("link to the datasheet", "Open the H2 datasheet"),
            ("Back to top link", "Back to top"),
            ("button", ""),
        ] {
            assert!(
                !plainly_disagrees(description, name),
                "{description:?} vs {name:?}"
            );
        }
    }
}
