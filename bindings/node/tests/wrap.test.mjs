// `wrap` of the official `openai` and `@anthropic-ai/sdk` clients, against a scripted local
// model: every request the wrapped client sends is the CLI's projection of the request the
// plain client sends, and every answer (JSON, stream, stream helper) comes back as the plain
// client gets it.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import * as staleguard from 'staleguard';

import { clearStaleguardEnv, cli, cliProject, REPO, sessions } from './helpers.mjs';
import { ANSWER, TEXT, startModel } from './scripted-model.mjs';

const FOLDERS = ['pwmcp-0.0.41', 'pwmcp-0.0.83', 'cdmcp-1.11.0'];
const RECEIPT = '[staleguard receipt]';

let model;
before(async () => {
  model = await startModel();
});
after(() => model.close());
beforeEach(() => {
  clearStaleguardEnv();
  model.received.length = 0;
});

const openai = () => new OpenAI({ baseURL: `${model.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
const anthropic = () => new Anthropic({ baseURL: model.url, apiKey: 'sk-ant-test', maxRetries: 0 });

function recorded(format, folder = 'pwmcp-0.0.41') {
  return sessions(folder)
    .filter(([name]) => name.endsWith(`.${format}.json`))
    .map(([name, text]) => [name, JSON.parse(text)]);
}

const order = (format) => recorded(format).find(([name]) => name.startsWith('order.'))[1];

/** The recorded chat session as Responses input items (calls and outputs by call_id). */
function responsesInput(chat) {
  const items = [];
  for (const m of chat.messages) {
    if (m.role === 'tool') {
      items.push({ type: 'function_call_output', call_id: m.tool_call_id, output: m.content });
      continue;
    }
    if (m.content) items.push({ role: m.role, content: m.content });
    for (const c of m.tool_calls ?? []) {
      items.push({ type: 'function_call', call_id: c.id, name: c.function.name, arguments: c.function.arguments });
    }
  }
  return items;
}

function taken() {
  return model.received.splice(0);
}

/**
 * Runs `send` with a plain client and with the wrapped one: the requests each sent and what
 * each call returned.
 */
async function both(makeClient, send, options) {
  model.received.length = 0;
  const plainAnswer = await send(makeClient());
  const plain = taken();
  const wrappedAnswer = await send(staleguard.wrap(makeClient(), options));
  const wrapped = taken();
  return { plain, wrapped, plainAnswer, wrappedAnswer };
}

/** The CLI's projection of a request body, as parsed JSON. */
function cliOf(body, format) {
  return JSON.parse(cliProject(JSON.stringify(body), format));
}

/** Every request of `wrapped` is the CLI's projection of the same request of `plain`. */
function assertProjected({ plain, wrapped }, format, { changed = true } = {}) {
  assert.ok(plain.length > 0, 'the plain client sent something');
  assert.deepEqual(
    wrapped.map((r) => r.path),
    plain.map((r) => r.path),
  );
  for (let i = 0; i < plain.length; i += 1) {
    assert.deepEqual(wrapped[i].body, cliOf(plain[i].body, format), `request ${i} is the CLI's projection`);
  }
  if (changed) {
    assert.notDeepEqual(
      wrapped.map((r) => r.body),
      plain.map((r) => r.body),
      'old pages were collapsed',
    );
    assert.ok(JSON.stringify(wrapped.map((r) => r.body)).includes(RECEIPT));
  }
}

async function collect(iterable, pick) {
  const out = [];
  for await (const event of iterable) {
    const value = pick(event);
    if (value !== undefined) out.push(value);
  }
  return out;
}

const chatDelta = (chunk) => chunk.choices?.[0]?.delta?.content || undefined;
const responsesDelta = (event) => (event.type === 'response.output_text.delta' ? event.delta : undefined);
const messagesDelta = (event) => (event.type === 'content_block_delta' ? event.delta.text : undefined);

describe('a task with Chinese right before a URL (issue 41)', () => {
  // The panic this task caused aborted the whole Node process of an agent that used wrap.
  test('both clients send it projected and get the answer', async () => {
    const dir = path.join(REPO, 'fixtures/unicode');
    const chat = JSON.parse(fs.readFileSync(path.join(dir, 'order_zh.openai.json'), 'utf8'));
    const run = await both(openai, (client) =>
      client.chat.completions.create({ model: chat.model, messages: chat.messages, tools: chat.tools }),
    );
    assertProjected(run, 'openai');
    assert.deepEqual(run.wrappedAnswer, run.plainAnswer);
    const messages = JSON.parse(fs.readFileSync(path.join(dir, 'order_zh.anthropic.json'), 'utf8'));
    const sent = await both(anthropic, (client) =>
      client.messages.create({
        model: messages.model,
        max_tokens: 100,
        system: messages.system,
        messages: messages.messages,
        tools: messages.tools,
      }),
    );
    assertProjected(sent, 'anthropic');
    assert.deepEqual(sent.wrappedAnswer, sent.plainAnswer);
  });
});

describe('openai: chat completions', () => {
  for (const folder of FOLDERS) {
    test(`${folder}: every recorded session is sent as the CLI's projection`, async () => {
      const all = recorded('openai', folder);
      assert.ok(all.length >= 6, `${folder} has ${all.length} sessions`);
      for (const [name, request] of all) {
        const run = await both(openai, (client) =>
          client.chat.completions.create({ model: request.model, messages: request.messages, tools: request.tools }),
        );
        assertProjected(run, 'openai');
        assert.equal(run.wrappedAnswer.choices[0].message.content, TEXT, name);
        assert.deepEqual(run.wrappedAnswer, run.plainAnswer, name);
      }
    });
  }

  test('a streamed answer comes back chunk for chunk', async () => {
    const request = order('openai');
    const run = await both(openai, async (client) => {
      const stream = await client.chat.completions.create({ model: request.model, messages: request.messages, stream: true });
      assert.equal(typeof stream.controller?.abort, 'function', 'the SDK Stream itself');
      return collect(stream, (chunk) => chunk);
    });
    assertProjected(run, 'openai');
    assert.deepEqual(run.wrappedAnswer.map(chatDelta).filter(Boolean), ANSWER);
    assert.deepEqual(run.wrappedAnswer, run.plainAnswer);
  });

  test('the APIPromise keeps withResponse and asResponse', async () => {
    const request = order('openai');
    const client = staleguard.wrap(openai());
    const promise = client.chat.completions.create({ model: request.model, messages: request.messages });
    assert.equal(typeof promise.withResponse, 'function');
    const { data, response, request_id } = await promise.withResponse();
    assert.equal(response.status, 200);
    assert.equal(request_id, 'req_scripted');
    assert.equal(data.choices[0].message.content, TEXT);
    const raw = await client.chat.completions.create({ model: request.model, messages: request.messages }).asResponse();
    assert.equal((await raw.json()).choices[0].message.content, TEXT);
    const sent = taken();
    assert.equal(sent.length, 2);
    const want = cliOf({ model: request.model, messages: request.messages }, 'openai');
    for (const { body } of sent) assert.deepEqual(body, want);
  });

  test('parse and the stream helper send the projection and hand back their results', async () => {
    const request = order('openai');
    const parse = await both(openai, (client) => client.chat.completions.parse({ model: request.model, messages: request.messages }));
    assertProjected(parse, 'openai');
    assert.equal(parse.wrappedAnswer.choices[0].message.content, TEXT);
    assert.deepEqual(parse.wrappedAnswer, parse.plainAnswer);

    const stream = await both(openai, async (client) => {
      const helper = client.chat.completions.stream({ model: request.model, messages: request.messages });
      const deltas = [];
      helper.on('content', (delta) => deltas.push(delta));
      const final = await helper.finalChatCompletion();
      return { deltas, content: final.choices[0].message.content };
    });
    assertProjected(stream, 'openai');
    assert.deepEqual(stream.wrappedAnswer, { deltas: ANSWER, content: TEXT });
    assert.deepEqual(stream.wrappedAnswer, stream.plainAnswer);
  });

  test('runTools projects every request of its loop, the tool results it adds included', async () => {
    const request = order('openai');
    const tools = [
      {
        type: 'function',
        function: {
          name: 'browser_snapshot',
          description: 'Capture accessibility snapshot of the current page',
          parameters: { type: 'object', properties: {} },
          parse: JSON.parse,
          function: async () => request.messages.findLast((m) => m.role === 'tool').content,
        },
      },
    ];
    const run = await both(openai, async (client) => {
      model.script({ id: 'call_new', name: 'browser_snapshot', input: {} });
      const runner = client.chat.completions.runTools({ model: request.model, messages: request.messages, tools });
      return runner.finalContent();
    });
    assert.equal(run.plain.length, 2, 'a tool call, then the answer');
    assertProjected(run, 'openai');
    const last = run.wrapped[1].body.messages;
    assert.equal(last.at(-1).role, 'tool', 'the loop sent its own tool result');
    assert.equal(last.at(-1).tool_call_id, 'call_new');
    assert.equal(run.wrappedAnswer, TEXT);
    assert.equal(run.plainAnswer, TEXT);
  });
});

describe('openai: responses', () => {
  test('every recorded session, as Responses input, is sent as the CLI projection', async () => {
    for (const folder of FOLDERS) {
      for (const [name, chat] of recorded('openai', folder)) {
        const input = responsesInput(chat);
        const run = await both(openai, (client) => client.responses.create({ model: chat.model, input }));
        assertProjected(run, 'responses');
        assert.equal(run.wrappedAnswer.output_text, TEXT, name);
        assert.deepEqual(run.wrappedAnswer, run.plainAnswer, name);
      }
    }
  });

  test('streamed events, the stream helper and parse', async () => {
    const chat = order('openai');
    const input = responsesInput(chat);
    const events = await both(openai, async (client) =>
      collect(await client.responses.create({ model: chat.model, input, stream: true }), (event) => event),
    );
    assertProjected(events, 'responses');
    assert.deepEqual(events.wrappedAnswer.map(responsesDelta).filter(Boolean), ANSWER);
    assert.deepEqual(events.wrappedAnswer, events.plainAnswer);

    const helper = await both(openai, async (client) => {
      const stream = client.responses.stream({ model: chat.model, input });
      const deltas = await collect(stream, responsesDelta);
      return { deltas, text: (await stream.finalResponse()).output_text };
    });
    assertProjected(helper, 'responses');
    assert.deepEqual(helper.wrappedAnswer, { deltas: ANSWER, text: TEXT });
    assert.deepEqual(helper.wrappedAnswer, helper.plainAnswer);

    const parse = await both(openai, (client) => client.responses.parse({ model: chat.model, input }));
    assertProjected(parse, 'responses');
    assert.equal(parse.wrappedAnswer.output_text, TEXT);
  });

  test('input token counts are of the projected input; beta.responses sends it too', async () => {
    const chat = order('openai');
    const input = responsesInput(chat);
    const count = await both(openai, (client) => client.responses.inputTokens.count({ model: chat.model, input }));
    assertProjected(count, 'responses');
    assert.equal(count.wrappedAnswer.input_tokens, JSON.stringify(count.wrapped[0].body.input).length, "the model's count");
    assert.ok(count.wrappedAnswer.input_tokens < count.plainAnswer.input_tokens, 'of the smaller, projected input');

    const beta = await both(openai, (client) => client.beta.responses.create({ model: chat.model, input }));
    assertProjected(beta, 'responses');
    assert.equal(beta.wrappedAnswer.output[0].content[0].text, TEXT);
    assert.deepEqual(beta.wrappedAnswer, beta.plainAnswer);
  });

  test('an input that is not a list goes out as it is', async () => {
    const client = staleguard.wrap(openai());
    const answer = await client.responses.create({ model: 'gpt-4.1', input: 'What is on the page?', instructions: 'Be brief.' });
    assert.equal(answer.output_text, TEXT);
    assert.deepEqual(taken()[0].body, { model: 'gpt-4.1', input: 'What is on the page?', instructions: 'Be brief.' });
  });
});

describe('anthropic: messages', () => {
  const params = (request) => ({
    model: request.model,
    max_tokens: request.max_tokens,
    system: request.system,
    messages: request.messages,
    tools: request.tools,
  });

  for (const folder of FOLDERS) {
    test(`${folder}: every recorded session is sent as the CLI's projection`, async () => {
      const all = recorded('anthropic', folder);
      assert.ok(all.length >= 6, `${folder} has ${all.length} sessions`);
      for (const [name, request] of all) {
        const run = await both(anthropic, (client) => client.messages.create(params(request)));
        assertProjected(run, 'anthropic');
        assert.equal(run.wrappedAnswer.content[0].text, TEXT, name);
        assert.deepEqual(run.wrappedAnswer, run.plainAnswer, name);
      }
    });
  }

  test('streamed events, and the stream helper', async () => {
    const request = order('anthropic');
    const events = await both(anthropic, async (client) =>
      collect(await client.messages.create({ ...params(request), stream: true }), (event) => event),
    );
    assertProjected(events, 'anthropic');
    assert.deepEqual(events.wrappedAnswer.map(messagesDelta).filter(Boolean), ANSWER);
    assert.deepEqual(events.wrappedAnswer, events.plainAnswer);

    const helper = await both(anthropic, async (client) => {
      const stream = client.messages.stream(params(request));
      const texts = [];
      stream.on('text', (text) => texts.push(text));
      const final = await stream.finalMessage();
      return { texts, text: final.content[0].text };
    });
    assertProjected(helper, 'anthropic');
    assert.deepEqual(helper.wrappedAnswer, { texts: ANSWER, text: TEXT });
    assert.deepEqual(helper.wrappedAnswer, helper.plainAnswer);
  });

  test('parse, withResponse, and countTokens of the projected request', async () => {
    const request = order('anthropic');
    const parse = await both(anthropic, (client) => client.messages.parse(params(request)));
    assertProjected(parse, 'anthropic');
    assert.equal(parse.wrappedAnswer.content[0].text, TEXT);

    const { data, response } = await staleguard.wrap(anthropic()).messages.create(params(request)).withResponse();
    assert.equal(response.status, 200);
    assert.equal(data.content[0].text, TEXT);
    assert.deepEqual(taken()[0].body, cliOf(params(request), 'anthropic'));

    const { max_tokens, ...countable } = params(request);
    const count = await both(anthropic, (client) => client.messages.countTokens(countable));
    assertProjected(count, 'anthropic');
    assert.equal(count.wrappedAnswer.input_tokens, JSON.stringify(count.wrapped[0].body.messages).length, "the model's count");
    assert.ok(count.wrappedAnswer.input_tokens < count.plainAnswer.input_tokens, 'of the smaller, projected request');
  });

  test('beta.messages: create, stream and countTokens', async () => {
    const request = order('anthropic');
    const create = await both(anthropic, (client) => client.beta.messages.create(params(request)));
    assertProjected(create, 'anthropic');
    assert.equal(create.wrappedAnswer.content[0].text, TEXT);

    const stream = await both(anthropic, (client) => client.beta.messages.stream(params(request)).finalText());
    assertProjected(stream, 'anthropic');
    assert.equal(stream.wrappedAnswer, TEXT);

    const { max_tokens, ...countable } = params(request);
    const count = await both(anthropic, (client) => client.beta.messages.countTokens(countable));
    assertProjected(count, 'anthropic');
    assert.ok(count.wrappedAnswer.input_tokens < count.plainAnswer.input_tokens);
  });

  test('the beta tool runner projects every request of its loop', async () => {
    const request = order('anthropic');
    const newest = request.messages.findLast((m) => m.role === 'user' && Array.isArray(m.content)).content[0].content;
    const snapshot = betaTool({
      name: 'browser_snapshot',
      description: 'Capture accessibility snapshot of the current page',
      inputSchema: { type: 'object', properties: {} },
      run: async () => newest,
    });
    const run = await both(anthropic, async (client) => {
      model.script({ id: 'toolu_new', name: 'browser_snapshot', input: {} });
      const runner = client.beta.messages.toolRunner({ ...params(request), tools: [snapshot] });
      const final = await runner.runUntilDone();
      return final.content[0].text;
    });
    assert.equal(run.plain.length, 2, 'a tool call, then the answer');
    assertProjected(run, 'anthropic');
    const last = run.wrapped[1].body.messages.at(-1);
    assert.equal(last.content[0].tool_use_id, 'toolu_new', 'the loop sent its own tool result');
    assert.equal(run.wrappedAnswer, TEXT);
    assert.equal(run.plainAnswer, TEXT);
  });
});

describe('the wrapped client', () => {
  test('is still the SDK client: instanceof, its fields and its other methods', async () => {
    const plain = openai();
    const client = staleguard.wrap(plain);
    assert.ok(client instanceof OpenAI);
    assert.notEqual(client, plain);
    assert.equal(client.apiKey, 'sk-test');
    assert.equal(client.baseURL, `${model.url}/v1`);
    assert.equal(client.chat.completions, client.chat.completions, 'the same wrapped resource every time');
    assert.equal(client.models, plain.models, 'what it does not project is the real thing');
    // A method that reads the client's private fields works through the wrapper.
    assert.equal(client.buildURL('/models', null), plain.buildURL('/models', null));
    client.maxRetries = 1;
    assert.equal(plain.maxRetries, 1, 'a field set on the wrapper is set on the client');
    const claude = staleguard.wrap(anthropic());
    assert.ok(claude instanceof Anthropic);
    assert.equal(claude.apiKey, 'sk-ant-test');
    // The SDK's errors come through as they are.
    const lost = staleguard.wrap(new OpenAI({ baseURL: `${model.url}/nowhere`, apiKey: 'sk-test', maxRetries: 0 }));
    await assert.rejects(lost.chat.completions.create({ model: 'm', messages: order('openai').messages }), OpenAI.NotFoundError);
  });

  test('withOptions gives a wrapped client, for both SDKs', async () => {
    const chat = order('openai');
    const copy = staleguard.wrap(openai()).withOptions({ timeout: 30_000 }).withOptions({ maxRetries: 0 });
    assert.ok(copy instanceof OpenAI);
    assert.equal(copy.timeout, 30_000);
    await copy.chat.completions.create({ model: chat.model, messages: chat.messages });
    assert.deepEqual(taken()[0].body, cliOf({ model: chat.model, messages: chat.messages }, 'openai'));

    const request = order('anthropic');
    const claude = staleguard.wrap(anthropic()).withOptions({ timeout: 30_000 });
    assert.ok(claude instanceof Anthropic);
    const body = { model: request.model, max_tokens: 10, messages: request.messages };
    await claude.messages.create(body);
    assert.deepEqual(taken()[0].body, cliOf(body, 'anthropic'));
  });

  test('BROWSER_HISTORY_COMPACTION=off sends requests as they are', async () => {
    const chat = order('openai');
    const body = { model: chat.model, messages: chat.messages, tools: chat.tools };
    const plain = openai();
    const wrapped = staleguard.wrap(plain);
    for (const off of ['off', 'false', '0', 'no', ' OFF ']) {
      process.env.BROWSER_HISTORY_COMPACTION = off;
      assert.equal(staleguard.wrap(plain), plain, `${JSON.stringify(off)} at wrap time: the client itself`);
      await wrapped.chat.completions.create(body);
      assert.deepEqual(taken()[0].body, body, `${JSON.stringify(off)} at call time: sent unchanged`);
    }
    process.env.BROWSER_HISTORY_COMPACTION = 'on';
    await wrapped.chat.completions.create(body);
    assert.deepEqual(taken()[0].body, cliOf(body, 'openai'), 'on again: projected');

    const request = order('anthropic');
    const claude = staleguard.wrap(anthropic());
    process.env.BROWSER_HISTORY_COMPACTION = 'off';
    const anthropicBody = { model: request.model, max_tokens: 10, system: request.system, messages: request.messages };
    await claude.messages.stream(anthropicBody).finalMessage();
    assert.deepEqual(taken()[0].body, { ...anthropicBody, stream: true });
  });

  test('a bad config is a ConfigValueError when wrapping; a good one is the CLI config', async () => {
    assert.throws(() => staleguard.wrap(openai(), { config: { max_repeats: 'many' } }), staleguard.ConfigValueError);
    assert.throws(() => staleguard.wrap(openai(), { config: { no_such_key: 1 } }), /no_such_key/);
    assert.throws(() => staleguard.wrap(anthropic(), { config: '/nonexistent/staleguard.toml' }), staleguard.ConfigValueError);
    process.env.BROWSER_HISTORY_COMPACTION = 'perhaps';
    assert.throws(() => staleguard.wrap(openai()), staleguard.ConfigValueError);
    delete process.env.BROWSER_HISTORY_COMPACTION;

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-wrap-'));
    try {
      const file = path.join(dir, 'staleguard.toml');
      fs.writeFileSync(file, 'receipt_max_bytes = 120\nevidence_retention = "off"\n');
      const chat = order('openai');
      const body = { model: chat.model, messages: chat.messages };
      const want = JSON.parse(cli(['project', '--config', file], JSON.stringify(body)).toString('utf8'));
      assert.notDeepEqual(want, cliOf(body, 'openai'), 'the config changes the projection');
      for (const config of [file, { receipt_max_bytes: 120, evidence_retention: 'off' }]) {
        await staleguard.wrap(openai(), { config }).chat.completions.create(body);
        assert.deepEqual(taken()[0].body, want);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
