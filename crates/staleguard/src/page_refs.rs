//! The refs a page offers and what each names, looked up only when a call names one.
//!
//! A page's refs are the refs of the trees that showed it: a full tree, and the diffs merged
//! onto it since. Most pages are never acted on by ref, and a large one has tens of
//! thousands of refs, so taking a tree in only keeps it (its text and its reading, both
//! shared, not copied); the index over its refs is built on the first lookup, once, and
//! shared by every copy of the page's refs (the guard's history holds one per observation).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;
use hashbrown::hash_table::{Entry, HashTable};

use crate::observation::aria::ref_hash;
use crate::observation::Node;
use crate::reading::{Reading, RefPiece};

/// An element a ref named on a page: role and name. Short strings are kept inline: a page
/// has thousands of refs, and the guard keeps one of these for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Its aria role (`button`, `link`, ...).
    pub role: CompactString,
    /// Its accessible name.
    pub name: CompactString,
}

/// The refs of a page. Cloning shares it.
#[derive(Clone, Default)]
pub struct PageRefs(Arc<Inner>);

#[derive(Default)]
struct Inner {
    layers: Vec<Arc<Layer>>,
    index: OnceLock<Index>,
}

/// One tree that named refs of the page.
struct Layer {
    text: Arc<str>,
    reading: Arc<Reading>,
    /// For a diff: the page's nodes after it was merged. Refs of nodes the diff removed are
    /// gone from the page.
    merged: Option<Arc<Vec<Node>>>,
}

impl Layer {
    fn refs(&self) -> &[RefPiece] {
        &self.reading.tree(&self.text).refs
    }

    fn id(&self, at: u32) -> &str {
        self.refs()
            .get(at as usize)
            .map_or("", |r| r.id.get(&self.text))
    }

    /// The ref at `at` and what it names.
    fn element(&self, at: u32) -> Option<(&str, Element)> {
        let r = self.refs().get(at as usize)?;
        let element = Element {
            role: CompactString::from(r.role.get(&self.text)),
            name: CompactString::from(r.name.get(&self.text)),
        };
        Some((r.id.get(&self.text), element))
    }
}

/// Where each ref of the page was last named: `(layer, position in its refs)`.
struct Index {
    hasher: ahash::RandomState,
    table: HashTable<(u32, u32)>,
    /// Refs one tree names twice as different elements. A server that prints names
    /// unescaped (Chrome DevTools MCP keeps a `<pre>`'s line breaks) lets page text print a
    /// line that reads as a node: a forged line that reuses a real ref names it twice.
    twice: HashSet<CompactString>,
}

impl PageRefs {
    /// The refs of a full tree: the page as `reading` of `text` shows it.
    pub(crate) fn of_tree(text: Arc<str>, reading: Arc<Reading>) -> PageRefs {
        PageRefs::from_layers(vec![Arc::new(Layer {
            text,
            reading,
            merged: None,
        })])
    }

    /// These refs updated by a diff: its refs name what they say (`[unchanged]` ones keep
    /// what they named), and only refs of `merged`, the page's nodes after the merge, stay.
    pub(crate) fn with_diff(
        &self,
        text: Arc<str>,
        reading: Arc<Reading>,
        merged: Option<Arc<Vec<Node>>>,
    ) -> PageRefs {
        let mut layers = self.0.layers.clone();
        layers.push(Arc::new(Layer {
            text,
            reading,
            merged,
        }));
        PageRefs::from_layers(layers)
    }

    fn from_layers(layers: Vec<Arc<Layer>>) -> PageRefs {
        PageRefs(Arc::new(Inner {
            layers,
            index: OnceLock::new(),
        }))
    }

    /// What ref `id` names on the page.
    pub fn get(&self, id: &str) -> Option<Element> {
        self.find(id)
            .and_then(|at| self.element(at))
            .map(|(_, e)| e)
    }

    /// Whether the page offers ref `id`.
    pub fn contains_key(&self, id: &str) -> bool {
        self.find(id).is_some()
    }

    /// Whether one tree of the page names ref `id` as two different elements: which of them
    /// is the page's, its text cannot tell.
    pub(crate) fn named_twice(&self, id: &str) -> bool {
        !self.0.layers.is_empty() && self.index().twice.contains(id)
    }

    /// Whether the page offers no ref.
    pub fn is_empty(&self) -> bool {
        self.0.layers.is_empty() || self.index().table.is_empty()
    }

    /// How many refs the page offers.
    pub fn len(&self) -> usize {
        self.index().table.len()
    }

    /// Every ref of the page and what it names, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Element)> + '_ {
        self.index().table.iter().filter_map(|&at| self.element(at))
    }

    fn element(&self, (layer, at): (u32, u32)) -> Option<(&str, Element)> {
        self.0.layers.get(layer as usize)?.element(at)
    }

    fn find(&self, id: &str) -> Option<(u32, u32)> {
        if self.0.layers.is_empty() {
            return None;
        }
        let index = self.index();
        let layers = &self.0.layers;
        index
            .table
            .find(index.hasher.hash_one(id), |&(l, at)| {
                layers.get(l as usize).is_some_and(|l| l.id(at) == id)
            })
            .copied()
    }

    fn index(&self) -> &Index {
        self.0.index.get_or_init(|| Index::build(&self.0.layers))
    }
}

impl Index {
    /// Takes the layers in order, as the pages they describe were taken in.
    fn build(layers: &[Arc<Layer>]) -> Index {
        let hasher = ahash::RandomState::new();
        let capacity = layers.first().map_or(0, |l| l.refs().len());
        let mut table = HashTable::with_capacity(capacity);
        let mut twice = HashSet::new();
        let id_at = |&(l, at): &(u32, u32)| layers.get(l as usize).map_or("", |l| l.id(at));
        for (l, layer) in (0u32..).zip(layers) {
            for (at, r) in (0u32..).zip(layer.refs()) {
                let id = r.id.get(&layer.text);
                let hash = hasher.hash_one(id);
                let entry = table.entry(
                    hash,
                    |e: &(u32, u32)| id_at(e) == id,
                    |e: &(u32, u32)| hasher.hash_one(id_at(e)),
                );
                match entry {
                    // `ref=e4 [unchanged]` names no role: it keeps what the base page said.
                    Entry::Occupied(_) if r.role.get(&layer.text).is_empty() => {}
                    Entry::Occupied(mut o) => {
                        let (was_layer, was_at) = *o.get();
                        let differs = || {
                            layer.element(was_at).map(|(_, e)| e)
                                != layer.element(at).map(|(_, e)| e)
                        };
                        if was_layer == l && differs() {
                            twice.insert(CompactString::from(id));
                        }
                        *o.get_mut() = (l, at);
                    }
                    Entry::Vacant(v) => {
                        v.insert((l, at));
                    }
                }
            }
            if let Some(nodes) = &layer.merged {
                let present: HashSet<u64> =
                    nodes.iter().map(|n| n.id).filter(|&id| id != 0).collect();
                table.retain(|e| present.contains(&ref_hash(id_at(e))));
            }
        }
        Index {
            hasher,
            table,
            twice,
        }
    }
}

impl std::fmt::Debug for PageRefs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageRefs")
            .field("trees", &self.0.layers.len())
            .field("indexed", &self.0.index.get().map(|i| i.table.len()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::memo::Memo;
    use crate::progress::Tracker;
    use crate::reading::ResultText;

    const FULL: &str = "### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- generic [ref=e1]:\n  - button \"Button 1\" [ref=e2]\n  - link \"Old offer\" [ref=e4]\n```";
    const DIFF: &str = "### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- <changed> generic [active] [ref=e1]:\n  - ref=e2 [unchanged]\n  - button \"Button 2\" [ref=e3]\n```";

    fn take(tracker: &mut Tracker, at: usize, text: &str) {
        tracker.result(at, &ResultText::read(text, &Memo::for_request()), false);
    }

    fn named(tracker: &Tracker, id: &str) -> Option<(String, String)> {
        let e = tracker.page().refs.get(id)?;
        Some((e.role.to_string(), e.name.to_string()))
    }

    #[test]
    fn the_index_waits_for_the_first_lookup_and_is_shared() {
        let mut tracker = Tracker::new(3);
        take(&mut tracker, 0, FULL);
        let refs = &tracker.page().refs;
        assert!(
            refs.0.index.get().is_none(),
            "taking a tree in indexes nothing"
        );
        let kept = tracker.history()[0].refs.clone();
        assert!(refs.contains_key("e2"));
        assert_eq!(kept.0.index.get().map(|i| i.table.len()), Some(3));
    }

    #[test]
    fn a_diff_keeps_unchanged_refs_adds_new_ones_and_drops_removed_ones() {
        let mut tracker = Tracker::new(3);
        take(&mut tracker, 0, FULL);
        take(&mut tracker, 1, DIFF);
        let button = |name: &str| Some(("button".to_string(), name.to_string()));
        assert_eq!(named(&tracker, "e2"), button("Button 1"));
        assert_eq!(named(&tracker, "e3"), button("Button 2"));
        assert_eq!(named(&tracker, "e4"), None, "the diff removed it");
        assert_eq!(named(&tracker, "e1").map(|e| e.0), Some("generic".into()));
        assert_eq!(tracker.page().refs.len(), 3);
        // The page as first seen still offers what it offered then.
        let first = &tracker.history()[0].refs;
        assert!(first.contains_key("e4") && !first.contains_key("e3"));
    }

    #[test]
    fn a_full_tree_replaces_every_ref() {
        let mut tracker = Tracker::new(3);
        take(&mut tracker, 0, FULL);
        let other = FULL
            .replace("shop.test/", "shop.test/b")
            .replace("[ref=e4]", "[ref=e9]");
        take(&mut tracker, 1, &other);
        assert!(tracker.page().refs.contains_key("e9"));
        assert!(!tracker.page().refs.contains_key("e4"));
        let mut ids: Vec<_> = tracker
            .page()
            .refs
            .iter()
            .map(|(id, _)| id.to_string())
            .collect();
        ids.sort();
        assert_eq!(ids, ["e1", "e2", "e9"]);
    }
}
