//! The pipeline: read -> observe -> analyse -> render -> write, on top of every other floor.
//!
//! The wire adapter reads the body into a neutral transcript; [`Session::read`] reads every
//! browser result once; projection, progress, evidence and (on demand) the guard read the
//! session; their edits go back through the adapter. [`run`] drives the stages, from the
//! first message or from a checkpoint ([`checkpoint`]) an earlier turn of the same session
//! left in the memo ([`resume`]). [`engine`] holds the doors; [`request`] the one for hosts
//! that read a body's tool results themselves.
//!
//! [`Session::read`]: crate::session::Session::read

mod checkpoint;
mod engine;
mod options;
mod output;
mod request;
mod resume;
mod run;
mod stages;

pub(crate) use checkpoint::into_kept as checkpoints_of;
pub use engine::{project, project_resumed_parts, Engine};
pub use options::Options;
pub use output::{CallVerdict, Projection};
pub use request::Request;
