//! JSON-RPC 2.0 as MCP speaks it: what a message from the client is, whether a line from the
//! server is a message at all, and the error responses the relay writes itself.

use serde_json::{json, Value};

/// The line is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The method's parameters are not what it takes.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The server is gone: the code the MCP SDKs give a closed connection.
pub(crate) const CONNECTION_CLOSED: i64 = -32000;
/// JSON-RPC's internal error: a bug of the relay's, never the request's.
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// What a JSON value from the client is.
#[derive(Debug)]
pub(crate) enum Message<'a> {
    /// A request: it expects a response with its `id`.
    Request { id: &'a Value, method: &'a str },
    /// A notification: nothing answers it.
    Notification { method: &'a str },
    /// A response to a request of the server's.
    Response,
    /// A batch: MCP has none since 2025-06-18, and the guard could not look inside one.
    Batch(&'a [Value]),
    /// Not a valid request: answered with -32600, with its id where one could be read.
    Invalid { id: Value, why: &'static str },
    /// A response that breaks the rules: a response is never answered, so it is dropped.
    BadResponse(&'static str),
}

/// Reads one JSON value from the client as JSON-RPC 2.0 with MCP's rules (ids are strings
/// or integers, never null).
pub(crate) fn classify(message: &Value) -> Message<'_> {
    let object = match message {
        Value::Array(items) => return Message::Batch(items),
        Value::Object(object) => object,
        _ => {
            return Message::Invalid {
                id: Value::Null,
                why: "a message is a JSON object",
            }
        }
    };
    let id = object.get("id");
    let version_ok = object.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    let has_result = object.contains_key("result");
    let has_error = object.contains_key("error");
    if !object.contains_key("method") && (has_result || has_error) {
        let id_ok = id.is_some_and(is_id) || (has_error && id == Some(&Value::Null));
        return if !version_ok {
            Message::BadResponse("\"jsonrpc\" is not \"2.0\"")
        } else if has_result && has_error {
            Message::BadResponse("it has both a result and an error")
        } else if !id_ok {
            Message::BadResponse("its id is not a string or an integer")
        } else {
            Message::Response
        };
    }
    let invalid = |why| Message::Invalid {
        id: id.filter(|id| is_id(id)).cloned().unwrap_or(Value::Null),
        why,
    };
    if !version_ok {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    let method = match object.get("method") {
        None => return invalid("no \"method\""),
        Some(Value::String(method)) => method.as_str(),
        Some(_) => return invalid("\"method\" must be a string"),
    };
    if object
        .get("params")
        .is_some_and(|p| !p.is_object() && !p.is_array())
    {
        return invalid("\"params\" must be an object");
    }
    match id {
        None => Message::Notification { method },
        Some(id) if is_id(id) => Message::Request { id, method },
        Some(Value::Null) => invalid("an MCP request id must not be null"),
        Some(_) => invalid("\"id\" must be a string or an integer of at most 64 bits"),
    }
}

/// An id MCP allows: a string or an integer. Integers beyond 64 bits, fractions and
/// exponents are refused: they would not come back as the client wrote them.
pub(crate) fn is_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// Whether a value from the server is a JSON-RPC message (or a batch of them) that the
/// client can take: anything else on its standard output is a log line or garbage.
pub(crate) fn is_message(value: &Value) -> bool {
    let one = |v: &Value| {
        v.as_object()
            .is_some_and(|o| o.get("jsonrpc").and_then(Value::as_str) == Some("2.0"))
    };
    match value {
        Value::Array(items) => !items.is_empty() && items.iter().all(one),
        other => one(other),
    }
}

/// An error response.
pub(crate) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> String {
        let value: Value = serde_json::from_str(text).unwrap();
        match classify(&value) {
            Message::Request { .. } => "request".into(),
            Message::Notification { .. } => "notification".into(),
            Message::Response => "response".into(),
            Message::Batch(_) => "batch".into(),
            Message::Invalid { id, .. } => format!("invalid {id}"),
            Message::BadResponse(_) => "bad response".into(),
        }
    }

    #[test]
    fn messages() {
        for (text, want) in [
            (r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, "request"),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}"#,
                "request",
            ),
            (
                r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"x"}"#,
                "request",
            ),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
                "request",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                "notification",
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, "response"),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#,
                "response",
            ),
            (r#"[]"#, "batch"),
            (r#"{"id":1,"method":"ping"}"#, "invalid 1"),
            (
                r#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#,
                "invalid \"x\"",
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, "invalid 1"),
            (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, "invalid 1"),
            (
                r#"{"jsonrpc":"2.0","method":"x","params":"p"}"#,
                "invalid null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                "invalid null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                "invalid null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#,
                "invalid null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                "invalid null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
                "invalid null",
            ),
            (r#"42"#, "invalid null"),
            (r#"{}"#, "invalid null"),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
                "bad response",
            ),
            (r#"{"id":1,"result":{}}"#, "bad response"),
            (r#"{"jsonrpc":"2.0","id":[1],"result":{}}"#, "bad response"),
        ] {
            assert_eq!(kind(text), want, "{text}");
        }
    }

    #[test]
    fn server_messages() {
        for (text, want) in [
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
            (r#"[{"jsonrpc":"2.0","method":"x"}]"#, true),
            (r#"[]"#, false),
            (r#"{"level":30,"msg":"listening"}"#, false),
            (r#""log""#, false),
            (r#"7"#, false),
        ] {
            assert_eq!(
                is_message(&serde_json::from_str(text).unwrap()),
                want,
                "{text}"
            );
        }
    }
}
