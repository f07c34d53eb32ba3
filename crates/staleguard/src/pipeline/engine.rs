//! The doors: a config compiled once ([`Engine`]), projection of a whole body or of the next
//! turn given as its frames, and the guard's verdict on a proposed call.

use crate::adapter::{read_request, RequestFormat};
use crate::config::Config;
use crate::error::Error;
use crate::guard::{self, Verdict};
use crate::memo::Memo;
use crate::progress::Tracker;
use crate::reading::{Depth, Reader};
use crate::session::Session;
use crate::tools::BrowserTools;

use super::checkpoint::{self, Parts};
use super::options::Options;
use super::output::Projection;
use super::run::{self, Job};

/// A [`Config`] with what it compiles kept: a host that projects many requests under one
/// config (the proxy, the MCP guard) builds one engine and calls it for each.
///
/// ```
/// use staleguard::{Config, Engine, Options, RequestFormat};
///
/// let engine = Engine::new(Config::default());
/// let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
/// let projection = engine.project(body, RequestFormat::Auto, Options::default()).unwrap();
/// assert_eq!(projection.body, body); // no browser result: nothing to collapse
/// ```
#[derive(Debug, Clone)]
pub struct Engine {
    config: Config,
    tools: BrowserTools,
    /// The context checkpoints are kept under, for each format that resumes (OpenAI Chat,
    /// Anthropic): a hash of the format and every setting, taken once.
    contexts: [u64; 2],
}

impl Engine {
    /// Compiles `config`.
    pub fn new(config: Config) -> Engine {
        let tools = config.tools();
        let contexts = RESUMING.map(|format| checkpoint::context_of(format, &config));
        Engine {
            config,
            tools,
            contexts,
        }
    }

    /// The config it was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Projects `body`, read as `format`, with `options`: the call itself is the opt-in,
    /// whatever `browser_history_compaction` says (that switch is for hosts, which read it
    /// before they call). A body that cannot be read is an [`Error`], never a panic.
    pub fn project(
        &self,
        body: &str,
        format: RequestFormat,
        options: Options<'_>,
    ) -> Result<Projection, Error> {
        let keep = self.checkpointing(format, &options);
        if let Some(resumed) = keep.and_then(|k| self.project_resumed(body, format, &options, k)) {
            return Ok(resumed);
        }
        let local;
        let memo = match options.memo {
            Some(memo) => memo,
            None => {
                local = Memo::for_request();
                &local
            }
        };
        let job = Job {
            config: &self.config,
            tools: &self.tools,
            options: &options,
            memo,
            keep: keep.map(|(_, context)| context),
        };
        run::fresh(body, format, &job)
    }

    /// [`project`](Self::project), only when the body, given as its byte parts in order (a
    /// request's frames as they arrived), is the next turn of a session that
    /// `options.memo` has seen: it resumes from the checkpoint the earlier turn left, and
    /// costs a small share of a whole projection (about a millisecond for a megabyte). Only
    /// the bytes after the checkpoint's resume point are copied and read as text, the rest
    /// only hashed. `None` otherwise, after little work, and when those bytes are not UTF-8:
    /// [`project`](Self::project) of the joined body then answers, or says why it cannot.
    pub fn project_resumed_parts(
        &self,
        parts: &[&[u8]],
        format: RequestFormat,
        options: &Options<'_>,
    ) -> Option<Projection> {
        let (memo, context) = self.checkpointing(format, options)?;
        let body = Parts::new(parts);
        let found = checkpoint::kept_in(memo).find(&body, context, memo.seed())?;
        let from = found.resume.offset;
        let mut tail = Vec::with_capacity(body.len().saturating_sub(from));
        body.slices(from..body.len())
            .for_each(|s| tail.extend_from_slice(s));
        let tail = String::from_utf8(tail).ok()?;
        self.resume(&tail, format, options, memo, &found)
    }

    /// [`project`](Self::project) of the next turn of a session that `memo` has seen, from
    /// the checkpoint its earlier turn left under `context`; `None` otherwise.
    fn project_resumed(
        &self,
        body: &str,
        format: RequestFormat,
        options: &Options<'_>,
        (memo, context): (&Memo, u64),
    ) -> Option<Projection> {
        let parts = [body.as_bytes()];
        let found = checkpoint::kept_in(memo).find(&Parts::new(&parts), context, memo.seed())?;
        let tail = body.get(found.resume.offset..)?;
        self.resume(tail, format, options, memo, &found)
    }

    /// Asks the guard about a call of tool `name` with `arguments` (JSON text), proposed
    /// after the whole transcript of `body`.
    ///
    /// ```
    /// use staleguard::{Config, Engine, RequestFormat, Verdict};
    ///
    /// let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    /// let engine = Engine::new(Config::default());
    /// let verdict = engine.check_call(body, RequestFormat::Auto, "browser_click", r#"{"ref": "e1"}"#);
    /// assert!(matches!(verdict, Ok(Verdict::Refuse { .. }))); // no page has been seen
    /// ```
    pub fn check_call(
        &self,
        body: &str,
        format: RequestFormat,
        name: &str,
        arguments: &str,
    ) -> Result<Verdict, Error> {
        let (request, _, _) = read_request(body, format)?;
        let memo = Memo::for_request();
        let reader = Reader {
            memo: &memo,
            depth: Depth::Header,
        };
        let session = Session::read(request.transcript(), &self.tools, reader);
        let tracker = Tracker::new(self.config.max_repeats).replay(&session, |_, _, _, _| {});
        Ok(guard::check(&tracker, name, arguments, &self.tools))
    }

    /// The guard's verdict on a proposed call of `name` with `arguments` (JSON text), against
    /// the session `tracker` followed so far: what [`check_call`](Self::check_call) answers
    /// after a whole request, for a host that follows the session call by call (the MCP
    /// guard). A call of no browser tool, or one that names no ref, is allowed.
    pub fn check_tracked(&self, tracker: &Tracker, name: &str, arguments: &str) -> Verdict {
        guard::check(tracker, name, arguments, &self.tools)
    }

    /// True when a call of tool `name` is a browser call under the config's
    /// [`browser_tools`](Config::browser_tools) (behind any MCP prefix).
    pub fn is_browser_tool(&self, name: &str) -> bool {
        self.tools.is_browser(name)
    }

    /// True when a call of browser tool `name` only looks at the page (Playwright MCP's
    /// `browser_find`, behind any MCP prefix): its result goes to [`Tracker::look`], which
    /// counts no step (SPEC 4).
    pub fn is_look(&self, name: &str) -> bool {
        crate::tools::is_find(name)
    }

    /// [`check_call`](Self::check_call) of a call as a request format writes it (JSON text):
    /// an OpenAI `tool_calls` entry, an Anthropic `tool_use` block, a Responses
    /// `function_call` item or a Gemini `functionCall` part. A call that is no JSON or names
    /// no tool is an [`Error::Call`], found before the body is read.
    ///
    /// ```
    /// use staleguard::{Config, Engine, RequestFormat, Verdict};
    ///
    /// let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    /// let call = r#"{"type": "tool_use", "id": "t1", "name": "browser_click", "input": {"ref": "e1"}}"#;
    /// let engine = Engine::new(Config::default());
    /// let verdict = engine.check_proposed(body, RequestFormat::Auto, call);
    /// assert!(matches!(verdict, Ok(Verdict::Refuse { .. })));
    /// assert!(engine.check_proposed(body, RequestFormat::Auto, "{}").is_err());
    /// ```
    pub fn check_proposed(
        &self,
        body: &str,
        format: RequestFormat,
        call: &str,
    ) -> Result<Verdict, Error> {
        let value: serde_json::Value = serde_json::from_str(call).map_err(Error::call_not_json)?;
        let (name, arguments) =
            guard::proposed_call(&value).ok_or_else(Error::call_names_no_tool)?;
        self.check_call(body, format, &name, &arguments)
    }

    /// Projects `tail`, the bytes of a body from checkpoint `found`'s resume point on.
    fn resume(
        &self,
        tail: &str,
        format: RequestFormat,
        options: &Options<'_>,
        memo: &Memo,
        found: &std::sync::Arc<checkpoint::Checkpoint>,
    ) -> Option<Projection> {
        let job = Job {
            config: &self.config,
            tools: &self.tools,
            options,
            memo,
            keep: Some(found.context()),
        };
        let projected = run::resumed(tail, format, found, &job)?;
        memo.count_resumed();
        Some(projected)
    }

    /// The memo that keeps checkpoints for this request, and the context they are kept
    /// under: only for the formats that resume, and for answers that depend on nothing a
    /// checkpoint does not keep (host evidence, the guard's verdicts, a request budget that
    /// weighs the whole request).
    fn checkpointing<'m>(
        &self,
        format: RequestFormat,
        options: &Options<'m>,
    ) -> Option<(&'m Memo, u64)> {
        let resumes = RESUMING.iter().position(|&f| f == format);
        let whole = !options.explicit.is_empty() || options.verdicts;
        if whole || self.config.request_budget_bytes.is_some() {
            return None;
        }
        let context = self.contexts.get(resumes?)?;
        Some((options.memo?, *context))
    }
}

/// The formats whose next turn resumes from a checkpoint.
const RESUMING: [RequestFormat; 2] = [RequestFormat::OpenAiChat, RequestFormat::Anthropic];

/// Projects `body` under `config`, with `options`: [`Engine::project`] of an engine built
/// for this one call. A host that projects many requests keeps an [`Engine`].
///
/// ```
/// use staleguard::{project, Config, Options, RequestFormat, Status};
///
/// let page = |url: &str| format!(
///     "### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```"
/// );
/// let body = serde_json::json!({"model": "claude", "max_tokens": 100, "messages": [
///     {"role": "user", "content": "Buy it"},
///     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "browser_navigate", "input": {}}]},
///     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": page("http://a.test/")}]},
///     {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "browser_navigate", "input": {}}]},
///     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": page("http://b.test/")}]},
/// ]}).to_string();
/// let projection = project(&body, RequestFormat::Anthropic, &Config::default(), Options::default())?;
/// let statuses: Vec<Status> = projection.report().results.iter().map(|r| r.status).collect();
/// assert_eq!(statuses, [Status::Collapsed, Status::Live]);
/// # Ok::<(), staleguard::Error>(())
/// ```
pub fn project(
    body: &str,
    format: RequestFormat,
    config: &Config,
    options: Options<'_>,
) -> Result<Projection, Error> {
    Engine::new(config.clone()).project(body, format, options)
}

/// [`Engine::project_resumed_parts`] of an engine built for this one call.
///
/// ```
/// use staleguard::{project, project_resumed_parts, Config, Memo, Options, RequestFormat};
///
/// let page = |n: u32| format!(
///     "### Page\n- Page URL: http://a.test/{n}\n- Page Title: P{n}\n### Snapshot\n```yaml\n- button \"Next\" [ref=e{n}]\n```"
/// );
/// let turn = |n: u32| {
///     let mut messages = vec![serde_json::json!({"role": "user", "content": "Go on"})];
///     for i in 1..=n {
///         let id = format!("c{i}");
///         messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
///             {"id": id, "type": "function", "function": {"name": "browser_click", "arguments": "{}"}}]}));
///         messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": page(i)}));
///     }
///     serde_json::json!({"model": "m", "messages": messages}).to_string()
/// };
/// let (config, memo) = (Config::default(), Memo::default());
/// let options = Options { memo: Some(&memo), ..Options::default() };
/// let format = RequestFormat::OpenAiChat;
/// project(&turn(3), format, &config, options)?; // the memo keeps a checkpoint
/// let next = turn(4);
/// let (head, tail) = next.split_at(next.len() / 2); // the frames a server received
/// let resumed = project_resumed_parts(&[head.as_bytes(), tail.as_bytes()], format, &config, &options);
/// let whole = project(&next, format, &config, Options::default())?;
/// assert_eq!(resumed.map(|p| p.body.into_string()), Some(whole.body.into_string()));
/// # Ok::<(), staleguard::Error>(())
/// ```
pub fn project_resumed_parts(
    parts: &[&[u8]],
    format: RequestFormat,
    config: &Config,
    options: &Options<'_>,
) -> Option<Projection> {
    Engine::new(config.clone()).project_resumed_parts(parts, format, options)
}
