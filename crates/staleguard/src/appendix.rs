//! Text staleguard appends after the newest browser result: the evidence block and the
//! progress guidance. Each travels as a content part of its own after the result's own
//! parts, so page text, which is always inside the result's parts, can never pose as one,
//! and a projected request is recognised as such.
//!
//! For tools and tests that read a projected request and must tell staleguard's parts from
//! the result's own (the CLI's `replay`, the integration tests).

pub(crate) use crate::texts::{EVIDENCE_HEADER, GUIDANCE_HEADER};

/// True when a content part is one staleguard appended.
pub fn is_appendix(part: &str) -> bool {
    part.starts_with(EVIDENCE_HEADER) || part.starts_with(GUIDANCE_HEADER)
}
