'use strict';
// `wrap(client)`: an `openai` or `@anthropic-ai/sdk` client whose model calls are projected
// first, as the Python package's `staleguard.wrap`.
//
// The wrapper is a Proxy of the real client: every property is the client's own, and only
// the calls that send a conversation (`chat.completions.create`, `responses.create`,
// `messages.create`, their `parse`/`stream` helpers, `messages.countTokens`, the `beta`
// equivalents) get their `messages` or `input` projected before the SDK sees them. The real
// method then runs with the projected params, so whatever it returns (an APIPromise with
// `.withResponse()`/`.asResponse()`, a Stream, a MessageStream or ChatCompletionStream
// helper) is handed back untouched. `instanceof` holds, since the Proxy's prototype is the
// client's.

const native = require('./native.cjs');
const { configText } = require('./config.cjs');
const { unwrap } = require('./api.cjs');

// A route is a method that sends one request body (a Send: its params are projected here,
// once), a method returning a new client (CLIENT), or the routes of a sub-resource (a plain
// object). A resource's other methods run on the wrapped resource: the helpers that loop
// over requests of their own (openai `runTools`, anthropic `toolRunner`) send each one
// through the wrapped client, so each is projected by a Send.
const CLIENT = Symbol('client');

class Send {
  constructor(format, key) {
    this.format = format;
    this.key = key;
  }
}

const CHAT = new Send('openai', 'messages');
const RESPONSES = new Send('responses', 'input');
const ANTHROPIC = new Send('anthropic', 'messages');

// `parse` and `stream` send one body (through the real client's `create`): projected where
// they are called.
const chatCompletions = { create: CHAT, parse: CHAT, stream: CHAT };
const responses = { create: RESPONSES, parse: RESPONSES, stream: RESPONSES, inputTokens: { count: RESPONSES } };
const messages = { create: ANTHROPIC, parse: ANTHROPIC, stream: ANTHROPIC, countTokens: ANTHROPIC };

const ROUTES = {
  chat: { completions: chatCompletions },
  responses,
  messages,
  // openai v4 had the chat helpers under `beta.chat.completions`; openai 7 has
  // `beta.responses`; anthropic has `beta.messages` (the same bodies, plus `betas`).
  beta: { chat: { completions: chatCompletions }, responses, messages },
  withOptions: CLIENT,
};

// Request fields the projection may read or write besides the conversation itself.
const CONTEXT_FIELDS = ['model', 'system', 'tools', 'instructions'];
const OFF = new Set(['off', 'false', '0', 'no']);

/** True when `BROWSER_HISTORY_COMPACTION` says off: requests go out as they are. */
function compactionOff() {
  return OFF.has((process.env.BROWSER_HISTORY_COMPACTION ?? '').trim().toLowerCase());
}

/** The config's TOML text, checked now: a bad key or value throws ConfigValueError at once. */
function checkedConfig(config) {
  const text = configText(config);
  unwrap(native.projectText('{"messages":[]}', 'openai', text));
  return text;
}

/**
 * `client` with every model call projected before it is sent. `config` is as for
 * `project`. With `BROWSER_HISTORY_COMPACTION=off` (when wrapping or at call time) requests
 * go out as they are, for A/B runs.
 */
function wrap(client, options = {}) {
  if (client === null || (typeof client !== 'object' && typeof client !== 'function')) {
    throw new TypeError('wrap needs an OpenAI or Anthropic client');
  }
  const config = checkedConfig(options?.config);
  if (compactionOff()) return client;
  return wrapClient(client, config);
}

function wrapClient(client, config) {
  const context = { config, client, root: null };
  context.root = proxy(client, ROUTES, context, true);
  return context.root;
}

/**
 * A Proxy of `target` (the client or one of its resources): every property is looked up on
 * the target itself, and the routed names come back projecting. The client's own methods
 * run on the client (they use its private fields); a resource's run on the wrapped resource,
 * whose `_client` is the wrapped client, so that what they send on (a tool runner's thread,
 * a helper's `this.create`) goes through the routes too.
 */
function proxy(target, routes, context, root = false) {
  const bound = new WeakMap();
  const wrapped = new Map();
  return new Proxy(target, {
    get(t, key, receiver) {
      const value = Reflect.get(t, key, t);
      const route = typeof key === 'string' && Object.hasOwn(routes, key) ? routes[key] : undefined;
      if (route === undefined || value === null || value === undefined) {
        // A resource's client is the wrapped one: helpers that loop reach `create` through it.
        if (key === '_client' && value === context.client) return context.root;
        return passThrough(value, key, root ? t : receiver, bound);
      }
      const known = wrapped.get(key);
      if (known && known.value === value) return known.result;
      let result;
      if (route === CLIENT) result = rewrapping(value, t, context);
      else if (route instanceof Send) result = projecting(value, t, route, context);
      else if (typeof value === 'object' || typeof value === 'function') result = proxy(value, route, context);
      else result = value;
      wrapped.set(key, { value, result });
      return result;
    },
    set(t, key, value) {
      return Reflect.set(t, key, value, t);
    },
  });
}

/** A method, bound to `self` (once, so it stays the same function). */
function passThrough(value, key, self, bound) {
  if (typeof value !== 'function' || key === 'constructor') return value;
  let fn = bound.get(value);
  if (!fn) {
    fn = value.bind(self);
    bound.set(value, fn);
  }
  return fn;
}

function rewrapping(method, target, context) {
  if (typeof method !== 'function') return method;
  return function withOptions(...args) {
    return wrapClient(Reflect.apply(method, target, args), context.config);
  };
}

function projecting(method, target, route, context) {
  if (typeof method !== 'function') return method;
  return function create(params, ...rest) {
    if (!compactionOff() && isPlainParams(params) && Array.isArray(params[route.key])) {
      params = projectedParams(params, route, context.config);
    }
    return Reflect.apply(method, target, [params, ...rest]);
  };
}

function isPlainParams(params) {
  return params !== null && typeof params === 'object' && !Array.isArray(params);
}

/**
 * The params to send instead: the conversation projected, and any context field the
 * projection changed (an SDK takes the plain JSON form of each). Everything else, functions
 * and all (a parse helper's tools), stays the caller's own.
 */
function projectedParams(params, route, config) {
  const { format, key } = route;
  const body = {};
  for (const name of [key, ...CONTEXT_FIELDS]) {
    if (params[name] !== undefined) body[name] = params[name];
  }
  const text = JSON.stringify(body);
  const sent = JSON.parse(text);
  const projected = JSON.parse(unwrap(native.projectText(text, format, config)));
  const out = { ...params, [key]: projected[key] ?? [] };
  for (const name of CONTEXT_FIELDS) {
    if (name in projected && !sameJSON(projected[name], sent[name])) out[name] = projected[name];
  }
  return out;
}

function sameJSON(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

module.exports = { wrap, compactionOff, checkedConfig };
