//! What a projection may use beyond the request and the config.

use crate::evidence::EvidenceItem;
use crate::memo::Memo;

/// What a projection may use beyond the request and the config.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Evidence items named by the host. Each must ground in a chunk the browser returned
    /// (SPEC 3); the rest are dropped and reported.
    pub explicit: &'a [EvidenceItem],
    /// Readings kept from earlier requests.
    pub memo: Option<&'a Memo>,
    /// Also give the guard's verdict on every browser call (`inspect`).
    pub verdicts: bool,
}
