//! What the provider billed: the `usage` of a model answer, read from a copy of its bytes as
//! they stream past to the client.
//!
//! The proxy never holds an answer back to read it. A JSON answer is copied (up to
//! [`MAX_JSON_BYTES`]) and read when it has ended (Gemini's default stream is one JSON
//! array of answers); an SSE answer goes through a small line
//! scanner that keeps only the event being received, so chunks may split lines anywhere.
//! gzip, deflate and zstd answers are decoded on the side, chunk by chunk; any other
//! encoding is not counted, and the log says why.

use std::io::Write;

use serde::{Deserialize, Deserializer};

/// Largest JSON answer whose copy is kept to be read when it ends.
pub const MAX_JSON_BYTES: usize = 16 << 20;
/// Largest SSE event read; a larger one (a Responses `response.completed` carrying megabytes
/// of generated images) is passed on unread.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// Input tokens of one answer, split the way providers bill them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Read from the provider's prompt cache.
    pub cache_read: u64,
    /// Written to the prompt cache (Anthropic bills them above plain input).
    pub cache_write: u64,
    /// Neither read from nor written to the cache.
    pub uncached: u64,
}

/// What reading an answer's usage came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageRead {
    Read(Usage),
    /// The answer was read and carried no usage.
    Missing,
    /// The answer could not be read; the reason goes to the log.
    Skipped(String),
}

/// The usage fields of the three formats, as the provider sent them. A later event's fields
/// override an earlier one's: Anthropic's `message_delta` updates `message_start`'s counts.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct RawUsage {
    /// Chat Completions: all input tokens, cached ones included.
    prompt_tokens: Option<u64>,
    prompt_tokens_details: Option<Details>,
    /// Responses: all input tokens; Anthropic: only those neither read from nor written to
    /// the cache.
    input_tokens: Option<u64>,
    input_tokens_details: Option<Details>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
}

impl RawUsage {
    fn merge(&mut self, later: RawUsage) {
        self.prompt_tokens = later.prompt_tokens.or(self.prompt_tokens);
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        merge_details(&mut self.prompt_tokens_details, later.prompt_tokens_details);
        merge_details(&mut self.input_tokens_details, later.input_tokens_details);
    }

    /// The billed split. The fields tell the format apart, so an answer is read right
    /// whatever path it came from: `prompt_tokens` is Chat Completions, Anthropic's cache
    /// fields are Anthropic, and plain `input_tokens` counts cached tokens (Responses).
    fn usage(&self) -> Option<Usage> {
        let cached = |d: Option<Details>| d.and_then(|d| d.cached_tokens).unwrap_or(0);
        if let Some(prompt) = self.prompt_tokens {
            let read = cached(self.prompt_tokens_details);
            return Some(Usage {
                cache_read: read,
                cache_write: 0,
                uncached: prompt.saturating_sub(read),
            });
        }
        let input = self.input_tokens?;
        if self.cache_read_input_tokens.is_some() || self.cache_creation_input_tokens.is_some() {
            return Some(Usage {
                cache_read: self.cache_read_input_tokens.unwrap_or(0),
                cache_write: self.cache_creation_input_tokens.unwrap_or(0),
                uncached: input,
            });
        }
        let read = cached(self.input_tokens_details);
        Some(Usage {
            cache_read: read,
            cache_write: 0,
            uncached: input.saturating_sub(read),
        })
    }
}

fn merge_details(earlier: &mut Option<Details>, later: Option<Details>) {
    if let Some(later) = later {
        let before = earlier.and_then(|d| d.cached_tokens);
        *earlier = Some(Details {
            cached_tokens: later.cached_tokens.or(before),
        });
    }
}

/// Where the usage sits in an answer or event: at the top (JSON answers, Chat chunks,
/// Anthropic `message_delta`), in `message` (Anthropic `message_start`), in `response`
/// (Responses `response.completed`) or in `usageMetadata` (Gemini, every chunk; Gemini Code
/// Assist puts it in `response`). A field of another shape is not usage and is ignored.
#[derive(Deserialize)]
struct Carrier {
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<RawUsage>,
    #[serde(rename = "usageMetadata", default, deserialize_with = "lenient")]
    usage_metadata: Option<GeminiUsage>,
    #[serde(default, deserialize_with = "lenient")]
    message: Option<Nested>,
    #[serde(default, deserialize_with = "lenient")]
    response: Option<Nested>,
}

#[derive(Deserialize)]
struct Nested {
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<RawUsage>,
    #[serde(rename = "usageMetadata", default, deserialize_with = "lenient")]
    usage_metadata: Option<GeminiUsage>,
}

impl Nested {
    fn usage(self) -> Option<RawUsage> {
        self.usage
            .or_else(|| self.usage_metadata.and_then(GeminiUsage::raw))
    }
}

/// Gemini's counts: `promptTokenCount` counts the cached tokens too, as Chat Completions'
/// `prompt_tokens` does, so they are read as those.
#[derive(Deserialize)]
struct GeminiUsage {
    #[serde(rename = "promptTokenCount")]
    prompt: Option<u64>,
    #[serde(rename = "cachedContentTokenCount")]
    cached: Option<u64>,
}

impl GeminiUsage {
    fn raw(self) -> Option<RawUsage> {
        Some(RawUsage {
            prompt_tokens: Some(self.prompt?),
            prompt_tokens_details: Some(Details {
                cached_tokens: self.cached,
            }),
            ..RawUsage::default()
        })
    }
}

impl Carrier {
    fn usage(self) -> Option<RawUsage> {
        self.usage
            .or_else(|| self.message.and_then(Nested::usage))
            .or_else(|| self.response.and_then(Nested::usage))
            .or_else(|| self.usage_metadata.and_then(GeminiUsage::raw))
    }
}

/// `T` when the value has its shape, `None` otherwise (an error event's `message` string).
fn lenient<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        Shaped(T),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Option::<Either<T>>::deserialize(d)? {
        Some(Either::Shaped(t)) => Some(t),
        _ => None,
    })
}

/// Splits an SSE byte stream into the data of its events, whatever the chunk boundaries.
/// Lines end in `\n`, `\r\n` or `\r`; an event's `data:` lines are joined with `\n` and the
/// event ends at a blank line (the HTML living standard's event stream rules).
#[derive(Default)]
struct SseScanner {
    line: Vec<u8>,
    /// The current line grew past the limit: the rest of it is skipped.
    line_dropped: bool,
    data: Vec<u8>,
    has_data: bool,
    /// The current event grew past the limit: it is dropped when it ends.
    too_long: bool,
    /// The last chunk ended in `\r`: a `\n` that starts the next one ends no second line.
    after_cr: bool,
    dropped_events: u32,
}

impl SseScanner {
    fn feed(&mut self, mut bytes: &[u8], on_event: &mut dyn FnMut(&[u8])) {
        if std::mem::take(&mut self.after_cr) && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.push(&bytes[..at]);
            self.end_line(on_event);
            let mut next = at + 1;
            if bytes[at] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            bytes = &bytes[next..];
        }
        self.push(bytes);
    }

    /// The stream ended: a last event without its blank line still counts, as SDKs read it.
    fn end(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if !self.line.is_empty() || self.line_dropped {
            self.end_line(on_event);
        }
        self.end_line(on_event);
    }

    fn push(&mut self, part: &[u8]) {
        if self.line_dropped {
            return;
        }
        if self.data.len() + self.line.len() + part.len() > MAX_EVENT_BYTES {
            self.line_dropped = true;
            self.too_long = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(part);
    }

    fn end_line(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if std::mem::take(&mut self.line_dropped) {
            return;
        }
        if self.line.is_empty() {
            self.end_event(on_event);
            return;
        }
        if let Some(value) = data_value(&self.line) {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line.clear();
    }

    fn end_event(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if self.too_long {
            self.dropped_events += 1;
            self.data = Vec::new();
        } else if self.has_data {
            on_event(&self.data);
        }
        self.data.clear();
        self.has_data = false;
        self.too_long = false;
    }
}

/// The value of a `data` field line, or `None` for any other line.
fn data_value(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"data")?;
    match rest.split_first() {
        None => Some(b""),
        Some((b':', value)) => Some(value.strip_prefix(b" ").unwrap_or(value)),
        Some(_) => None,
    }
}

/// The usage found in the events of one answer.
#[derive(Default)]
struct Found {
    usage: Option<RawUsage>,
    /// Events that mention usage but are not JSON.
    unreadable: u32,
}

impl Found {
    fn read(&mut self, json: &[u8]) {
        match serde_json::from_slice::<Carrier>(json) {
            Ok(carrier) => self.add(carrier),
            Err(_) => self.unreadable += 1,
        }
    }

    fn add(&mut self, carrier: Carrier) {
        if let Some(usage) = carrier.usage() {
            self.usage
                .get_or_insert_with(RawUsage::default)
                .merge(usage);
        }
    }

    fn read_event(&mut self, data: &[u8]) {
        // Most events (text deltas, `[DONE]`, chunks with `"usage": null`) carry no usage:
        // they are not parsed at all.
        if carries_usage(data) {
            self.read(data);
        }
    }
}

/// Whether some `"usage"` (or Gemini's `"usageMetadata"`) in the event is not followed by
/// `null`. Page text cannot fake one: inside a JSON string its quotes are escaped.
fn carries_usage(data: &[u8]) -> bool {
    carries(data, b"\"usage\"") || carries(data, b"\"usageMetadata\"")
}

fn carries(data: &[u8], key: &[u8]) -> bool {
    let skip_space = |b: &[u8]| {
        b.iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(b.len())
    };
    memchr::memmem::find_iter(data, key).any(|at| {
        let rest = &data[at + key.len()..];
        let rest = &rest[skip_space(rest)..];
        let rest = rest.strip_prefix(b":").unwrap_or(rest);
        !rest[skip_space(rest)..].starts_with(b"null")
    })
}

/// The usage of a JSON answer: one object, or Gemini's stream without `alt=sse`, a JSON
/// array of answers whose later counts override earlier ones.
fn json_usage(json: &[u8]) -> serde_json::Result<Option<RawUsage>> {
    let first = json.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[') {
        return Ok(serde_json::from_slice::<Carrier>(json)?.usage());
    }
    let mut found = Found::default();
    for carrier in serde_json::from_slice::<Vec<Carrier>>(json)? {
        found.add(carrier);
    }
    Ok(found.usage)
}

/// The decoded answer goes here: a bounded copy of a JSON answer, or the SSE scanner.
enum Sink {
    Json { copy: Vec<u8>, over: bool },
    Sse { scanner: SseScanner, found: Found },
}

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Json { copy, over } => {
                if !*over && copy.len() + bytes.len() <= MAX_JSON_BYTES {
                    copy.extend_from_slice(bytes);
                } else if !*over {
                    *over = true;
                    *copy = Vec::new();
                }
            }
            Sink::Sse { scanner, found } => scanner.feed(bytes, &mut |data| found.read_event(data)),
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn end(self) -> UsageRead {
        match self {
            Sink::Json { over: true, .. } => {
                UsageRead::Skipped(format!("the answer is over {MAX_JSON_BYTES} bytes"))
            }
            Sink::Json { copy, .. } => match json_usage(&copy) {
                Ok(usage) => outcome(usage, None),
                Err(_) => UsageRead::Skipped("the answer is not JSON".into()),
            },
            Sink::Sse {
                mut scanner,
                mut found,
            } => {
                scanner.end(&mut |data| found.read_event(data));
                let why = if scanner.dropped_events > 0 {
                    Some(format!("an event over {MAX_EVENT_BYTES} bytes went unread"))
                } else if found.unreadable > 0 {
                    Some("an event with usage is not JSON".to_string())
                } else {
                    None
                };
                outcome(found.usage, why)
            }
        }
    }
}

/// Usage found wins; without it, the reason it may have been missed, else none was sent.
fn outcome(usage: Option<RawUsage>, why: Option<String>) -> UsageRead {
    match (usage.and_then(|u| u.usage()), why) {
        (Some(usage), _) => UsageRead::Read(usage),
        (None, Some(why)) => UsageRead::Skipped(why),
        (None, None) => UsageRead::Missing,
    }
}

/// The answer's `Content-Encoding`, undone on the side.
enum Decoder {
    Plain(Sink),
    Gzip(flate2::write::GzDecoder<Sink>),
    Deflate(flate2::write::ZlibDecoder<Sink>),
    Zstd(zstd::stream::write::Decoder<'static, Sink>),
}

impl Decoder {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Decoder::Plain(sink) => sink.write_all(bytes),
            Decoder::Gzip(d) => d.write_all(bytes),
            Decoder::Deflate(d) => d.write_all(bytes),
            Decoder::Zstd(d) => d.write_all(bytes),
        }
    }

    /// Writes out what the decoder still holds and gives back the sink.
    fn end(self) -> (Sink, std::io::Result<()>) {
        match self {
            Decoder::Plain(sink) => (sink, Ok(())),
            Decoder::Gzip(mut d) => {
                let end = d.try_finish();
                (std::mem::replace(d.get_mut(), empty_sink()), end)
            }
            Decoder::Deflate(mut d) => {
                let end = d.try_finish();
                (std::mem::replace(d.get_mut(), empty_sink()), end)
            }
            Decoder::Zstd(mut d) => {
                let end = d.flush();
                (d.into_inner(), end)
            }
        }
    }
}

fn empty_sink() -> Sink {
    Sink::Json {
        copy: Vec::new(),
        over: true,
    }
}

/// Reads the usage of one answer from its chunks as they pass.
pub struct UsageReader {
    decoder: Option<Decoder>,
    encoding: String,
    /// Why the answer is not (or no longer) read.
    skipped: Option<String>,
}

impl UsageReader {
    /// A reader for an answer with these `Content-Type` and `Content-Encoding` headers.
    pub fn new(content_type: Option<&str>, content_encoding: Option<&str>) -> UsageReader {
        let encoding = content_encoding
            .unwrap_or("identity")
            .trim()
            .to_ascii_lowercase();
        let media = content_type
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let sink = if media == "text/event-stream" {
            Sink::Sse {
                scanner: SseScanner::default(),
                found: Found::default(),
            }
        } else if media == "application/json" || media.ends_with("+json") {
            Sink::Json {
                copy: Vec::new(),
                over: false,
            }
        } else {
            return UsageReader::skipping(encoding, format!("content-type {media:?}"));
        };
        let decoder = match encoding.as_str() {
            "identity" | "" => Ok(Decoder::Plain(sink)),
            "gzip" | "x-gzip" => Ok(Decoder::Gzip(flate2::write::GzDecoder::new(sink))),
            "deflate" => Ok(Decoder::Deflate(flate2::write::ZlibDecoder::new(sink))),
            "zstd" => zstd::stream::write::Decoder::new(sink)
                .map(Decoder::Zstd)
                .map_err(|e| format!("no zstd decoder: {e}")),
            other => Err(format!("content-encoding {other:?} is not decoded")),
        };
        match decoder {
            Ok(decoder) => UsageReader {
                decoder: Some(decoder),
                encoding,
                skipped: None,
            },
            Err(why) => UsageReader::skipping(encoding, why),
        }
    }

    fn skipping(encoding: String, why: String) -> UsageReader {
        UsageReader {
            decoder: None,
            encoding,
            skipped: Some(why),
        }
    }

    /// Reads the next chunk of the answer (a copy: the chunk itself goes on unchanged).
    pub fn feed(&mut self, chunk: &[u8]) {
        if let Some(decoder) = &mut self.decoder {
            if let Err(e) = decoder.write_all(chunk) {
                self.skipped = Some(format!("cannot decode the {} answer: {e}", self.encoding));
                self.decoder = None;
            }
        }
    }

    /// The answer has ended (or was cut off): what it billed.
    pub fn finish(self) -> UsageRead {
        let Some(decoder) = self.decoder else {
            return UsageRead::Skipped(self.skipped.unwrap_or_default());
        };
        let (sink, end) = decoder.end();
        match (sink.end(), end) {
            (UsageRead::Read(usage), _) => UsageRead::Read(usage),
            (_, Err(e)) => {
                UsageRead::Skipped(format!("cannot decode the {} answer: {e}", self.encoding))
            }
            (other, Ok(())) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SSE: &str = "text/event-stream";
    const JSON: &str = "application/json";

    fn read(content_type: &str, encoding: Option<&str>, chunks: &[&[u8]]) -> UsageRead {
        let mut reader = UsageReader::new(Some(content_type), encoding);
        for chunk in chunks {
            reader.feed(chunk);
        }
        reader.finish()
    }

    fn usage(cache_read: u64, cache_write: u64, uncached: u64) -> UsageRead {
        UsageRead::Read(Usage {
            cache_read,
            cache_write,
            uncached,
        })
    }

    /// Every way of cutting `bytes` in two, and one byte at a time.
    fn every_split(content_type: &str, bytes: &[u8], want: &UsageRead) {
        for at in 0..=bytes.len() {
            let (a, b) = bytes.split_at(at);
            assert_eq!(&read(content_type, None, &[a, b]), want, "split at {at}");
        }
        let bytes: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(&read(content_type, None, &bytes), want, "byte by byte");
    }

    const CHAT_STREAM: &str = concat!(
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
        "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,\"completion_tokens\":300,",
        "\"total_tokens\":2306,\"prompt_tokens_details\":{\"cached_tokens\":1920,\"audio_tokens\":0}}}\n\n",
        "data: [DONE]\n\n"
    );

    const ANTHROPIC_STREAM: &str = concat!(
        "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":",
        "{\"input_tokens\":25,\"cache_creation_input_tokens\":188,\"cache_read_input_tokens\":2048,",
        "\"output_tokens\":1}}}\r\n\r\n",
        "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"the word \\\"usage\\\"\"}}\r\n\r\n",
        "event: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},",
        "\"usage\":{\"output_tokens\":15,\"cache_read_input_tokens\":2048}}\r\n\r\n",
        "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"
    );

    const RESPONSES_STREAM: &str = concat!(
        "event: response.created\rdata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\r\r",
        "event: response.output_text.delta\rdata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\r\r",
        "event: response.completed\rdata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",",
        "\"output\":[],\"usage\":{\"input_tokens\":5000,\"input_tokens_details\":{\"cached_tokens\":4096},",
        "\"output_tokens\":20,\"total_tokens\":5020}}}\r\r"
    );

    /// `streamGenerateContent?alt=sse`: every chunk has `usageMetadata`; the last counts.
    const GEMINI_STREAM: &str = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"usage\"}],\"role\": \"model\"}}],",
        "\"usageMetadata\": {\"promptTokenCount\": 5200,\"totalTokenCount\": 5201},\"modelVersion\": \"gemini-2.5-flash\"}\r\n\r\n",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" done\"}],\"role\": \"model\"},",
        "\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 5200,\"cachedContentTokenCount\": 4096,",
        "\"candidatesTokenCount\": 2,\"totalTokenCount\": 5202}}\r\n\r\n"
    );

    #[test]
    fn gemini_code_assist_answers_carry_usage_in_response() {
        let sse = concat!(
            "data: {\"response\": {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}],",
            "\"usageMetadata\": {\"promptTokenCount\": 700}}, \"traceId\": \"t1\"}\r\n\r\n",
            "data: {\"response\": {\"candidates\": [], \"usageMetadata\": {\"promptTokenCount\": 700,",
            "\"cachedContentTokenCount\": 600}}, \"traceId\": \"t1\"}\r\n\r\n"
        );
        every_split(SSE, sse.as_bytes(), &usage(600, 0, 100));
        let json = br#"{"response":{"candidates":[],"usageMetadata":{"promptTokenCount":90,"cachedContentTokenCount":80}},"traceId":"t"}"#;
        every_split(JSON, json, &usage(80, 0, 10));
    }

    #[test]
    fn gemini_answers_json_sse_and_json_array_stream() {
        every_split(SSE, GEMINI_STREAM.as_bytes(), &usage(4096, 0, 1104));
        let json = br#"{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":300,"cachedContentTokenCount":256,"candidatesTokenCount":1}}"#;
        every_split(JSON, json, &usage(256, 0, 44));
        let array = concat!(
            "[{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}],\"usageMetadata\": {\"promptTokenCount\": 900}}\r\n,\r\n",
            "{\"candidates\": [],\"usageMetadata\": {\"promptTokenCount\": 900,\"cachedContentTokenCount\": 512}}]"
        );
        every_split(JSON, array.as_bytes(), &usage(512, 0, 388));
        let uncached = br#"{"usageMetadata":{"promptTokenCount":40,"totalTokenCount":41}}"#;
        assert_eq!(read(JSON, None, &[uncached]), usage(0, 0, 40));
        assert_eq!(
            read(JSON, None, &[b"[{\"candidates\":[]}]"]),
            UsageRead::Missing
        );
        assert!(carries_usage(
            b"{\"usageMetadata\":{\"promptTokenCount\":1}}"
        ));
    }

    #[test]
    fn chat_stream_final_chunk_split_anywhere() {
        every_split(SSE, CHAT_STREAM.as_bytes(), &usage(1920, 0, 86));
    }

    #[test]
    fn anthropic_stream_with_crlf_split_anywhere() {
        every_split(SSE, ANTHROPIC_STREAM.as_bytes(), &usage(2048, 188, 25));
    }

    #[test]
    fn responses_stream_with_cr_split_anywhere() {
        every_split(SSE, RESPONSES_STREAM.as_bytes(), &usage(4096, 0, 904));
    }

    #[test]
    fn message_delta_overrides_message_start() {
        let stream = concat!(
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,",
            "\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}}}\n\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":12,",
            "\"cache_read_input_tokens\":7,\"output_tokens\":3}}\n\n"
        );
        assert_eq!(read(SSE, None, &[stream.as_bytes()]), usage(7, 0, 12));
    }

    #[test]
    fn json_answers_of_all_three_formats() {
        let chat = br#"{"id":"c","choices":[{"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":1200,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1024}}}"#;
        let messages = br#"{"id":"m","type":"message","content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":900,"output_tokens":5}}"#;
        let responses = br#"{"id":"r","object":"response","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":0},"output_tokens":5}}"#;
        let no_cache = br#"{"usage":{"prompt_tokens":40,"completion_tokens":5}}"#;
        for (body, want) in [
            (&chat[..], usage(1024, 0, 176)),
            (&messages[..], usage(900, 100, 3)),
            (&responses[..], usage(0, 0, 300)),
            (&no_cache[..], usage(0, 0, 40)),
        ] {
            every_split(JSON, body, &want);
            assert_eq!(read("application/json; charset=utf-8", None, &[body]), want);
        }
    }

    #[test]
    fn answers_without_usage_and_unreadable_ones() {
        assert_eq!(read(JSON, None, &[b"{\"id\":\"x\"}"]), UsageRead::Missing);
        assert_eq!(
            read(SSE, None, &[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"]),
            UsageRead::Missing
        );
        assert!(matches!(
            read(JSON, None, &[b"{\"usage\": {\"prompt"]),
            UsageRead::Skipped(why) if why.contains("not JSON")
        ));
        assert!(matches!(
            read(SSE, None, &[b"data: {\"usage\": [\n\n"]),
            UsageRead::Skipped(why) if why.contains("not JSON")
        ));
        assert!(matches!(
            read("text/html", None, &[b"<p>usage</p>"]),
            UsageRead::Skipped(why) if why.contains("text/html")
        ));
        // An error event whose `message` is a string is not usage and spoils nothing.
        let error = b"data: {\"type\":\"error\",\"message\":\"\\\"usage\\\" limit\"}\n\n";
        assert_eq!(read(SSE, None, &[error]), UsageRead::Missing);
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn compressed_answers_are_decoded_on_the_side() {
        let gz = gzip(CHAT_STREAM.as_bytes());
        let chunks: Vec<&[u8]> = gz.chunks(7).collect();
        assert_eq!(read(SSE, Some("gzip"), &chunks), usage(1920, 0, 86));
        let messages = br#"{"usage":{"input_tokens":3,"cache_read_input_tokens":900}}"#;
        let gz = gzip(messages);
        let chunks: Vec<&[u8]> = gz.chunks(3).collect();
        assert_eq!(read(JSON, Some("GZIP"), &chunks), usage(900, 0, 3));
        let zst = zstd::encode_all(RESPONSES_STREAM.as_bytes(), 3).unwrap();
        let chunks: Vec<&[u8]> = zst.chunks(5).collect();
        assert_eq!(read(SSE, Some("zstd"), &chunks), usage(4096, 0, 904));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(messages).unwrap();
        assert_eq!(
            read(JSON, Some("deflate"), &[&z.finish().unwrap()]),
            usage(900, 0, 3)
        );
    }

    #[test]
    fn encodings_it_cannot_decode_are_skipped_with_a_reason() {
        assert!(matches!(
            read(JSON, Some("br"), &[b"\x1b\x00"]),
            UsageRead::Skipped(why) if why.contains("\"br\"")
        ));
        assert!(matches!(
            read(JSON, Some("gzip"), &[b"not gzip at all"]),
            UsageRead::Skipped(why) if why.contains("gzip")
        ));
        // A gzip stream cut short: what was decoded still counts.
        let gz = gzip(CHAT_STREAM.as_bytes());
        assert_eq!(
            read(SSE, Some("gzip"), &[&gz[..gz.len() - 4]]),
            usage(1920, 0, 86)
        );
    }

    #[test]
    fn an_oversized_event_is_dropped_and_said() {
        let mut big = b"data: {\"usage\":{\"prompt_tokens\":1},\"pad\":\"".to_vec();
        big.resize(MAX_EVENT_BYTES + 10, b'a');
        big.extend_from_slice(b"\"}\n\n");
        let got = read(SSE, None, &[&big[..1000], &big[1000..]]);
        assert!(
            matches!(&got, UsageRead::Skipped(why) if why.contains("unread")),
            "{got:?}"
        );
        // The event after it is read as usual.
        let after = b"data: {\"usage\":{\"prompt_tokens\":9}}\n\n";
        assert_eq!(read(SSE, None, &[&big, after]), usage(0, 0, 9));
    }

    #[test]
    fn only_events_that_carry_usage_are_parsed() {
        assert!(!carries_usage(b"{\"usage\":null,\"x\":1}"));
        assert!(!carries_usage(b"{\"usage\" :\n null}"));
        assert!(!carries_usage(b"{\"text\":\"the \\\"usage\\\": 5\"}"));
        assert!(carries_usage(
            b"{\"usage\":null,\"response\":{\"usage\": {}}}"
        ));
        assert!(carries_usage(b"{\"usage\":{\"prompt_tokens\":1}}"));
        assert!(carries_usage(b"{\"usage\""));
    }

    #[test]
    fn multi_line_data_and_a_last_event_without_blank_line() {
        let stream = b"data: {\"usage\":\ndata: {\"prompt_tokens\":4}}";
        assert_eq!(read(SSE, None, &[stream]), usage(0, 0, 4));
        let comment = b": keep-alive\n\ndata:{\"usage\":{\"input_tokens\":8}}\n\n";
        assert_eq!(read(SSE, None, &[comment]), usage(0, 0, 8));
    }
}
