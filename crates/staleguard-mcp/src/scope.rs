//! Ref namespacing: `e7` on the third document the model saw becomes `d3e7`, so that a ref
//! from an older document names nothing on the newest one, even when the server reuses ref
//! numbers across documents.

use std::borrow::Cow;

/// The session-unique form of `id` on document `doc`.
pub fn scoped(doc: u32, id: &str) -> String {
    format!("d{doc}{id}")
}

/// Splits one of our scoped refs into its document and the server's ref (the core's
/// grammar, which also undoes scoping for observation IDs).
pub use staleguard::split_scoped as unscope;

/// Rewrites the ref tokens of a page tree (`[ref=e7]`, and `- ref=e7 [unchanged]` in
/// incremental snapshots) whose ID `is_ref` accepts, to their scoped form.
pub fn scope_text<'a>(text: &'a str, doc: u32, is_ref: impl Fn(&str) -> bool) -> Cow<'a, str> {
    staleguard::rescope(text, doc, is_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for id in ["e7", "f1e3", "s1e12"] {
            let s = scoped(12, id);
            assert_eq!(unscope(&s), Some((12, id)));
        }
        assert_eq!(unscope("e7"), None);
        assert_eq!(unscope("d7"), None);
        assert_eq!(unscope("d"), None);
        assert_eq!(unscope("dx7"), None);
        assert_eq!(unscope("d99999999999e1"), None);
    }

    #[test]
    fn scopes_known_refs_only() {
        let tree = "- button \"Go\" [ref=e7] [cursor=pointer]\n- ref=e4 [unchanged]\n- text: see [ref=e99] and xref=e7";
        let out = scope_text(tree, 3, |id| id == "e7" || id == "e4");
        assert_eq!(
            out,
            "- button \"Go\" [ref=d3e7] [cursor=pointer]\n- ref=d3e4 [unchanged]\n- text: see [ref=e99] and xref=e7"
        );
        assert!(matches!(
            scope_text("no refs", 1, |_| true),
            Cow::Borrowed(_)
        ));
    }
}
