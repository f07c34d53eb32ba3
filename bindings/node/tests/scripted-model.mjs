// A scripted model for the wrap and AI SDK tests: a local HTTP server (127.0.0.1, a free
// port) that answers the OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
// APIs as they do, JSON or server-sent events, and keeps every request body it gets.

import http from 'node:http';

/** The answer's text, in the pieces a stream sends it in. */
export const ANSWER = ['The order ', 'is placed.'];
export const TEXT = ANSWER.join('');

function sse(events) {
  return events
    .map(([name, data]) => `${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
    .join('');
}

function chatAnswer(stream, call) {
  const created = 0;
  if (!stream) {
    const message = call
      ? { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.input) } }] }
      : { role: 'assistant', content: TEXT };
    return {
      id: 'chatcmpl-1', object: 'chat.completion', created, model: 'scripted',
      choices: [{ index: 0, message, logprobs: null, finish_reason: call ? 'tool_calls' : 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    };
  }
  const chunk = (delta, finish = null) => ({
    id: 'chatcmpl-1', object: 'chat.completion.chunk', created, model: 'scripted',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const events = [[null, chunk({ role: 'assistant', content: '' })]];
  for (const part of ANSWER) events.push([null, chunk({ content: part })]);
  events.push([null, chunk({}, 'stop')]);
  events.push([null, { id: 'chatcmpl-1', object: 'chat.completion.chunk', created, model: 'scripted', choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
  events.push([null, '[DONE]']);
  return sse(events);
}

function responsesAnswer(stream) {
  const text = { type: 'output_text', text: TEXT, annotations: [], logprobs: [] };
  const item = { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [text] };
  const response = (status, output) => ({
    id: 'resp_1', object: 'response', created_at: 0, model: 'scripted', status, output,
    parallel_tool_calls: false, tool_choice: 'auto', tools: [], error: null, incomplete_details: null,
    instructions: null, metadata: {}, temperature: 1, top_p: 1, text: { format: { type: 'text' } },
    usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  });
  if (!stream) return response('completed', [item]);
  let sequence = 0;
  const event = (type, data) => [type, { type, sequence_number: sequence++, ...data }];
  const events = [
    event('response.created', { response: response('in_progress', []) }),
    event('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } }),
    event('response.content_part.added', { item_id: 'msg_1', output_index: 0, content_index: 0, part: { ...text, text: '' } }),
  ];
  for (const delta of ANSWER) {
    events.push(event('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta, logprobs: [] }));
  }
  events.push(
    event('response.output_text.done', { item_id: 'msg_1', output_index: 0, content_index: 0, text: TEXT, logprobs: [] }),
    event('response.content_part.done', { item_id: 'msg_1', output_index: 0, content_index: 0, part: text }),
    event('response.output_item.done', { output_index: 0, item }),
    event('response.completed', { response: response('completed', [item]) }),
  );
  return sse(events);
}

function messagesAnswer(stream, call) {
  const message = {
    id: 'msg_1', type: 'message', role: 'assistant', model: 'scripted', content: [],
    stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 },
  };
  if (!stream) {
    const content = call ? [{ type: 'tool_use', id: call.id, name: call.name, input: call.input }] : [{ type: 'text', text: TEXT }];
    return { ...message, content, stop_reason: call ? 'tool_use' : 'end_turn', usage: { input_tokens: 1, output_tokens: 2 } };
  }
  const events = [
    ['message_start', { type: 'message_start', message }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
  ];
  for (const text of ANSWER) {
    events.push(['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }]);
  }
  events.push(
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }],
    ['message_stop', { type: 'message_stop' }],
  );
  return sse(events);
}

/**
 * Starts the scripted model: `{ url, received, script, close }`. `received` gets
 * `{ path, body }` for every request; `script(calls)` makes the next answers of Chat
 * Completions or Messages (not streamed) tool calls, `{ id, name, input }` each, in order.
 */
export async function startModel() {
  const received = [];
  const calls = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const path = new URL(request.url, 'http://localhost').pathname;
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        response.writeHead(400).end();
        return;
      }
      received.push({ path, body });
      const stream = body.stream === true;
      let answer;
      if (path === '/v1/chat/completions') answer = chatAnswer(stream, stream ? null : calls.shift());
      else if (path === '/v1/responses/input_tokens') answer = { object: 'response.input_tokens', input_tokens: JSON.stringify(body.input).length };
      else if (path === '/v1/responses') answer = responsesAnswer(stream);
      else if (path === '/v1/messages/count_tokens') answer = { input_tokens: JSON.stringify(body.messages).length };
      else if (path === '/v1/messages') answer = messagesAnswer(stream, stream ? null : calls.shift());
      else {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no such path"}}');
        return;
      }
      const data = typeof answer === 'string' ? answer : JSON.stringify(answer);
      response.writeHead(200, {
        'content-type': typeof answer === 'string' ? 'text/event-stream' : 'application/json',
        'content-length': Buffer.byteLength(data),
        'request-id': 'req_scripted',
        'x-request-id': 'req_scripted',
      });
      response.end(data);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    script: (...next) => calls.push(...next),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}
