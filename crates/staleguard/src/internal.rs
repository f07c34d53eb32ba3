//! What the tests and the fuzz targets of this workspace use beyond the crate's interface:
//! the grammars they check text with, the readers they take a body apart with, and a few
//! functions that replay a transcript or weigh what the memo keeps. **Not part of the stable
//! interface**: anything here may change or go in any release, as rustls's `internal` may.
//! No host names it: the CLI, the proxy, the MCP guard and the bindings use the facade
//! (`tests/architecture.rs` checks that).

/// The wire formats, read into a neutral transcript.
pub mod adapter {
    pub use crate::adapter::{
        read_request, read_request_from, read_transcript, ResumeAt, WireRequest, MAX_BREAKPOINTS,
    };
}

/// Our text appended to results: evidence and guidance.
pub mod appendix {
    pub use crate::appendix::is_appendix;
}

/// What an [`Archive`](crate::Archive) keeps.
pub mod archive {
    /// The observations `archive` keeps, oldest first: ID, page, step and original text.
    pub fn entries(archive: &crate::Archive) -> impl Iterator<Item = &crate::archive::Entry> {
        archive.entries()
    }
}

/// The guard over a whole transcript.
pub mod guard {
    use crate::transcript::Transcript;
    use crate::{Config, Memo, Verdict};

    /// The guard's verdict on every browser call of `transcript`, each against the session
    /// before it, under `config`: `(transcript index, verdict)`.
    pub fn verdicts(transcript: &Transcript<'_>, config: &Config) -> Vec<(usize, Verdict)> {
        let tools = crate::tools::BrowserTools::new(&config.browser_tools);
        let memo = Memo::default();
        let session = crate::session::Session::build(transcript, &tools, &memo);
        crate::guard::verdicts(&session, &tools, config.max_repeats).1
    }
}

/// The memo's weights.
pub mod memo {
    pub use crate::memo::weight_of;

    /// The checkpoints `memo` keeps, taken out with the weight it counts for each, the rest
    /// of the memo dropped: a test drops them one by one and counts what that frees.
    pub fn checkpoints_of(memo: crate::Memo) -> Vec<(Box<dyn std::any::Any>, usize)> {
        crate::pipeline::checkpoints_of(memo)
    }

    /// The bytes the reading of `text` holds on the heap, as `memo` keeps it (read to header
    /// depth when it keeps none): what a test holds to [`weight_of`].
    pub fn reading_bytes(memo: &crate::Memo, text: &str) -> usize {
        let reader = crate::reading::Reader {
            memo,
            depth: crate::reading::Depth::Header,
        };
        reader.reading(memo.key(text), text).heap_bytes()
    }
}

/// The observation formats and the aria grammar.
pub mod observation {
    pub use crate::observation::{parse, parse_header, TreeKind, FORMATS};

    /// The aria tree grammar.
    pub mod aria {
        pub use crate::observation::aria::tree_nodes;
    }

    /// Chrome DevTools MCP's format.
    pub mod cdmcp {
        pub use crate::observation::cdmcp::{is_uid, NAME};
    }
}

/// Progress replayed over a whole transcript.
pub mod progress {
    pub use crate::progress::is_submit_like;
    use crate::transcript::Transcript;
    use crate::{Config, Memo, Tracker};

    /// The tracker after every browser call and result of `transcript`, replayed as the
    /// guard replays it (`counting`: as projection counts steps, no refs, history or
    /// submissions kept).
    pub fn replayed(transcript: &Transcript<'_>, config: &Config, counting: bool) -> Tracker {
        let tools = crate::tools::BrowserTools::new(&config.browser_tools);
        let memo = Memo::default();
        let session = crate::session::Session::build(transcript, &tools, &memo);
        let tracker = match counting {
            true => Tracker::counting(config.max_repeats),
            false => Tracker::new(config.max_repeats),
        };
        tracker.replay(&session, |_, _, _, _| {})
    }

    /// Every ref of the newest page `tracker` saw, and what it names.
    pub fn page_refs(tracker: &Tracker) -> &crate::page_refs::PageRefs {
        &tracker.page().refs
    }
}

/// A result's own lines, and receipts.
pub mod receipt {
    pub use crate::result_lines::{observation_id, verification_lines};
}

/// The ref grammar.
pub mod refs {
    pub use crate::refs::{has_ref_token, neutralise, targets};
}

/// The neutral transcript.
pub mod transcript {
    pub use crate::transcript::{Item, Transcript};
}
