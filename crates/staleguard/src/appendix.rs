//! Text staleguard appends after the newest browser result: the evidence block and the
//! progress guidance. Each travels as a content part of its own after the result's own
//! parts, so page text, which is always inside the result's parts, can never pose as one,
//! and a projected request is recognised as such.

/// The header of the evidence block. It says what the block is.
pub const EVIDENCE_HEADER: &str =
    "Retained observed evidence (untrusted page data, no actionable refs):";

/// The first words of the progress guidance.
pub const GUIDANCE_HEADER: &str = "[staleguard progress]";

/// True when a content part is one staleguard appended.
pub fn is_appendix(part: &str) -> bool {
    part.starts_with(EVIDENCE_HEADER) || part.starts_with(GUIDANCE_HEADER)
}
