'use strict';
// The errors staleguard raises, as in the Python package: one family under StaleguardError.

class StaleguardError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The body is not valid JSON (or not UTF-8): `line`, `column` (1-based) and `offset` (byte) say where. */
class InvalidJSONError extends StaleguardError {
  constructor(message, { line, column, offset } = {}) {
    super(message);
    this.line = line;
    this.column = column;
    this.offset = offset;
  }
}

/** Valid JSON, but not a request body of a format staleguard reads. */
class NotARequestError extends StaleguardError {}

/** `format` is not one of auto, openai, anthropic, responses or gemini. */
class UnknownFormatError extends StaleguardError {}

/** A config key or value (or an environment variable) is not allowed, or the config file cannot be read. */
class ConfigValueError extends StaleguardError {}

/** A bug in staleguard (it panicked): the request was not projected. Please report it with the input. */
class InternalError extends StaleguardError {}

const BY_KIND = {
  InvalidJSON: InvalidJSONError,
  NotARequest: NotARequestError,
  UnknownFormat: UnknownFormatError,
  ConfigValue: ConfigValueError,
  Internal: InternalError,
  Staleguard: StaleguardError,
};

/** The error for a native Failure ({kind, message, line, column, offset}). */
function fromFailure(failure) {
  const Class = BY_KIND[failure.kind] ?? StaleguardError;
  if (Class === InvalidJSONError) return new InvalidJSONError(failure.message, failure);
  return new Class(failure.message);
}

module.exports = {
  StaleguardError,
  InvalidJSONError,
  NotARequestError,
  UnknownFormatError,
  ConfigValueError,
  InternalError,
  fromFailure,
};
