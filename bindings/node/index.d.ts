// Types of the npm package `staleguard`.

/** A request format staleguard reads; `auto` tells them apart by their fields. */
export type Format = 'auto' | 'openai' | 'anthropic' | 'responses' | 'gemini';

/**
 * The keys of `staleguard.toml` (as an object, tables as nested objects), or the path of
 * such a file. The environment (`STALEGUARD_*`) applies on top, as for every host.
 */
export type Config = string | URL | Record<string, unknown>;

export interface Options {
  /** The request's format; `auto` by default. */
  format?: Format;
  config?: Config;
}

/**
 * The projection of a model request (OpenAI Chat Completions, OpenAI Responses, Anthropic
 * Messages or Gemini), of the kind it was given: every browser observation but the newest
 * collapsed to a small receipt; IDs, call/result pairing and everything else unchanged.
 *
 * @throws {InvalidJSONError} text or bytes that are not JSON (with `line`, `column`, `offset`)
 * @throws {NotARequestError} JSON that is not a request of a format staleguard reads
 * @throws {UnknownFormatError} a `format` staleguard does not know
 * @throws {ConfigValueError} a config key or value staleguard does not allow
 * @throws {InternalError} a bug in staleguard; the body was not projected
 */
export function project<T extends object>(body: T, options?: Options): T;
export function project(body: string, options?: Options): string;
export function project(body: Buffer | Uint8Array, options?: Options): Buffer;

/** What `staleguard inspect --json` prints about a request. */
export interface Report {
  format: string;
  results: Array<Record<string, unknown>>;
  calls: Array<Record<string, unknown>>;
  stalled: unknown;
  evidence: unknown;
  totals: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * What projection does with every browser result of `body`, the guard's verdict on every
 * browser call, whether the session stalled, the evidence kept and totals in bytes and
 * o200k tokens. Throws as `project` does.
 */
export function inspect(body: object | string | Buffer | Uint8Array, options?: Options): Report;

/** The guard's answer about one proposed browser call. */
export interface Verdict {
  /** True when the call may go to the browser. */
  allowed: boolean;
  /** `allow`, or why it is refused. */
  kind: 'allow' | 'stale_ref' | 'unknown_ref' | 'reused_ref' | 'needs_snapshot' | 'repeated_submission';
  /** The refusal text for the model, or the note on an allowed call. */
  reason: string | null;
}

/**
 * The guard's verdict on `call` proposed after the request `body`: an OpenAI `tool_calls`
 * entry, an Anthropic `tool_use` block or a Responses `function_call` item (object or JSON
 * text).
 */
export function checkCall(
  body: object | string | Buffer | Uint8Array,
  call: object | string,
  options?: Pick<Options, 'config'>,
): Verdict;

export interface WrapOptions {
  /** As for `project`: the keys of `staleguard.toml`, or the path of such a file. Checked at once. */
  config?: Config;
}

/**
 * The client with every model call projected before it is sent: of the `openai` client
 * `chat.completions.create`/`parse`/`stream` (and `runTools`, each of its requests),
 * `responses.create`/`parse`/`stream` and `responses.inputTokens.count`; of the
 * `@anthropic-ai/sdk` client `messages.create`/`parse`/`stream`/`countTokens` (and the beta
 * tool runner, each of its requests); the same under `client.beta`, and on the clients
 * `withOptions` returns. The conversation (`messages`, or a Responses `input` list) and the
 * fields the projection reads (`model`, `system`, `tools`, `instructions`) are projected, then
 * the SDK's own method runs: what it returns (an APIPromise with `withResponse()` and
 * `asResponse()`, a stream, a stream helper) comes back unchanged. The wrapper is a Proxy:
 * `instanceof` and every other property are the client's. With
 * `BROWSER_HISTORY_COMPACTION=off` (or false, 0, no) in the environment, when wrapping or at
 * call time, requests go out as they are.
 *
 * @throws {ConfigValueError} a config key or value staleguard does not allow
 */
export function wrap<T extends object>(client: T, options?: WrapOptions): T;

/**
 * A Vercel AI SDK (`ai` 7, language model specification v4) middleware that projects the
 * prompt of every call: `wrapLanguageModel({ model, middleware: staleguardMiddleware() })`.
 * The prompt is read as the body its provider sends (Anthropic Messages for Anthropic
 * models, OpenAI Chat Completions for the others); every changed tool result is written
 * back into its own part. Tool call IDs, parts and their order never change.
 *
 * @throws {ConfigValueError} a config key or value staleguard does not allow
 */
export function staleguardMiddleware(options?: WrapOptions): {
  specificationVersion: 'v4';
  transformParams: (args: { type: 'generate' | 'stream'; params: any; model: any }) => PromiseLike<any>;
};

/** A request, format or config staleguard cannot read. */
export class StaleguardError extends Error {}
/** The body is not valid JSON (or not UTF-8). */
export class InvalidJSONError extends StaleguardError {
  /** 1-based line of the error. */
  line: number;
  /** 1-based column (in bytes) of the error. */
  column: number;
  /** Byte offset of the error. */
  offset: number;
}
/** Valid JSON, but not a request body of a format staleguard reads. */
export class NotARequestError extends StaleguardError {}
/** `format` is not one of auto, openai, anthropic, responses or gemini. */
export class UnknownFormatError extends StaleguardError {}
/** A config key or value (or an environment variable) is not allowed, or the file cannot be read. */
export class ConfigValueError extends StaleguardError {}
/** A bug in staleguard (it panicked): the request was not projected. Please report it with the input. */
export class InternalError extends StaleguardError {}
