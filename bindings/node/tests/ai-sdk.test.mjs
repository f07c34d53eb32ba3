// `staleguardMiddleware` of the Vercel AI SDK (`ai` 7, `@ai-sdk/anthropic`, `@ai-sdk/openai`)
// against a scripted local model: recorded sessions become AI SDK messages (tool calls and
// tool results as parts), and the request the provider sends with the middleware is the
// CLI's projection of the request it sends without it. The model's answer, streamed or not,
// comes back unchanged.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';

import { generateText, isStepCount, jsonSchema, streamText, tool, wrapLanguageModel } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import * as staleguard from 'staleguard';

import { clearStaleguardEnv, cli, cliProject, sessions } from './helpers.mjs';
import { ANSWER, TEXT, startModel } from './scripted-model.mjs';

const RECEIPT = '[staleguard receipt]';
const EVIDENCE = 'Retained observed evidence';
// A 1x1 PNG: a screenshot as an MCP server returns one.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

// The providers warn that the scripted model's name is unknown to them.
globalThis.AI_SDK_LOG_WARNINGS = false;

let model;
before(async () => {
  model = await startModel();
});
after(() => model.close());
beforeEach(() => {
  clearStaleguardEnv();
  model.received.length = 0;
});

const claude = () => createAnthropic({ baseURL: `${model.url}/v1`, apiKey: 'sk-ant-test' })('claude-scripted');
const gpt = () => createOpenAI({ baseURL: `${model.url}/v1`, apiKey: 'sk-test' }).chat('gpt-4.1');

function recorded(format, folder = 'pwmcp-0.0.41') {
  const all = sessions(folder)
    .filter(([name]) => name.endsWith(`.${format}.json`))
    .map(([name, text]) => [name, JSON.parse(text)]);
  assert.ok(all.length >= 6, `${folder} has ${all.length} ${format} sessions`);
  return all;
}

/** How a tool's result reaches the AI SDK: a string (`text`), or MCP content parts as
 * `@ai-sdk/mcp` gives them (`content`), optionally with a screenshot after the text. */
function output(value, { isError = false, shape = 'text', screenshot = false } = {}) {
  if (isError) return { type: 'error-text', value };
  if (shape === 'text') return { type: 'text', value };
  const parts = [{ type: 'text', text: value }];
  if (screenshot) parts.push({ type: 'file', mediaType: 'image/png', data: { type: 'data', data: PNG } });
  return { type: 'content', value: parts };
}

/** A recorded Anthropic Messages session as AI SDK call options: system, messages, tools. */
function fromAnthropic(request, shape) {
  const names = new Map();
  const messages = [];
  for (const message of request.messages) {
    if (typeof message.content === 'string') {
      messages.push({ role: message.role, content: message.content });
    } else if (message.role === 'assistant') {
      messages.push({
        role: 'assistant',
        content: message.content.map((block) => {
          if (block.type === 'text') return { type: 'text', text: block.text };
          names.set(block.id, block.name);
          return { type: 'tool-call', toolCallId: block.id, toolName: block.name, input: block.input };
        }),
      });
    } else {
      assert.ok(message.content.every((block) => block.type === 'tool_result'), 'user turns hold tool results');
      messages.push({
        role: 'tool',
        content: message.content.map((block) => ({
          type: 'tool-result',
          toolCallId: block.tool_use_id,
          toolName: names.get(block.tool_use_id),
          output: output(block.content, { isError: block.is_error === true, ...shape }),
        })),
      });
    }
  }
  const tools = Object.fromEntries(
    request.tools.map((t) => [t.name, tool({ description: t.description, inputSchema: jsonSchema(t.input_schema) })]),
  );
  return { system: request.system, messages, tools, maxOutputTokens: request.max_tokens };
}

/** A recorded Chat Completions session as AI SDK call options. */
function fromChat(request, shape) {
  const names = new Map();
  const messages = [];
  let system;
  for (const message of request.messages) {
    if (message.role === 'system') {
      system = message.content;
    } else if (message.role === 'user') {
      messages.push({ role: 'user', content: message.content });
    } else if (message.role === 'assistant') {
      const content = message.content ? [{ type: 'text', text: message.content }] : [];
      for (const call of message.tool_calls ?? []) {
        names.set(call.id, call.function.name);
        content.push({ type: 'tool-call', toolCallId: call.id, toolName: call.function.name, input: JSON.parse(call.function.arguments) });
      }
      messages.push({ role: 'assistant', content });
    } else {
      // Chat Completions does not flag failures: a result that reads as one is one to the model.
      const part = {
        type: 'tool-result',
        toolCallId: message.tool_call_id,
        toolName: names.get(message.tool_call_id),
        output: output(message.content, shape),
      };
      if (messages.at(-1)?.role === 'tool') messages.at(-1).content.push(part);
      else messages.push({ role: 'tool', content: [part] });
    }
  }
  const tools = Object.fromEntries(
    request.tools.map((t) => [t.function.name, tool({ description: t.function.description, inputSchema: jsonSchema(t.function.parameters) })]),
  );
  return { system, messages, tools };
}

const middleware = (options) => staleguard.staleguardMiddleware(options);

async function generate(base, options, wrapped, middlewareOptions) {
  const modelOf = wrapped ? wrapLanguageModel({ model: base, middleware: middleware(middlewareOptions) }) : base;
  const result = await generateText({ model: modelOf, ...options });
  return { text: result.text, bodies: model.received.splice(0).map((r) => r.body) };
}

async function stream(base, options, wrapped) {
  const modelOf = wrapped ? wrapLanguageModel({ model: base, middleware: middleware() }) : base;
  const result = streamText({ model: modelOf, ...options });
  const deltas = [];
  for await (const delta of result.textStream) deltas.push(delta);
  return { text: deltas, bodies: model.received.splice(0).map((r) => r.body) };
}

/** Sends the call with the plain model and the wrapped one: bodies and answers of each. */
async function both(send, base, options) {
  const plain = await send(base, options, false);
  const wrapped = await send(base, options, true);
  assert.equal(plain.bodies.length, wrapped.bodies.length, 'as many requests');
  assert.deepEqual(wrapped.text, plain.text, "the model's answer, unchanged");
  return { plain: plain.bodies, wrapped: wrapped.bodies, text: wrapped.text };
}

function cliOf(body, format) {
  return JSON.parse(cliProject(JSON.stringify(body), format));
}

function assertCollapsed(bodies) {
  const text = JSON.stringify(bodies);
  assert.ok(text.includes(RECEIPT), 'old pages became receipts');
}

/**
 * The Anthropic provider sends the projection exactly: receipts, the evidence the projection
 * appends as parts of their own, and the one `cache_control` breakpoint it adds.
 */
function assertAnthropicProjected({ plain, wrapped }) {
  for (let i = 0; i < plain.length; i += 1) {
    assert.deepEqual(wrapped[i], cliOf(plain[i], 'anthropic'), `request ${i} is the CLI's projection`);
  }
  assert.notDeepEqual(wrapped, plain);
  assertCollapsed(wrapped);
}

/**
 * The OpenAI Chat provider sends every tool result as one string (a `content` output as its
 * parts' JSON text), so where the projection appends parts of its own after a result (the
 * evidence a follow-up question asks for, guidance after a stalled page) the body cannot hold
 * them as parts. There the result's own text comes first, then each appended part, joined
 * by a blank line (for a `content` output: the parts' JSON, the appended ones after its own).
 * Everything else is the CLI's projection exactly.
 */
function assertChatProjected({ plain, wrapped }) {
  let joined = 0;
  for (let i = 0; i < plain.length; i += 1) {
    const want = cliOf(plain[i], 'openai');
    const { messages: got, ...rest } = wrapped[i];
    const { messages: expected, ...expectedRest } = want;
    assert.deepEqual(rest, expectedRest, `request ${i}: all but the messages are the CLI's`);
    assert.equal(got.length, expected.length);
    expected.forEach((message, m) => {
      const before = plain[i].messages[m];
      if (message.role === 'tool' && Array.isArray(message.content) && typeof before.content === 'string') {
        const [own, ...appended] = message.content;
        assert.ok(appended.length > 0 && appended.every((p) => p.type === 'text'), 'parts appended');
        assert.deepEqual(own, { type: 'text', text: before.content }, "the result's own text first, as it was");
        const parts = parseParts(before.content);
        const content = parts
          ? JSON.stringify([...parts, ...appended])
          : [before.content, ...appended.map((p) => p.text)].join('\n\n');
        assert.deepEqual(got[m], { ...message, content }, `request ${i}, message ${m}`);
        joined += 1;
      } else {
        assert.deepEqual(got[m], message, `request ${i}, message ${m} is the CLI's`);
      }
    });
  }
  assert.notDeepEqual(wrapped, plain);
  assertCollapsed(wrapped);
  return joined;
}

function parseParts(text) {
  try {
    const parts = JSON.parse(text);
    return Array.isArray(parts) ? parts : null;
  } catch {
    return null;
  }
}

describe('the Anthropic provider', () => {
  test('generateText: every recorded session is sent as the CLI projection', async () => {
    for (const [name, request] of recorded('anthropic')) {
      const run = await both(generate, claude(), fromAnthropic(request));
      assertAnthropicProjected(run);
      assert.equal(run.text, TEXT, name);
    }
  });

  test('streamText: the same request, and the answer streamed as the model sent it', async () => {
    for (const [name, request] of recorded('anthropic')) {
      const run = await both(stream, claude(), fromAnthropic(request));
      assertAnthropicProjected(run);
      assert.deepEqual(run.text, ANSWER, name);
    }
  });

  test('MCP content results, screenshots included, are sent as the CLI projection', async () => {
    let evidence = 0;
    for (const [name, request] of recorded('anthropic', 'pwmcp-0.0.83')) {
      const run = await both(generate, claude(), fromAnthropic(request, { shape: 'content', screenshot: true }));
      assertAnthropicProjected(run);
      const sent = JSON.stringify(run.wrapped);
      assert.ok(JSON.stringify(run.plain).split(PNG).length > sent.split(PNG).length, `${name}: old screenshots dropped`);
      if (sent.includes(EVIDENCE)) evidence += 1;
    }
    assert.ok(evidence > 0, 'some evidence travels');
  });
});

describe('the OpenAI Chat provider', () => {
  test('generateText: every recorded session is sent as the CLI projection', async () => {
    let joined = 0;
    for (const [name, request] of recorded('openai')) {
      const run = await both(generate, gpt(), fromChat(request));
      joined += assertChatProjected(run);
      assert.equal(run.text, TEXT, name);
    }
    assert.ok(joined > 0, 'a follow-up question got its evidence appended');
  });

  test('streamText: the same request, and the answer streamed as the model sent it', async () => {
    for (const [name, request] of recorded('openai')) {
      const run = await both(stream, gpt(), fromChat(request));
      assertChatProjected(run);
      assert.deepEqual(run.text, ANSWER, name);
    }
  });

  test('MCP content results are sent as the CLI projection', async () => {
    let joined = 0;
    for (const [name, request] of recorded('openai')) {
      const run = await both(generate, gpt(), fromChat(request, { shape: 'content' }));
      joined += assertChatProjected(run);
      assert.equal(run.text, TEXT, name);
    }
    assert.ok(joined > 0);
  });

  test('MCP content results with screenshots: collapsed as the Anthropic provider collapses them', async () => {
    // The provider sends a `content` output as its parts' JSON text, where the CLI reads
    // text parts but not the AI SDK's file parts, so it collapses no such result. The
    // middleware reads the parts themselves: each old page collapses, its screenshot
    // dropped, to the very text the Anthropic provider sends for it.
    for (const [name, request] of recorded('anthropic')) {
      const shape = { shape: 'content', screenshot: true };
      const chat = await both(generate, gpt(), fromAnthropic(request, shape));
      const messages = await both(generate, claude(), fromAnthropic(request, shape));
      assert.ok(!JSON.stringify(chat.plain.map((body) => cliOf(body, 'openai'))).includes(RECEIPT), `${name}: the CLI collapses none`);
      // (A failure goes as `{"error": text}` to OpenAI and as the text, flagged, to Anthropic.)
      const sentByChat = chat.wrapped[0].messages
        .filter((m) => m.role === 'tool')
        .map((m) => JSON.parse(m.content))
        .map((c) => (Array.isArray(c) ? c : c.error));
      const sentByMessages = messages.wrapped[0].messages.flatMap((m) =>
        Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_result').map((b) => b.content) : [],
      );
      const toParts = (blocks) =>
        blocks.map((b) => (b.type === 'image' ? { type: 'file', mediaType: 'image/png', data: { type: 'data', data: PNG } } : b));
      assert.deepEqual(sentByChat, sentByMessages.map((c) => (typeof c === 'string' ? c : toParts(c))), name);
      assert.ok(JSON.stringify(sentByChat).includes(RECEIPT));
    }
  });

  test('a tool loop: every step of generateText is projected', async () => {
    const [, request] = recorded('openai').find(([name]) => name.startsWith('order.'));
    const options = fromChat(request);
    const newest = request.messages.findLast((m) => m.role === 'tool').content;
    options.tools.browser_snapshot = tool({
      description: 'Capture accessibility snapshot of the current page',
      inputSchema: jsonSchema({ type: 'object', properties: {} }),
      execute: async () => newest,
    });
    options.stopWhen = isStepCount(3);
    const loop = (base, opts, wrapped) => {
      model.script({ id: 'call_new', name: 'browser_snapshot', input: {} });
      return generate(base, opts, wrapped);
    };
    const run = await both(loop, gpt(), options);
    assert.equal(run.plain.length, 2, 'a tool call, then the answer');
    assertChatProjected(run);
    assert.equal(run.wrapped[1].messages.at(-1).tool_call_id, 'call_new', 'the step sent its own result');
    assert.equal(run.text, TEXT);
  });
});

describe('the middleware', () => {
  const [, order] = recorded('anthropic').find(([name]) => name.startsWith('order.'));

  test('declares the middleware specification of ai 7', () => {
    assert.equal(middleware().specificationVersion, 'v4');
  });

  test('BROWSER_HISTORY_COMPACTION=off sends prompts as they are', async () => {
    const options = fromAnthropic(order);
    const plain = await generate(claude(), options, false);
    for (const off of ['off', 'false', '0', 'no', 'OFF']) {
      process.env.BROWSER_HISTORY_COMPACTION = off;
      const wrapped = await generate(claude(), options, true);
      assert.deepEqual(wrapped.bodies, plain.bodies, `${off}: sent unchanged`);
    }
  });

  test('a bad config is a ConfigValueError; a good one is the CLI config', async () => {
    assert.throws(() => middleware({ config: { max_repeats: 'many' } }), staleguard.ConfigValueError);
    assert.throws(() => middleware({ config: { no_such_key: 1 } }), /no_such_key/);
    assert.throws(() => middleware({ config: '/nonexistent/staleguard.toml' }), staleguard.ConfigValueError);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-ai-sdk-'));
    try {
      const file = path.join(dir, 'staleguard.toml');
      fs.writeFileSync(file, 'receipt_max_bytes = 120\nevidence_retention = "off"\n');
      const options = fromAnthropic(order);
      const [plain] = (await generate(claude(), options, false)).bodies;
      const want = JSON.parse(cli(['project', '--format', 'anthropic', '--config', file], JSON.stringify(plain)).toString('utf8'));
      assert.notDeepEqual(want, cliOf(plain, 'anthropic'), 'the config changes the projection');
      for (const config of [file, { receipt_max_bytes: 120, evidence_retention: 'off' }]) {
        const [sent] = (await generate(claude(), options, true, { config })).bodies;
        assert.deepEqual(sent, want);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  /** The provider-level prompt the AI SDK hands a middleware for `options`. */
  async function providerPrompt(options) {
    let params;
    const spy = {
      specificationVersion: 'v4',
      transformParams: async (args) => {
        params = args.params;
        return args.params;
      },
    };
    await generateText({ model: wrapLanguageModel({ model: claude(), middleware: spy }), ...options });
    model.received.length = 0;
    return params;
  }

  test('writes back into the same parts: ids, order and output types kept, the caller’s prompt untouched', async () => {
    const params = await providerPrompt(fromAnthropic(order, { shape: 'content', screenshot: true }));
    const before = structuredClone(params);
    const transform = middleware().transformParams;
    const out = await transform({ type: 'generate', params, model: claude() });
    assert.deepEqual(params, before, 'the params it was given are not changed');
    assert.notEqual(out.prompt, params.prompt);
    const shape = (prompt) =>
      prompt.map((m) => [m.role, Array.isArray(m.content) ? m.content.map((p) => [p.type, p.toolCallId, p.output?.type]) : typeof m.content]);
    assert.deepEqual(shape(out.prompt), shape(params.prompt), 'every part where it was, of the type it was');
    const results = (prompt) => prompt.flatMap((m) => (m.role === 'tool' ? m.content : []));
    const [newest, ...older] = results(out.prompt).reverse();
    assert.deepEqual(newest.output.value.slice(0, 2), results(params.prompt).at(-1).output.value, 'the newest page, as it was');
    assert.ok(newest.output.value.slice(2).every((p) => p.type === 'text' && p.text.startsWith(EVIDENCE)), 'then the evidence');
    const collapsed = older.filter((part) => part.output.value[0]?.text?.startsWith(RECEIPT));
    assert.ok(collapsed.length >= 6, `${collapsed.length} old pages collapsed`);
    for (const part of collapsed) {
      assert.equal(part.output.value.length, 1, 'a receipt, without its screenshot');
    }
    const failures = older.filter((part) => part.output.type === 'error-text');
    assert.ok(failures.length === 0 || failures.every((f) => !f.output.value.startsWith(RECEIPT)));
    // The second call of the same prompt gives the same (the projection is deterministic).
    assert.deepEqual(await transform({ type: 'stream', params, model: claude() }), out);
  });

  test('a collapsed JSON result stays JSON, a failure is never collapsed, an unknown output is left alone', async () => {
    const params = await providerPrompt(fromChat(recorded('openai').find(([name]) => name.startsWith('research.'))[1]));
    // Results as tools return them: the JSON of a text part, a failure, something else.
    let n = 0;
    const prompt = params.prompt.map((m) =>
      m.role !== 'tool'
        ? m
        : {
            ...m,
            content: m.content.map((part) => {
              n += 1;
              const text = part.output.value;
              if (/^(### Result\nError|### Error|Error)/.test(text)) return { ...part, output: { type: 'error-json', value: { message: text } } };
              if (n === 3) return { ...part, output: { type: 'future-output', value: text } };
              return { ...part, output: { type: 'json', value: { type: 'text', text } } };
            }),
          },
    );
    const transform = middleware().transformParams;
    const out = await transform({ type: 'generate', params: { ...params, prompt }, model: gpt() });
    const results = (p) => p.flatMap((m) => (m.role === 'tool' ? m.content : []));
    const pairs = results(prompt).map((part, i) => [part, results(out.prompt)[i]]);
    const jsons = pairs.filter(([before]) => before.output.type === 'json');
    const collapsed = jsons.filter(([, after]) => after.output.type === 'json' && after.output.value.text.startsWith(RECEIPT));
    assert.ok(collapsed.length >= 4, `${collapsed.length} JSON results collapsed, as JSON`);
    for (const [before, after] of pairs) {
      assert.equal(after.toolCallId, before.toolCallId);
      if (before.output.type === 'error-json' || before.output.type === 'future-output') assert.deepEqual(after, before);
    }
    assert.ok(pairs.some(([before]) => before.output.type === 'error-json'), 'the session has a failure');
  });

  test('a prompt without tool results comes back as it is', async () => {
    const params = { prompt: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }] };
    const out = await middleware().transformParams({ type: 'generate', params, model: gpt() });
    assert.equal(out, params);
  });
});
