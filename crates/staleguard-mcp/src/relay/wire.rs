//! Messages the relay writes itself, as lines.

use serde_json::{json, Value};

use super::Output;
use crate::jsonrpc;

/// A result response.
pub(super) fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A tool error the model reads: the call never reached the server.
pub(super) fn refusal(id: &Value, text: &str) -> Value {
    response(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": true}),
    )
}

/// The parse error (-32700) of a line that is not JSON.
pub(super) fn parse_error(e: &serde_json::Error) -> Value {
    jsonrpc::error(
        &Value::Null,
        jsonrpc::PARSE_ERROR,
        &format!("Parse error: {e}"),
    )
}

/// The invalid-request error (-32600) of a message that is no valid request: `why`.
pub(super) fn invalid_request(id: &Value, why: &str) -> Value {
    jsonrpc::error(
        id,
        jsonrpc::INVALID_REQUEST,
        &format!("Invalid Request: {why}"),
    )
}

/// The answer to a request the relay failed on: `why` says what became of it.
pub(super) fn internal_error(id: &Value, why: &str) -> Value {
    jsonrpc::error(id, jsonrpc::INTERNAL_ERROR, why)
}

/// A message for the client.
pub(super) fn to_client(message: &Value) -> Output {
    Output::ToClient(line_of(message))
}

/// A message for the server.
pub(super) fn to_server(message: &Value) -> Output {
    Output::ToServer(line_of(message))
}

/// A message as one line. Written straight into bytes: `Value`'s `Display` goes through a
/// formatter for every piece, which costs a fifth more on a large snapshot.
fn line_of(message: &Value) -> Vec<u8> {
    // Sized for the message's strings up front: a large snapshot otherwise grows the line
    // by doubling, copying megabytes into fresh pages at every step.
    let mut line = Vec::with_capacity(64 + string_bytes(message));
    // A `Value` always serialises (its keys are strings); the fallback is never taken.
    match serde_json::to_writer(&mut line, message) {
        Ok(()) => line,
        Err(_) => message.to_string().into_bytes(),
    }
}

/// Bytes of the strings in `value`, keys included: nearly all of a message's length.
fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(|v| string_bytes(v) + 1).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + 4 + string_bytes(v)).sum(),
        _ => 8,
    }
}
