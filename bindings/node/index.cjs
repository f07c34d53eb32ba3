'use strict';
// staleguard: before every model call, only the newest browser observation is real.
//
// The same Rust core as the `staleguard` command, proxy and MCP guard, in-process: `project`
// rewrites a model request so that every browser observation but the newest collapses to a
// small receipt; `wrap` does it for every call an OpenAI or Anthropic client makes, and
// `staleguardMiddleware` for every call of a Vercel AI SDK model.

const { project, inspect, checkCall } = require('./lib/api.cjs');
const { wrap } = require('./lib/wrap.cjs');
const { staleguardMiddleware } = require('./lib/ai-sdk.cjs');
const errors = require('./lib/errors.cjs');

module.exports = {
  project,
  inspect,
  checkCall,
  wrap,
  staleguardMiddleware,
  StaleguardError: errors.StaleguardError,
  InvalidJSONError: errors.InvalidJSONError,
  NotARequestError: errors.NotARequestError,
  UnknownFormatError: errors.UnknownFormatError,
  ConfigValueError: errors.ConfigValueError,
  InternalError: errors.InternalError,
};
