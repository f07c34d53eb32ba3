//! What the hosts of this workspace (the CLI, the proxy, the MCP guard, the Python package),
//! the fuzz targets and the tests use beyond the crate's interface: the stages and grammars
//! they drive themselves. **Not part of the stable interface**: anything here may change or
//! go in any release, as rustls's `internal` may.

/// The wire formats, read into a neutral transcript.
pub mod adapter {
    pub use crate::adapter::{
        detect_format, read_request, read_request_from, read_transcript, ResumeAt, WireRequest,
        MAX_BREAKPOINTS,
    };
    pub use crate::{Breakpoint, RequestFormat};
}

/// Our text appended to results: evidence and guidance.
pub mod appendix {
    pub use crate::appendix::is_appendix;
}

/// The archive of collapsed pages that the MCP guard's `browser_history` reads back.
pub mod archive {
    pub use crate::archive::Archive;
}

/// The guard: a proposed call against the session so far.
pub mod guard {
    pub use crate::guard::{check, verdicts};
}

/// The memo's weights.
pub mod memo {
    pub use crate::memo::{weight_of, BYTES_PER_TEXT_BYTE, DEFAULT_MEMO_BYTES, ENTRY_BYTES};

    /// The checkpoints `memo` keeps, taken out with the weight it counts for each, the rest
    /// of the memo dropped: a test drops them one by one and counts what that frees.
    pub fn checkpoints_of(memo: crate::Memo) -> Vec<(Box<dyn std::any::Any>, usize)> {
        crate::pipeline::checkpoints_of(memo)
    }
}

/// The observation formats and the aria grammar.
pub mod observation {
    pub use crate::observation::{
        aria, cdmcp, parse, parse_header, refs_unique, snapshot_tool, TreeKind, FORMATS,
    };
}

/// The projection stage alone: a report per result and the receipts.
pub mod projection {
    pub use crate::projection::plan;
}

/// Progress replayed step by step, as the MCP guard and the CLI's `replay` drive it.
pub mod progress {
    pub use crate::progress::{guidance, is_submit_like, submission_guidance, Tracker};
}

/// A result's own lines, and receipts.
pub mod receipt {
    pub use crate::result_lines::{observation_id, verification_lines};
}

/// The ref grammar.
pub mod refs {
    pub use crate::refs::{
        has_ref_token, neutralise, page_id_of, rescope, split_scoped, targets, REF_KEYS, REF_LISTS,
    };
}

/// Every browser result of a request, read once.
pub mod session {
    pub use crate::reading::{Depth, Piece, Reader, Reading};
    pub use crate::session::Session;
}

/// Which calls are browser calls.
pub mod tools {
    pub use crate::tools::{is_find, BrowserTools, HISTORY_TOOL};
}

/// The neutral transcript.
pub mod transcript {
    pub use crate::transcript::{Item, Transcript};
}
