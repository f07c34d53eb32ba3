//! A transcript's progress replayed the way the guard and projection replay it, shared by
//! the tests' support and the projection bench (which includes this file with `#[path]`).

use staleguard::internal::progress::Tracker;
use staleguard::internal::session::Session;
use staleguard::internal::tools::BrowserTools;
use staleguard::internal::transcript::Transcript;
use staleguard::{Config, Memo};

/// The tracker after every browser result of `transcript`: counting only (as projection
/// tracks it), or with refs, history and repeated submissions (as the guard does).
pub(crate) fn replayed(transcript: &Transcript<'_>, config: &Config, counting: bool) -> Tracker {
    let tools = BrowserTools::new(&config.browser_tools);
    let memo = Memo::default();
    let session = Session::build(transcript, &tools, &memo);
    let tracker = match counting {
        true => Tracker::counting(config.max_repeats),
        false => Tracker::new(config.max_repeats),
    };
    tracker.replay(&session, |_, _, _, _| {})
}
