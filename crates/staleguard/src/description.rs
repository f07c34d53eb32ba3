//! Whether a call's own description of its target disagrees with the element its ref
//! names (SPEC 5, "The description must fit the ref").
//!
//! "Plainly" is read conservatively, because false refusals cost a task: the rule refuses
//! on positive disagreement only. No content word of the name in the description and none
//! of the description's in the name (case, punctuation, role words and stop words aside,
//! words compared by stem) is a disagreement; so is a description whose action is the
//! opposite of the name's ("Confirm booking" for "Cancel booking"), and one that names
//! another control of the page better than the ref's own name does. A name with no word in
//! it (a count, an icon), a description that only names a role or says where something is
//! ("the first result", "Submit"), and a description in another language than the page
//! give no verdict, unless the description names another element of the page exactly.

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
    words(text)
        .filter(|w| !NOT_CONTENT.contains(&w.as_str()))
        .collect()
}

/// Every lower-cased alphanumeric run of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

static STEMMER: std::sync::LazyLock<rust_stemmers::Stemmer> =
    std::sync::LazyLock::new(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English));

/// Two words that name the same thing: equal, or one a prefix of the other over at least
/// four characters (`verify` and `verification`), or of one stem ([`STEM`] characters in
/// common: `register` and `registration`, `subscribe` and `subscription`).
fn same_word(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long
        || (short.chars().count() >= 4 && long.starts_with(short))
        || a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count() >= STEM
}

/// Characters two words share from their start where they name one thing.
const STEM: usize = 6;

/// A name's words, when it has any: a count or an icon ("🛒 1") says nothing to disagree
/// with.
fn name_words(name: &str) -> Vec<String> {
    let named = content_words(name);
    if named.iter().any(|w| w.chars().any(char::is_alphabetic)) {
        named
    } else {
        Vec::new()
    }
}

/// How many of the words `said` the name whose words are `named` holds.
fn matched(said: &[String], named: &[String]) -> usize {
    let joined: String = named.concat();
    said.iter()
        .filter(|d| named.iter().any(|n| same_word(d, n)) || joined.contains(d.as_str()))
        .count()
}

/// True when the words `said` and `named` share none: a name run together in the
/// description ("signin" for "Sign in") is shared.
fn share_none(said: &[String], named: &[String]) -> bool {
    let joined_said: String = said.concat();
    matched(said, named) == 0 && !named.iter().any(|n| joined_said.contains(n.as_str()))
}

/// Actions and their opposites: a description that says one of a control named by the
/// other means another control, whatever words they share ("Confirm booking" is not
/// "Cancel booking").
const OPPOSITES: &[(&str, &str)] = &[
    ("confirm", "cancel"),
    ("accept", "decline"),
    ("accept", "reject"),
    ("approve", "reject"),
    ("subscribe", "unsubscribe"),
    ("signin", "signout"),
    ("login", "logout"),
    ("add", "remove"),
    ("save", "discard"),
    ("enable", "disable"),
    ("next", "previous"),
    ("show", "hide"),
    ("allow", "deny"),
    ("agree", "disagree"),
    ("follow", "unfollow"),
    ("lock", "unlock"),
    ("mute", "unmute"),
    ("install", "uninstall"),
    ("expand", "collapse"),
    ("include", "exclude"),
    ("increase", "decrease"),
];

/// The words of `text` that may name an action: every word, with "sign in", "log out" and
/// the like run together.
fn action_words(text: &str) -> Vec<String> {
    let all: Vec<String> = words(text).collect();
    let mut out = all.clone();
    for pair in all.windows(2) {
        if matches!(pair[0].as_str(), "sign" | "log") && matches!(pair[1].as_str(), "in" | "out") {
            out.push(format!("{}{}", pair[0], pair[1]));
        }
    }
    out
}

/// True when the description says an action whose opposite the name says, and neither
/// says both.
fn opposite_actions(description: &str, name: &str) -> bool {
    let (said, named) = (action_words(description), action_words(name));
    let stem = |w: &str| STEMMER.stem(w).into_owned();
    let has = |words: &[String], action: &str| {
        let action = stem(action);
        words.iter().any(|w| stem(w) == action)
    };
    OPPOSITES.iter().any(|&(a, b)| {
        let one_way =
            |x: &str, y: &str| has(&said, x) && has(&named, y) && !has(&said, y) && !has(&named, x);
        one_way(a, b) || one_way(b, a)
    })
}

/// Function words of languages other than English that descriptions are written in: a
/// description that holds one and shares no word with the page is in another language.
const OTHER_LANGUAGES: &[&str] = &[
    "al",
    "el",
    "la",
    "los",
    "las",
    "del",
    "ir",
    "para",
    "con",
    "botón",
    "enlace",
    "le",
    "les",
    "du",
    "des",
    "au",
    "aux",
    "pour",
    "avec",
    "bouton",
    "lien",
    "der",
    "die",
    "das",
    "und",
    "zum",
    "zur",
    "mit",
    "auf",
    "schaltfläche",
    "il",
    "per",
    "di",
    "da",
    "do",
    "dos",
    "em",
    "och",
    "het",
    "een",
    "voor",
    "naar",
];

/// True when the description is in another language than the page whose elements are
/// `page` (ref and name): it holds another language's function word, and no content word
/// of it is on the page.
fn another_language(description: &str, page: &[(String, String)]) -> bool {
    if !words(description).any(|w| OTHER_LANGUAGES.contains(&w.as_str())) {
        return false;
    }
    let said = content_words(description);
    !page
        .iter()
        .any(|(_, name)| !share_none(&said, &content_words(name)))
}

/// True when `description` (the call's words) and the element `id` named `name` disagree
/// positively (see the module's notes). `page` gives the live page's elements (ref and
/// name); it is called only where a rule weighs the description against them, not when
/// the ref's own name holds every word the description says.
pub(crate) fn disagrees(
    description: &str,
    id: &str,
    name: &str,
    page: impl FnOnce() -> Vec<(String, String)>,
) -> bool {
    // "Next page" for "Previous page": role and place words alone, but opposite actions.
    if opposite_actions(description, name) {
        return true;
    }
    let said = content_words(description);
    let named = name_words(name);
    if said.is_empty() || named.is_empty() {
        return false;
    }
    if share_none(&said, &named) {
        let page = page();
        return !another_language(description, &page)
            || names_another(&said, id, name, &page, said.len());
    }
    // Shared words are not agreement: another control may be named better.
    let own = matched(&said, &named);
    own < said.len() && names_another(&said, id, name, &page(), own.max(1) + 1)
}

/// True when another element of the page (not `id`, and not named like it) holds at least
/// `at_least` of the words `said`, and all of them.
fn names_another(
    said: &[String],
    id: &str,
    name: &str,
    page: &[(String, String)],
    at_least: usize,
) -> bool {
    page.iter().any(|(other, other_name)| {
        other != id && other_name != name && {
            let words = name_words(other_name);
            let m = matched(said, &words);
            m >= at_least && m == said.len()
        }
    })
}

/// True when `description` and the element named `name` plainly agree: both have content
/// words, and they share one, with no opposite action between them. An element without a
/// name agrees with nothing.
pub(crate) fn plainly_agrees(description: &str, name: &str) -> bool {
    let said = content_words(description);
    let named = name_words(name);
    !said.is_empty()
        && !named.is_empty()
        && !share_none(&said, &named)
        && !opposite_actions(description, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule alone, with a page of no other element.
    fn plainly_disagrees(description: &str, name: &str) -> bool {
        disagrees(description, "e1", name, Vec::new)
    }

    fn page(names: &[(&str, &str)]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|(id, n)| (id.to_string(), n.to_string()))
            .collect()
    }

    #[test]
    fn names_without_words_give_no_verdict() {
        // opencode sessions by other people: links to a cart named by an icon and a count.
        assert!(!plainly_disagrees("Link al carrito", "🛒 1"));
        assert!(!plainly_disagrees("Ir al carrito", "🛒 2"));
        assert!(!plainly_disagrees("Cart link", "3"));
    }

    #[test]
    fn words_compare_by_stem() {
        assert!(!plainly_disagrees(
            "Register button",
            "Button to complete the registration"
        ));
        assert!(!plainly_disagrees("Subscription form", "Subscribe"));
        assert!(plainly_disagrees("Register button", "Log in"));
    }

    #[test]
    fn opposite_actions_disagree_whatever_they_share() {
        for (description, name) in [
            ("Confirm booking button", "Cancel booking"),
            ("Accept cookies", "Decline cookies"),
            ("Subscribe to newsletter", "Unsubscribe from newsletter"),
            ("Sign in button", "Sign out"),
            ("Add item", "Remove item"),
            ("Save changes", "Discard changes"),
            ("Enable notifications", "Disable notifications"),
            ("Next page", "Previous page"),
        ] {
            assert!(
                plainly_disagrees(description, name),
                "{description:?} vs {name:?}"
            );
            assert!(
                !plainly_agrees(description, name),
                "{description:?} vs {name:?}"
            );
        }
        // An action that says both, or the same action, is no opposite.
        assert!(!plainly_disagrees(
            "Cancel booking button",
            "Cancel booking"
        ));
        assert!(!plainly_disagrees(
            "Confirm cancellation",
            "Confirm: cancel booking"
        ));
        assert!(!plainly_disagrees("Add to cart", "Add to cart"));
    }

    #[test]
    fn a_description_that_names_another_control_better_disagrees() {
        let names = page(&[
            ("e1", "Cancel this order"),
            ("e2", "Place order"),
            ("e3", "Home"),
        ]);
        let names = || names.clone();
        assert!(disagrees(
            "Place order button",
            "e1",
            "Cancel this order",
            names
        ));
        // The ref's own name, or one it shares with another, is no better.
        assert!(!disagrees("Place order button", "e2", "Place order", names));
        let twice = page(&[("e1", "Add to cart"), ("e2", "Add to cart")]);
        assert!(!disagrees(
            "Add to cart button",
            "e1",
            "Add to cart",
            || twice
        ));
        // Another element that holds only some of the words is not better.
        assert!(!disagrees(
            "Order summary",
            "e1",
            "Cancel this order",
            names
        ));
    }

    #[test]
    fn another_language_gives_no_verdict_unless_it_names_another_element() {
        let names = page(&[("e1", "Checkout"), ("e2", "Carrito")]);
        let names = || names.clone();
        assert!(!disagrees("Botón de pagar", "e1", "Checkout", names));
        assert!(disagrees("Ir al carrito", "e1", "Checkout", names));
        // Without another language's word, no shared word is a disagreement.
        assert!(disagrees("Payment button", "e1", "Checkout", names));
    }

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
