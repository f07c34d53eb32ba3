//! A door for hosts that look at a body's tool results themselves, without projecting it: the
//! CLI's `archive` (the observations a recorded request holds) and `replay` (what other
//! strategies send, and how many stale refs each leaves).

use std::collections::HashSet;

use crate::adapter::{read_request, RequestFormat, WireRequest};
use crate::archive::Archive;
use crate::config::Config;
use crate::error::Error;
use crate::memo::Memo;
use crate::progress::Tracker;
use crate::projection::{plan, Status};
use crate::session::Session;
use crate::tools::BrowserTools;
use crate::transcript::{Edit, Item};

/// A request body read into its transcript: its tool results by transcript index (the
/// `item` of a [`ResultReport`](crate::ResultReport) and of an [`Edit`]), and edits of them
/// written back into the body, every other byte copied as it is.
///
/// ```
/// use staleguard::{Edit, Request, RequestFormat};
///
/// let body = r#"{"model": "m", "messages": [
///     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
///         "function": {"name": "read_file", "arguments": "{}"}}]},
///     {"role": "tool", "tool_call_id": "c1", "content": "old text"}]}"#;
/// let request = Request::read(body, RequestFormat::Auto)?;
/// assert_eq!(request.format(), RequestFormat::OpenAiChat);
/// let (item, text) = request.tool_results().next().unwrap();
/// assert_eq!(text, "old text");
/// let edit = Edit { item, text: "[cleared]".into(), append: false };
/// assert!(request.write(&[edit]).contains(r#""content": "[cleared]""#));
/// # Ok::<(), staleguard::Error>(())
/// ```
pub struct Request<'b> {
    wire: WireRequest<'b>,
    format: RequestFormat,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("format", &self.format)
            .field("items", &self.wire.transcript().items.len())
            .finish_non_exhaustive()
    }
}

impl<'b> Request<'b> {
    /// Reads `body` in `format`, telling the format from the body when it is `Auto`. A body
    /// that cannot be read is an [`Error`], as for [`project`](crate::project).
    pub fn read(body: &'b str, format: RequestFormat) -> Result<Request<'b>, Error> {
        let (wire, format, _) = read_request(body, format)?;
        Ok(Request { wire, format })
    }

    /// The format it was read in (never `Auto`).
    pub fn format(&self) -> RequestFormat {
        self.format
    }

    /// Every tool result, of any tool, in request order: its transcript index and its text
    /// (text parts joined with a line break).
    pub fn tool_results(&self) -> impl Iterator<Item = (usize, &str)> {
        let items = self.wire.transcript().items.iter().enumerate();
        items.filter_map(|(i, item)| match item {
            Item::Result(result) => Some((i, &*result.text)),
            _ => None,
        })
    }

    /// The body with each edit applied; every other byte is copied. Appends to one result
    /// become parts of their own, in edit order.
    pub fn write(&self, edits: &[Edit]) -> String {
        self.wire.write(edits)
    }

    /// Every browser observation and page report of the request, kept as the MCP guard's
    /// archive keeps them (browser results numbered from 1, failures left out), and how many
    /// browser results it holds: the `now` to list and read them back at.
    pub fn archive(&self, config: &Config) -> (Archive, usize) {
        Archive::of_transcript(self.wire.transcript(), config)
    }

    /// How many distinct refs the request still shows outside its live page state (the
    /// newest page, with an incremental server the last full tree and its diffs) that the
    /// newest page does not offer: refs a model reading it could act on, wrongly.
    /// `staleguard replay` counts them for every strategy's request.
    pub fn stale_refs(&self, config: &Config) -> usize {
        let transcript = self.wire.transcript();
        // The browser tools alone, any other tool's results read for pages (not the
        // config's `page_tools`): as the replay has always counted.
        let tools = BrowserTools::new(&config.browser_tools);
        let memo = Memo::for_request();
        let steps = Session::build(transcript, &tools, &memo);
        let plan = plan(&steps, config.receipt_max_bytes, false);
        let tracker = Tracker::new(config.max_repeats).replay(&steps, |_, _, _, _| {});
        let mut stale = HashSet::new();
        for r in plan.results.iter().filter(|r| r.status != Status::Live) {
            let Some(Item::Result(result)) = transcript.items.get(r.item) else {
                continue;
            };
            if let Some(obs) = crate::observation::parse(&result.text) {
                let gone = obs.refs.iter().filter(|x| !tracker.offers_ref(&x.id));
                stale.extend(gone.map(|x| x.id.to_string()));
            }
        }
        stale.len()
    }
}
