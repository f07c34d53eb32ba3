//! JSON string literals, on the lowest floor: the adapter writes contents with them and
//! evidence writes its quote lines, and neither may import the other.

/// `text` as a JSON string literal: receipts, quote lines and contents are written on
/// every request, without an intermediate `Value`.
pub(crate) fn json_string(text: &str) -> String {
    // Serialising a `str` cannot fail; the fallback keeps that a fact of the types.
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\""))
}
