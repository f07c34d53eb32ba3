'use strict';
// project, inspect and checkCall: the core's functions with JavaScript values in and out.

const native = require('./native.cjs');
const { configText, describe } = require('./config.cjs');
const { fromFailure } = require('./errors.cjs');

/** The native call's value, or its Failure thrown as the matching StaleguardError. */
function unwrap(result) {
  if (result !== null && typeof result === 'object' && typeof result.kind === 'string' && 'message' in result) {
    throw fromFailure(result);
  }
  return result;
}

function formatOf(options) {
  const format = options?.format ?? 'auto';
  if (typeof format !== 'string') throw new TypeError(`format must be a string, not ${describe(format)}`);
  return format;
}

/**
 * The projection of a model request, of the kind it was given: an object (an object comes
 * back), JSON text (text) or a Buffer/Uint8Array of UTF-8 JSON (a Buffer).
 */
function project(body, options = {}) {
  const format = formatOf(options);
  const config = configText(options.config);
  if (typeof body === 'string') return unwrap(native.projectText(body, format, config));
  if (body instanceof Uint8Array) {
    const buffer = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    return unwrap(native.projectBuffer(buffer, format, config));
  }
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    return JSON.parse(unwrap(native.projectText(JSON.stringify(body), format, config)));
  }
  throw new TypeError(`body must be an object, a string or a Buffer, not ${describe(body)}`);
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/** The request as JSON text, for the calls whose answer is not a request. */
function text(body) {
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) {
    try {
      return STRICT_UTF8.decode(body);
    } catch {
      // The core says where the bad byte is, as it does for bad JSON.
      unwrap(native.projectBuffer(Buffer.from(body), 'auto', null));
      throw new TypeError('body is not UTF-8');
    }
  }
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) return JSON.stringify(body);
  throw new TypeError(`body must be an object, a string or a Buffer, not ${describe(body)}`);
}

/**
 * What `staleguard inspect --json` prints about `body`: every browser result and what
 * projection does with it, the guard's verdict on every browser call, totals.
 */
function inspect(body, options = {}) {
  const format = formatOf(options);
  return JSON.parse(unwrap(native.inspectJson(text(body), format, configText(options.config))));
}

/**
 * The guard's verdict on `call` (an OpenAI tool_calls entry, an Anthropic tool_use block or
 * a Responses function_call item, as an object or JSON text) proposed after `body`.
 */
function checkCall(body, call, options = {}) {
  const callText = typeof call === 'string' ? call : JSON.stringify(call);
  if (typeof callText !== 'string') throw new TypeError(`call must be an object or JSON text, not ${describe(call)}`);
  return unwrap(native.checkCall(text(body), callText, configText(options.config)));
}

module.exports = { project, inspect, checkCall, unwrap };
