'use strict';
// `staleguardMiddleware()`: a Vercel AI SDK language model middleware that projects the
// prompt of every call, so that every browser observation but the newest reaches the model
// as a small receipt.
//
// The core reads request bodies (OpenAI Chat, Anthropic Messages, Responses, Gemini), not
// the AI SDK's provider-level prompt. So the prompt is translated into the body its provider
// would send (Anthropic Messages for Anthropic models, OpenAI Chat Completions for every
// other model), keeping where every tool result came from; the body is projected; and each
// tool result the projection changed is written back into the same part of the prompt, as
// an output the provider renders exactly as the projected body has it wherever the output
// types allow (see `rewrite`). Tool call IDs, parts and their order never change.

const native = require('./native.cjs');
const { unwrap } = require('./api.cjs');
const { compactionOff, checkedConfig } = require('./wrap.cjs');

/** What separates a tool result's own text from the parts the projection appended, where
 * the provider can send only one string (OpenAI Chat tool messages). */
const SEP = '\n\n';

/**
 * The middleware: `wrapLanguageModel({ model, middleware: staleguardMiddleware() })`.
 * `config` is as for `project`; a bad one throws ConfigValueError here. With
 * `BROWSER_HISTORY_COMPACTION=off` in the environment at call time prompts go out as they are.
 */
function staleguardMiddleware(options = {}) {
  const config = checkedConfig(options?.config);
  return {
    specificationVersion: 'v4',
    transformParams: async ({ params, model }) => projectParams(params, model, config),
  };
}

/** The call params with the prompt projected (the same object when nothing changed). */
function projectParams(params, model, config) {
  if (compactionOff() || params === null || typeof params !== 'object' || !Array.isArray(params.prompt)) {
    return params;
  }
  const dialect = isAnthropic(model) ? ANTHROPIC : CHAT;
  const translation = dialect.translate(params, model);
  if (translation.results.length === 0) return params;
  const text = JSON.stringify(translation.body);
  const projected = JSON.parse(unwrap(native.projectText(text, dialect.format, config)));
  const prompt = writeBack(params.prompt, translation, projected, dialect);
  return prompt === params.prompt ? params : { ...params, prompt };
}

function isAnthropic(model) {
  // `anthropic.messages`, also behind other hosts (`vertex.anthropic.messages`).
  return typeof model?.provider === 'string' && /(^|\.)anthropic(\.|$)/.test(model.provider);
}

// ---------------------------------------------------------------------------------------
// OpenAI Chat Completions, as @ai-sdk/openai's chat model writes it.

const CHAT = {
  format: 'openai',

  translate(params, model) {
    const messages = [];
    const results = [];
    params.prompt.forEach((message, index) => {
      const content = message?.content;
      switch (message?.role) {
        case 'system':
          messages.push({ role: 'system', content });
          break;
        case 'user':
          if (Array.isArray(content) && content.length === 1 && content[0]?.type === 'text') {
            messages.push({ role: 'user', content: content[0].text });
          } else {
            messages.push({ role: 'user', content: Array.isArray(content) ? content.map(chatUserPart) : content });
          }
          break;
        case 'assistant': {
          let text = '';
          const calls = [];
          for (const part of list(content)) {
            if (part?.type === 'text') text += part.text;
            else if (part?.type === 'tool-call') {
              calls.push({
                id: part.toolCallId,
                type: 'function',
                function: { name: part.toolName, arguments: callArguments(part.input) },
              });
            }
          }
          messages.push(
            calls.length ? { role: 'assistant', content: text || null, tool_calls: calls } : { role: 'assistant', content: text },
          );
          break;
        }
        case 'tool':
          list(content).forEach((part, at) => {
            if (part?.type !== 'tool-result') return;
            const rendered = CHAT.render(part.output);
            results.push({ message: index, part: at, item: messages.length, rendered });
            messages.push({ role: 'tool', tool_call_id: part.toolCallId, content: rendered.content });
          });
          break;
        default:
          // A role this translation does not know: it holds no tool result.
          break;
      }
    });
    const body = { model: modelId(model), messages };
    const tools = list(params.tools)
      .filter((tool) => typeof tool?.name === 'string')
      .map((tool) => ({
        type: 'function',
        function: {
          name: tool.name,
          ...(tool.description !== undefined && { description: tool.description }),
          ...(tool.inputSchema !== undefined && { parameters: tool.inputSchema }),
        },
      }));
    if (tools.length) body.tools = tools;
    return { body, results, carriers: [] };
  },

  /** A tool result's content as the provider sends it; `content` outputs as their parts. */
  render(output) {
    switch (output?.type) {
      case 'text':
        return { content: output.value };
      case 'json':
        return { content: JSON.stringify(output.value) };
      case 'error-text':
      case 'error-json':
        return { content: JSON.stringify({ error: output.value }) };
      case 'execution-denied':
        return { content: output.reason ?? 'Tool call execution denied.' };
      case 'content':
        // The provider sends these as their JSON text; the core reads that text as the same
        // parts, and reads the parts' images too (a collapsed result drops them).
        return { content: list(output.value).map(chatResultPart) };
      default:
        // An output this translation does not know: content the core leaves alone.
        return { content: null };
    }
  },

  projected(projected, result) {
    const message = projected.messages?.[result.item];
    return message && { content: message.content };
  },

  /** The outputs that could stand for `content`, most faithful first. */
  candidates(output, content, rendered) {
    const out = [];
    if (typeof content === 'string') {
      out.push(...stringCandidates(output, content));
      if (output.type === 'error-text' || output.type === 'error-json') {
        const error = parseJSON(content);
        if (error.ok && isObject(error.value) && Object.keys(error.value).length === 1 && 'error' in error.value) {
          out.push({ ...output, value: error.value.error });
        }
      }
    } else if (Array.isArray(content) && output.type === 'content') {
      // Only a `content` output is sent as parts (as its JSON text, which the core reads alike).
      const parts = contentParts(content, output, rendered);
      if (parts) out.push({ ...output, value: parts });
    }
    return out;
  },
};

function chatUserPart(part) {
  if (part?.type === 'text') return { type: 'text', text: part.text };
  if (part?.type === 'file' && isImage(part)) return { type: 'image_url', image_url: { url: 'staleguard:image' } };
  return { type: 'file', file: {} };
}

function chatResultPart(part) {
  if (part?.type === 'text') return { type: 'text', text: part.text };
  if (isImage(part)) return { type: 'image_url', image_url: { url: 'staleguard:image' } };
  // Not text the core may rewrite: the whole result is left as it is.
  return { type: 'staleguard_opaque' };
}

/** As @ai-sdk/openai writes a tool call's arguments. */
function callArguments(input) {
  if (typeof input === 'string') {
    const parsed = parseJSON(input);
    return parsed.ok && isObject(parsed.value) ? input : '{}';
  }
  return JSON.stringify(isObject(input) ? input : {});
}

// ---------------------------------------------------------------------------------------
// Anthropic Messages, as @ai-sdk/anthropic writes it: system blocks up front, user and tool
// messages in a row as one user message, assistant messages in a row as one, and the
// `cache_control` breakpoints its provider options ask for (the core adds one of its own
// only where Anthropic has room for it).

const ANTHROPIC = {
  format: 'anthropic',

  translate(params, model) {
    const messages = [];
    const results = [];
    // Blocks that stand for a part of the prompt: a `cache_control` the projection sets on
    // one is written back to that part.
    const carriers = [];
    let system;
    const groups = groupIntoBlocks(params.prompt);
    groups.forEach((group, g) => {
      if (group.role === 'system') {
        const blocks = group.messages.map(({ message }) => withCache({ type: 'text', text: message.content }, cacheOf(message.providerOptions)));
        if (g === 0 || system === undefined) system = blocks;
        else messages.push({ role: 'system', content: blocks });
        return;
      }
      const item = messages.length;
      const blocks = [];
      const carry = (block, message, part, cacheControl) => {
        carriers.push({ item, block: blocks.length, message, part, cached: cacheControl !== undefined });
        blocks.push(withCache(block, cacheControl));
      };
      const lastGroup = g === groups.length - 1;
      group.messages.forEach(({ message, index }, m) => {
        const content = list(message.content);
        if (message.role === 'user') {
          content.forEach((part, at) => {
            const cacheControl = cacheOf(part?.providerOptions) ?? (at === content.length - 1 ? cacheOf(message.providerOptions) : undefined);
            if (part?.type === 'text') carry({ type: 'text', text: part.text }, index, at, cacheControl);
            else if (part?.type === 'file') carry(anthropicFile(part), index, at, cacheControl);
          });
        } else if (message.role === 'tool') {
          content.forEach((part, at) => {
            if (part?.type !== 'tool-result') return;
            const output = part.output;
            const outputOptions =
              output && 'providerOptions' in output
                ? output.providerOptions
                : output?.type === 'content'
                  ? list(output.value).find((p) => p?.providerOptions != null)?.providerOptions
                  : undefined;
            const cacheControl =
              cacheOf(part.providerOptions) ??
              cacheOf(outputOptions) ??
              (at === content.length - 1 ? cacheOf(message.providerOptions) : undefined);
            const rendered = ANTHROPIC.render(output);
            results.push({ message: index, part: at, item, block: blocks.length, rendered });
            carry(
              { type: 'tool_result', tool_use_id: part.toolCallId, content: rendered.content, ...(rendered.is_error && { is_error: true }) },
              index,
              at,
              cacheControl,
            );
          });
        } else {
          // The provider leaves out empty text parts and trims the very last one.
          const kept = content.map((part, at) => ({ part, at })).filter(({ part }) => part?.type !== 'text' || part.text.length > 0);
          const lastMessage = m === group.messages.length - 1;
          kept.forEach(({ part, at }, k) => {
            const last = k === kept.length - 1;
            const cacheControl = cacheOf(part?.providerOptions) ?? (last ? cacheOf(message.providerOptions) : undefined);
            if (part?.type === 'text') {
              const text = lastGroup && lastMessage && last ? part.text.trim() : part.text;
              carry({ type: 'text', text }, index, at, cacheControl);
            } else if (part?.type === 'tool-call' && !part.providerExecuted) {
              carry({ type: 'tool_use', id: part.toolCallId, name: part.toolName, input: toolInput(part.input) }, index, at, cacheControl);
            }
          });
        }
      });
      messages.push({ role: group.role === 'assistant' ? 'assistant' : 'user', content: blocks });
    });
    const body = { model: modelId(model) };
    if (system !== undefined) body.system = system;
    body.messages = messages;
    const tools = list(params.tools)
      .filter((tool) => typeof tool?.name === 'string')
      .map((tool) =>
        withCache(
          {
            name: tool.name,
            ...(tool.description !== undefined && { description: tool.description }),
            ...(tool.inputSchema !== undefined && { input_schema: tool.inputSchema }),
          },
          tool.type === 'function' ? cacheOf(tool.providerOptions) : undefined,
        ),
      );
    if (tools.length) body.tools = tools;
    const cacheControl = cacheOf(params.providerOptions);
    if (cacheControl !== undefined) body.cache_control = cacheControl;
    return { body, results, carriers };
  },

  render(output) {
    const error = output?.type === 'error-text' || output?.type === 'error-json';
    switch (output?.type) {
      case 'text':
      case 'error-text':
        return { content: output.value, is_error: error };
      case 'execution-denied':
        return { content: output.reason ?? 'Tool call execution denied.', is_error: false };
      case 'content':
        return { content: list(output.value).map(anthropicResultPart), is_error: false };
      case 'json':
      case 'error-json':
        return { content: JSON.stringify(output.value), is_error: error };
      default:
        return { content: null, is_error: false };
    }
  },

  projected(projected, result) {
    const block = projected.messages?.[result.item]?.content?.[result.block];
    return block && { content: block.content, is_error: block.is_error === true };
  },

  candidates(output, content, rendered) {
    const out = [];
    if (typeof content === 'string') {
      out.push(...stringCandidates(output, content));
      if (output.type === 'error-text') out.push({ ...output, value: content });
      if (output.type === 'error-json') {
        const value = parseJSON(content);
        if (value.ok) out.push({ ...output, value: value.value });
      }
    } else if (Array.isArray(content)) {
      // Anthropic sends a `content` output as these very blocks, so any result can become one.
      const parts = contentParts(content, output, rendered);
      if (parts) out.push({ type: 'content', value: parts, ...(output.providerOptions && { providerOptions: output.providerOptions }) });
    }
    return out;
  },
};

function anthropicFile(part) {
  return isImage(part)
    ? { type: 'image', source: { type: 'url', url: 'staleguard:image' } }
    : { type: 'document', source: { type: 'text', media_type: 'text/plain', data: '' } };
}

function anthropicResultPart(part) {
  if (part?.type === 'text') return { type: 'text', text: part.text };
  if (isImage(part)) return { type: 'image', source: { type: 'url', url: 'staleguard:image' } };
  return { type: 'staleguard_opaque' };
}

/** As @ai-sdk/anthropic writes a tool call's input. */
function toolInput(input) {
  if (typeof input === 'string') {
    const parsed = parseJSON(input);
    if (parsed.ok && isObject(parsed.value)) return parsed.value;
  }
  return isObject(input) ? input : { rawInvalidInput: input };
}

/** System messages, assistant messages and user-or-tool messages in a row, in order. */
function groupIntoBlocks(prompt) {
  const groups = [];
  let current;
  prompt.forEach((message, index) => {
    const role = message?.role === 'tool' ? 'user' : message?.role;
    if (role !== 'system' && role !== 'assistant' && role !== 'user') return;
    if (current?.role !== role) {
      current = { role, messages: [] };
      groups.push(current);
    }
    current.messages.push({ message, index });
  });
  return groups;
}

function cacheOf(providerOptions) {
  const anthropic = providerOptions?.anthropic;
  return anthropic?.cacheControl ?? anthropic?.cache_control ?? undefined;
}

function withCache(block, cacheControl) {
  return cacheControl === undefined ? block : { ...block, cache_control: cacheControl };
}

// ---------------------------------------------------------------------------------------
// Writing the projection back into the prompt.

/** The prompt with every changed tool result (and Anthropic breakpoint) written back. */
function writeBack(prompt, translation, projected, dialect) {
  let out = prompt;
  const setPart = (message, at, part) => {
    if (out === prompt) out = prompt.slice();
    if (out[message] === prompt[message]) out[message] = { ...prompt[message], content: prompt[message].content.slice() };
    out[message].content[at] = part;
  };
  const partAt = (message, at) => out[message].content[at];

  for (const result of translation.results) {
    const now = dialect.projected(projected, result);
    if (!now || sameValue(now.content, result.rendered.content)) continue;
    const part = partAt(result.message, result.part);
    const output = rewrite(part.output, result.rendered, now, dialect);
    if (output) setPart(result.message, result.part, { ...part, output });
  }

  for (const carrier of translation.carriers) {
    if (carrier.cached) continue;
    const block = projected.messages?.[carrier.item]?.content?.[carrier.block];
    if (!isObject(block) || block.cache_control === undefined) continue;
    // The core's one breakpoint, where Anthropic has room for it: the provider writes a
    // part's `providerOptions.anthropic.cacheControl` onto the same block.
    const part = partAt(carrier.message, carrier.part);
    const options = part.providerOptions ?? {};
    setPart(carrier.message, carrier.part, {
      ...part,
      providerOptions: { ...options, anthropic: { ...options.anthropic, cacheControl: block.cache_control } },
    });
  }
  return out;
}

/**
 * The output to send for a tool result whose projected content is `now`: the first
 * candidate (the part's own output type first) that the provider renders exactly as `now`;
 * else the closest the provider can send (`fallback`); null to leave the part as it is.
 */
function rewrite(output, rendered, now, dialect) {
  if (!isObject(output)) return null;
  for (const candidate of dialect.candidates(output, now.content, rendered.content)) {
    const again = dialect.render(candidate);
    if (sameValue(again.content, now.content) && Boolean(again.is_error) === Boolean(now.is_error)) return candidate;
  }
  return fallback(output, rendered.content, now.content);
}

/** Candidates for a string the projection wrote in place of the result's content. */
function stringCandidates(output, content) {
  const keep = output.providerOptions ? { providerOptions: output.providerOptions } : {};
  switch (output.type) {
    case 'text':
      return [{ ...output, value: content }];
    case 'json': {
      const value = parseJSON(content);
      return value.ok ? [{ ...output, value: value.value }, { type: 'text', value: content, ...keep }] : [{ type: 'text', value: content, ...keep }];
    }
    case 'content':
      return [{ type: 'text', value: content, ...keep }];
    case 'execution-denied':
      return [{ ...output, reason: content }];
    default:
      return [];
  }
}

/**
 * The AI SDK content parts for projected parts: a part equal to the rendering (`rendered`)
 * of the output's own part at the same place is that part (images and all); a text part is
 * a text part. Null if any part is neither.
 */
function contentParts(parts, output, rendered) {
  const own = output.type === 'content' && Array.isArray(rendered) ? list(output.value) : [];
  const out = [];
  for (let at = 0; at < parts.length; at += 1) {
    const part = parts[at];
    if (at < own.length && sameValue(part, rendered[at])) out.push(own[at]);
    else if (isTextBlock(part)) out.push({ type: 'text', text: part.text });
    else return null;
  }
  return out;
}

/**
 * What the provider can send when no output renders as the projection exactly. A string
 * result that got parts appended (the evidence a later question asks for, the guidance
 * after a stalled page) on a provider that sends tool results as one string: the result's
 * own text, then each appended part, joined by a blank line. A failure stays a failure.
 */
function fallback(output, rendered, content) {
  if (typeof content === 'string') {
    // A result the projection replaced (the receipt of a collapsed observation).
    if (output.type === 'text' || output.type === 'json' || output.type === 'content') {
      return { type: 'text', value: content, ...(output.providerOptions && { providerOptions: output.providerOptions }) };
    }
    return null;
  }
  if (!Array.isArray(content) || !content.every(isTextBlock)) return null;
  const texts = content.map((part) => part.text);
  const ownCount = Array.isArray(rendered) ? rendered.length : 1;
  const ownKept = Array.isArray(rendered)
    ? rendered.every((part, at) => sameValue(part, content[at]))
    : texts[0] === rendered;
  const appended = ownKept ? texts.slice(ownCount) : null;
  switch (output.type) {
    case 'text':
      return { ...output, value: ownKept ? [output.value, ...appended].join(SEP) : texts.join(SEP) };
    case 'json':
    case 'content':
      return { type: 'text', value: texts.join(SEP), ...(output.providerOptions && { providerOptions: output.providerOptions }) };
    case 'error-text':
      return ownKept ? { ...output, value: [output.value, ...appended].join(SEP) } : null;
    case 'error-json':
      return ownKept
        ? { type: 'error-text', value: [JSON.stringify(output.value), ...appended].join(SEP), ...(output.providerOptions && { providerOptions: output.providerOptions }) }
        : null;
    case 'execution-denied':
      return ownKept ? { ...output, reason: [rendered, ...appended].join(SEP) } : null;
    default:
      return null;
  }
}

// ---------------------------------------------------------------------------------------

function modelId(model) {
  return typeof model?.modelId === 'string' ? model.modelId : 'unknown';
}

function isImage(part) {
  const type = typeof part?.mediaType === 'string' ? part.mediaType : typeof part?.mimeType === 'string' ? part.mimeType : '';
  return type === 'image' || type.startsWith('image/') || part?.type === 'image' || part?.type === 'image-data' || part?.type === 'image-url';
}

function isTextBlock(part) {
  return isObject(part) && part.type === 'text' && typeof part.text === 'string' && Object.keys(part).length === 2;
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function list(value) {
  return Array.isArray(value) ? value : [];
}

function parseJSON(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Deep equality of JSON values, key order aside. */
function sameValue(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  const keys = Object.keys(a).filter((k) => a[k] !== undefined);
  const other = Object.keys(b).filter((k) => b[k] !== undefined);
  return keys.length === other.length && keys.every((k) => Object.hasOwn(b, k) && sameValue(a[k], b[k]));
}

module.exports = { staleguardMiddleware };
