"""Wrapped OpenAI and Anthropic clients (the official SDKs, sync and async, streaming and
not) send projected conversations to a scripted local model and hand its answers back."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import openai
import pytest
import staleguard
from conftest import session

ANSWER = ["The order ", "is placed."]


def sse(events):
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" if name else f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n" for name, data in events)


def chat_answer(stream):
    if not stream:
        return {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(ANSWER)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }
    chunk = lambda delta, finish=None: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    events = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": part})) for part in ANSWER]
    return sse(events + [(None, chunk({}, "stop")), (None, "[DONE]")])


def responses_answer():
    return {
        "id": "resp_1", "object": "response", "created_at": 0, "model": "scripted", "status": "completed",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "".join(ANSWER), "annotations": []}]}],
        "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
    }


def messages_answer(stream):
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 0}}
    if not stream:
        return {**message, "content": [{"type": "text", "text": "".join(ANSWER)}], "stop_reason": "end_turn"}
    events = [("message_start", {"type": "message_start", "message": message}),
              ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}) for p in ANSWER]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}}),
               ("message_stop", {"type": "message_stop"})]
    return sse(events)


class ScriptedModel(BaseHTTPRequestHandler):
    """Answers each API path with a fixed answer and keeps every request body it got."""

    received = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, body))
        stream = bool(body.get("stream"))
        if self.path.endswith("/chat/completions"):
            answer = chat_answer(stream)
        elif self.path.endswith("/responses"):
            answer = responses_answer()
        elif self.path.endswith("/messages"):
            answer = messages_answer(stream)
        elif self.path.endswith("/messages/count_tokens"):
            # A count the test can recompute from what was sent.
            answer = {"input_tokens": len(json.dumps(body["messages"]))}
        else:
            self.send_error(404)
            return
        data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if isinstance(answer, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    ScriptedModel.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", ScriptedModel.received
    server.shutdown()
    server.server_close()


def recorded(name):
    return json.loads(session(name))


def openai_clients(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0), openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)


def anthropic_clients(url):
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0), anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0)


def assert_projected(received, request, fmt):
    (_, sent), = received
    expected = staleguard.project(request, format=fmt)
    assert sent["messages"] == expected["messages"]
    assert sent["messages"] != request["messages"], "old pages were collapsed"
    assert "[staleguard receipt]" in json.dumps(sent["messages"])
    received.clear()


def test_openai_sync_chat_plain_streaming_and_raw(model):
    url, received = model
    request = recorded("order.openai.json")
    client = staleguard.wrap(openai_clients(url)[0])
    assert isinstance(client, openai.OpenAI)
    answer = client.chat.completions.create(model=request["model"], messages=request["messages"], tools=request["tools"])
    assert answer.choices[0].message.content == "".join(ANSWER)
    assert_projected(received, request, "openai")
    stream = client.chat.completions.create(model=request["model"], messages=request["messages"], stream=True)
    assert [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content] == ANSWER
    assert_projected(received, request, "openai")
    raw = client.chat.completions.with_raw_response.create(model=request["model"], messages=request["messages"])
    assert raw.status_code == 200 and raw.parse().choices[0].message.content == "".join(ANSWER)
    assert_projected(received, request, "openai")
    assert client.api_key == "sk-test" and client.base_url.port == int(url.rsplit(":", 1)[1])


def test_openai_async_chat_plain_and_streaming(model):
    url, received = model
    request = recorded("order.openai.json")
    client = staleguard.wrap(openai_clients(url)[1])
    assert isinstance(client, openai.AsyncOpenAI)

    async def run():
        answer = await client.chat.completions.create(model=request["model"], messages=request["messages"])
        assert answer.choices[0].message.content == "".join(ANSWER)
        assert_projected(received, request, "openai")
        stream = await client.chat.completions.create(model=request["model"], messages=request["messages"], stream=True)
        parts = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
        assert parts == ANSWER
        assert_projected(received, request, "openai")

    asyncio.run(run())


def responses_input(chat):
    """The recorded chat session as Responses input items (calls and outputs by call_id)."""
    items = []
    for m in chat["messages"]:
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        if m.get("content"):
            items.append({"role": m["role"], "content": m["content"]})
        for c in m.get("tool_calls") or []:
            items.append({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]})
    return items


def test_openai_responses_sync_and_async(model):
    url, received = model
    chat = recorded("order.openai.json")
    items = responses_input(chat)
    expected = staleguard.project({"model": chat["model"], "input": items}, format="responses")["input"]
    assert expected != items
    sync, async_client = (staleguard.wrap(c) for c in openai_clients(url))
    assert sync.responses.create(model=chat["model"], input=items).output_text == "".join(ANSWER)

    async def run():
        return (await async_client.responses.create(model=chat["model"], input=items)).output_text

    assert asyncio.run(run()) == "".join(ANSWER)
    assert [body["input"] for _, body in received] == [expected, expected]


def test_anthropic_sync_create_and_stream(model):
    url, received = model
    request = recorded("order.anthropic.json")
    client = staleguard.wrap(anthropic_clients(url)[0])
    assert isinstance(client, anthropic.Anthropic)
    kwargs = {k: request[k] for k in ("model", "max_tokens", "system", "messages", "tools")}
    answer = client.messages.create(**kwargs)
    assert answer.content[0].text == "".join(ANSWER)
    assert_projected(received, request, "anthropic")
    with client.messages.stream(**kwargs) as stream:
        assert list(stream.text_stream) == ANSWER
    assert_projected(received, request, "anthropic")
    events = client.messages.create(**kwargs, stream=True)
    assert [e.delta.text for e in events if e.type == "content_block_delta"] == ANSWER
    assert_projected(received, request, "anthropic")


def test_anthropic_async_create_and_stream(model):
    url, received = model
    request = recorded("order.anthropic.json")
    client = staleguard.wrap(anthropic_clients(url)[1])
    assert isinstance(client, anthropic.AsyncAnthropic)
    kwargs = {k: request[k] for k in ("model", "max_tokens", "system", "messages", "tools")}

    async def run():
        answer = await client.messages.create(**kwargs)
        assert answer.content[0].text == "".join(ANSWER)
        assert_projected(received, request, "anthropic")
        async with client.messages.stream(**kwargs) as stream:
            assert [t async for t in stream.text_stream] == ANSWER
        assert_projected(received, request, "anthropic")

    asyncio.run(run())


def test_anthropic_count_tokens_counts_the_projected_request(model):
    url, received = model
    request = recorded("order.anthropic.json")
    sync, async_client = (staleguard.wrap(c) for c in anthropic_clients(url))
    kwargs = {k: request[k] for k in ("model", "system", "messages", "tools")}
    counted = sync.messages.count_tokens(**kwargs)
    (_, sent), = received
    assert counted.input_tokens == len(json.dumps(sent["messages"])), "the model's count, handed back"
    assert counted.input_tokens < len(json.dumps(request["messages"])), "of the smaller, projected request"
    assert_projected(received, request, "anthropic")

    async def run():
        return await async_client.messages.count_tokens(**kwargs)

    assert asyncio.run(run()).input_tokens == counted.input_tokens
    assert_projected(received, request, "anthropic")


def test_openai_parse_stream_helper_and_streaming_response(model):
    url, received = model
    request = recorded("order.openai.json")
    client = staleguard.wrap(openai_clients(url)[0]).copy(timeout=30)
    assert isinstance(client, openai.OpenAI)
    kwargs = {"model": request["model"], "messages": request["messages"]}
    parsed = client.chat.completions.parse(**kwargs)
    assert parsed.choices[0].message.content == "".join(ANSWER)
    assert_projected(received, request, "openai")
    with client.chat.completions.stream(**kwargs) as stream:
        assert stream.get_final_completion().choices[0].message.content == "".join(ANSWER)
    assert_projected(received, request, "openai")
    with client.chat.completions.with_streaming_response.create(**kwargs) as response:
        assert response.parse().choices[0].message.content == "".join(ANSWER)
    assert_projected(received, request, "openai")


def test_openai_responses_parse(model):
    url, received = model
    chat = recorded("order.openai.json")
    items = responses_input(chat)
    expected = staleguard.project({"model": chat["model"], "input": items}, format="responses")["input"]
    client = staleguard.wrap(openai_clients(url)[0])
    assert client.responses.parse(model=chat["model"], input=items).output_text == "".join(ANSWER)
    assert [body["input"] for _, body in received] == [expected]


def test_with_options_copies_stay_wrapped(model):
    url, received = model
    request = recorded("order.anthropic.json")
    client = staleguard.wrap(anthropic_clients(url)[0]).with_options(timeout=30)
    client.messages.create(model=request["model"], max_tokens=10, messages=request["messages"])
    assert_projected(received, request, "anthropic")


def test_compaction_off_makes_a_plain_client(model, monkeypatch):
    url, received = model
    request = recorded("order.openai.json")
    plain = openai_clients(url)[0]
    wrapped = staleguard.wrap(plain)
    monkeypatch.setenv("BROWSER_HISTORY_COMPACTION", "off")
    assert staleguard.wrap(plain) is plain
    wrapped.chat.completions.create(model=request["model"], messages=request["messages"])
    (_, sent), = received
    assert sent["messages"] == request["messages"], "sent as it is, for A/B runs"
