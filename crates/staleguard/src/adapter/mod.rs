//! Wire-format adapters: read a neutral [`Transcript`](crate::transcript::Transcript) out of a request body and write
//! projection edits back. Bytes an adapter does not edit are copied as they are, so unknown
//! fields, key order and formatting survive.
//!
//! [`project`](crate::project) reads and writes through here itself; [`RequestFormat`] is
//! re-exported at the crate root. A host that reads a body's tool results or writes its own
//! edits into it (the CLI's `archive` and `replay`) does it through
//! [`Request`](crate::Request); tests that want the neutral transcript itself
//! ([`read_transcript`]) reach the readers through `staleguard::internal::adapter`.

pub(crate) mod anthropic;
mod content;
mod format;
pub(crate) mod gemini;
mod lenient;
mod offers;
pub(crate) mod openai_chat;
mod read;
mod request;
pub(crate) mod responses;
mod strings;
mod tail;

pub use request::WireRequest;
pub(crate) use request::BREAKPOINT;
pub use request::{Breakpoint, MAX_BREAKPOINTS};
// Public, hidden, for the resume tests; the crate's own API.
#[doc(hidden)]
pub use request::ResumeAt;
pub(crate) use request::SplitWrite;

pub use format::RequestFormat;
pub use read::{read_request, read_request_from, read_transcript};
