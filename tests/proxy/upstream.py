#!/usr/bin/env python3
"""A scripted model standing in for the OpenAI, Anthropic and Gemini APIs (standard library only).

    python3 tests/proxy/upstream.py [PORT]

PORT 0 (the default) picks a free port. The first line on standard output is the port.

It records every request (method, path with query, headers, raw body) and serves:
  GET  /_requests                 JSON list of the recorded requests (body as UTF-8 text and as base64)
  POST /_reset                    forget the recorded requests
  POST /v1/chat/completions       OpenAI Chat Completions, JSON or SSE when the body has "stream": true
  POST /v1/responses              OpenAI Responses, JSON or SSE
  POST /v1/messages               Anthropic Messages, JSON or SSE
  POST /v1/messages/count_tokens  {"input_tokens": N}
  POST .../models/M:generateContent        Gemini, JSON (under /v1internal: wrapped as Code Assist answers)
  POST .../models/M:streamGenerateContent  Gemini, SSE with ?alt=sse, else one JSON array sent
                                           answer by answer (Gemini's default stream)
  GET  /v1/models                 an OpenAI model list
Anything else gets a 404 JSON error. The paths are matched by suffix, so a route prefix works too.

The answer text is `echo: <last user text> (request <n>)`, so every caller can tell its own answer.

Request headers that script the answer:
  x-scripted-fault: 500 | 429 | reset | slow
      500   JSON error body in the provider's shape
      429   JSON error body with `retry-after: 7`
      reset send the headers and one SSE event, then close the socket abruptly (TCP RST)
      slow  sleep x-scripted-slow-secs (default 5) before answering normally
  x-scripted-pause-ms: pause between SSE events (default 300)
  x-scripted-encoding: gzip | zstd   compress the answer (an SSE stream event by event, flushed)

Every answer carries the `usage` the provider would send, cache fields included: the prompt is
counted as one token per 4 request bytes; OpenAI reports the part of it read from its cache
(in 128-token steps, from 1,024 tokens on), Anthropic the parts read from and written to it.
Chat Completions streams carry usage in a last chunk only with `stream_options.include_usage`,
and then `"usage": null` on every other chunk. Gemini reports `usageMetadata` on every chunk,
its cached tokens (`cachedContentTokenCount`) counted as OpenAI's are. Each record says what was sent: `usage_sent`
(the usage objects in the order they went out) and `billed` (`cache_read`, `cache_write` and
`uncached` input tokens).
"""

import base64
import gzip
import json
import socket
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RECORDS = []
COUNTER = [0]


def next_number():
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def text_of(content):
    """The plain text of a message content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts) if parts else None
    return None


def last_user_text(body):
    """The newest user text of a Chat, Messages, Responses or Gemini body, or None."""
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("contents"), list):
        return gemini_user_text(body["contents"])
    items = body.get("messages")
    if not isinstance(items, list):
        items = body.get("input")
        if isinstance(items, str):
            return items
        if not isinstance(items, list):
            return None
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            text = text_of(item.get("content"))
            if text:
                return text
    return None


def gemini_user_text(contents):
    """The newest text a user content of a Gemini body holds (function responses are not text)."""
    for content in reversed(contents):
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        texts = [p["text"] for p in content.get("parts") or []
                 if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return None


def echo_text(body, number):
    marker = last_user_text(body)
    if marker is None:
        marker = "-"
    marker = " ".join(marker.split())[:80]
    return f"echo: {marker} (request {number})"


def split_text(text, pieces=3):
    """The answer in a few deltas, so a stream has several content events."""
    words = text.split(" ")
    size = max(1, -(-len(words) // pieces))
    chunks = [" ".join(words[i:i + size]) for i in range(0, len(words), size)]
    return [c if i == 0 else " " + c for i, c in enumerate(chunks)]


# ---------------------------------------------------------------- usage

class Bill:
    """The prompt of one request as a provider bills it, and the usage objects sent for it."""

    def __init__(self, request_bytes, text):
        self.prompt = max(1, request_bytes // 4)
        self.output = len(text.split())
        self.sent = []

    def openai_cached(self):
        return (self.prompt * 3 // 4) // 128 * 128 if self.prompt >= 1024 else 0

    def anthropic_split(self):
        read = self.prompt * 3 // 5
        written = self.prompt // 5
        return read, written, self.prompt - read - written

    def billed(self, provider):
        if provider == "anthropic":
            read, written, uncached = self.anthropic_split()
            return {"cache_read": read, "cache_write": written, "uncached": uncached}
        cached = self.openai_cached()
        return {"cache_read": cached, "cache_write": 0, "uncached": self.prompt - cached}

    def send(self, usage):
        self.sent.append(usage)
        return usage

    def chat(self):
        return self.send({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.output,
            "total_tokens": self.prompt + self.output,
            "prompt_tokens_details": {"cached_tokens": self.openai_cached(), "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        })

    def responses(self):
        return self.send({
            "input_tokens": self.prompt,
            "input_tokens_details": {"cached_tokens": self.openai_cached()},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt + self.output,
        })

    def messages(self, output_tokens=None):
        read, written, uncached = self.anthropic_split()
        return self.send({
            "input_tokens": uncached,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
            "output_tokens": self.output if output_tokens is None else output_tokens,
            "service_tier": "standard",
        })

    def gemini(self, candidates):
        usage = {"promptTokenCount": self.prompt, "candidatesTokenCount": candidates,
                 "totalTokenCount": self.prompt + candidates,
                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": self.prompt}]}
        if self.openai_cached():
            usage["cachedContentTokenCount"] = self.openai_cached()
        return self.send(usage)

    def message_delta(self):
        # Counts in message_delta are cumulative; the input ones repeat message_start's.
        read, written, uncached = self.anthropic_split()
        return self.send({
            "input_tokens": uncached,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": self.output,
        })


# ---------------------------------------------------------------- OpenAI Chat Completions

def chat_json(body, number, text, bill):
    model = body.get("model", "gpt-scripted") if isinstance(body, dict) else "gpt-scripted"
    return {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": bill.chat(),
    }


def chat_events(body, number, text, bill):
    model = body.get("model", "gpt-scripted") if isinstance(body, dict) else "gpt-scripted"
    options = body.get("stream_options") if isinstance(body, dict) else None
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def chunk(delta, finish=None, choices=True):
        data = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
        }
        if include_usage:
            data["usage"] = None
        return data

    yield None, chunk({"role": "assistant", "content": ""})
    for piece in split_text(text):
        yield None, chunk({"content": piece})
    yield None, chunk({}, "stop")
    if include_usage:
        last = chunk({}, choices=False)
        last["usage"] = bill.chat()
        yield None, last
    yield None, "[DONE]"


# ---------------------------------------------------------------- OpenAI Responses

def responses_json(body, number, text, bill=None, status="completed"):
    model = body.get("model", "gpt-scripted") if isinstance(body, dict) else "gpt-scripted"
    output = []
    if text is not None:
        output.append({
            "type": "message",
            "id": f"msg_scripted_{number}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    return {
        "id": f"resp_scripted_{number}",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": bill.responses() if bill is not None else None,
    }


def responses_events(body, number, text, bill):
    seq = [0]

    def event(kind, **fields):
        data = {"type": kind, "sequence_number": seq[0], **fields}
        seq[0] += 1
        return kind, data

    item_id = f"msg_scripted_{number}"
    pending = responses_json(body, number, None, status="in_progress")
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    item = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
    yield event("response.output_item.added", output_index=0, item=item)
    yield event("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
                part={"type": "output_text", "text": "", "annotations": []})
    for piece in split_text(text):
        yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0,
                    delta=piece, logprobs=[])
    yield event("response.output_text.done", item_id=item_id, output_index=0, content_index=0,
                text=text, logprobs=[])
    part = {"type": "output_text", "text": text, "annotations": []}
    yield event("response.content_part.done", item_id=item_id, output_index=0, content_index=0, part=part)
    done = dict(item, status="completed", content=[part])
    yield event("response.output_item.done", output_index=0, item=done)
    yield event("response.completed", response=responses_json(body, number, text, bill))


# ---------------------------------------------------------------- Anthropic Messages

def messages_json(body, number, text, bill):
    model = body.get("model", "claude-scripted") if isinstance(body, dict) else "claude-scripted"
    return {
        "id": f"msg_scripted_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": bill.messages(),
    }


def messages_events(body, number, text, bill):
    model = body.get("model", "claude-scripted") if isinstance(body, dict) else "claude-scripted"
    start = {
        "id": f"msg_scripted_{number}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": bill.messages(output_tokens=1),
    }
    yield "message_start", {"type": "message_start", "message": start}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    for piece in split_text(text):
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": piece}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": bill.message_delta()}
    yield "message_stop", {"type": "message_stop"}


# ---------------------------------------------------------------- Gemini generateContent

def gemini_answer(number, text, usage, finish=True):
    candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": usage,
            "modelVersion": "gemini-scripted", "responseId": f"scripted-{number}"}


def gemini_json(body, number, text, bill):
    return gemini_answer(number, text, bill.gemini(bill.output))


def gemini_events(body, number, text, bill):
    pieces = split_text(text)
    done = 0
    for i, piece in enumerate(pieces):
        done += len(piece.split())
        last = i == len(pieces) - 1
        yield None, gemini_answer(number, piece, bill.gemini(done), finish=last)


# ---------------------------------------------------------------- errors

def error_body(provider, status, message):
    if provider == "gemini":
        code = {429: "RESOURCE_EXHAUSTED", 404: "NOT_FOUND"}.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message, "status": code}}
    if provider == "anthropic":
        kind = {429: "rate_limit_error", 404: "not_found_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = {429: "rate_limit_exceeded", 404: "not_found"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


ENDPOINTS = [
    # (path suffix, provider, json answer, SSE events)
    ("/messages/count_tokens", "anthropic", None, None),
    ("/chat/completions", "openai", chat_json, chat_events),
    ("/responses", "openai", responses_json, responses_events),
    ("/messages", "anthropic", messages_json, messages_events),
    (":generateContent", "gemini", gemini_json, gemini_events),
    (":streamGenerateContent", "gemini", gemini_json, gemini_events),
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-model/1"

    def log_message(self, fmt, *args):  # quiet: the test reads stdout
        pass

    # ------------------------------------------------------------ plumbing

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, status, obj, extra_headers=(), encoding=None):
        data = json.dumps(obj).encode()
        if encoding:
            data = Compressor(encoding).whole(data)
            extra_headers = list(extra_headers) + [("Content-Encoding", encoding)]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_scripted_{COUNTER[0]}")
        for name, value in extra_headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_stream(self, encoding=None):
        self.send_response(200)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_scripted_{COUNTER[0]}")
        self.end_headers()
        self.wfile.flush()

    def send_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    @staticmethod
    def sse(name, data, end="\n"):
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}{end}" if name else ""
        return f"{head}data: {payload}{end}{end}".encode()

    def gemini_stream(self, events, pause, sse):
        """Gemini's stream: SSE events ending in CRLF CRLF, or the answers as one JSON array,
        each element sent as it is made."""
        if sse:
            self.start_stream()
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        for i, (_, data) in enumerate(events):
            if i > 0:
                time.sleep(pause)
            if sse:
                self.send_chunk(self.sse(None, data, end="\r\n"))
            else:
                self.send_chunk((("[" if i == 0 else "\r\n,") + json.dumps(data)).encode())
        if not sse:
            self.send_chunk(b"]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def reset_connection(self):
        """Close the socket so that the peer gets a TCP RST, not a clean end."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        for f in (self.rfile, self.wfile):
            try:
                f.close()
            except OSError:
                pass
        self.connection.close()
        self.close_connection = True

    # ------------------------------------------------------------ requests

    def record(self, body):
        rec = {
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("utf-8", errors="replace"),
            "body_b64": base64.b64encode(body).decode(),
        }
        with LOCK:
            RECORDS.append(rec)
        return rec

    def do_GET(self):
        self.handle_any(b"")

    def do_POST(self):
        self.handle_any(self.read_body())

    def do_PUT(self):
        self.handle_any(self.read_body())

    def do_DELETE(self):
        self.handle_any(self.read_body())

    def handle_any(self, body):
        try:
            self.dispatch(body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def dispatch(self, body):
        path = self.path.split("?", 1)[0]
        if path == "/_requests" and self.command == "GET":
            with LOCK:
                records = list(RECORDS)
            return self.send_json(200, records)
        if path == "/_reset" and self.command == "POST":
            with LOCK:
                RECORDS.clear()
            return self.send_json(200, {"ok": True})

        rec = self.record(body)
        number = next_number()
        fault = (self.headers.get("x-scripted-fault") or "").strip().lower()
        pause = int(self.headers.get("x-scripted-pause-ms") or 300) / 1000.0

        if path.endswith("/models") and self.command == "GET":
            return self.send_json(200, {"object": "list", "data": [
                {"id": "gpt-scripted", "object": "model", "created": 1700000000, "owned_by": "scripted"},
                {"id": "claude-scripted", "object": "model", "created": 1700000000, "owned_by": "scripted"},
            ]}, [("x-scripted-path", self.path)])

        endpoint = next((e for e in ENDPOINTS if path.endswith(e[0])), None)
        if endpoint is None or self.command != "POST":
            return self.send_json(404, error_body("openai", 404, f"no route for {self.command} {self.path}"))
        suffix, provider, answer, events = endpoint

        if fault == "500":
            return self.send_json(500, error_body(provider, 500, "scripted internal error"))
        if fault == "429":
            return self.send_json(429, error_body(provider, 429, "scripted rate limit"), [("retry-after", "7")])
        if fault == "slow":
            time.sleep(float(self.headers.get("x-scripted-slow-secs") or 5))

        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if suffix == "/messages/count_tokens":
            return self.send_json(200, {"input_tokens": max(1, len(body) // 4)})

        text = echo_text(parsed, number)
        bill = Bill(len(body), text)
        with LOCK:
            rec["usage_sent"] = bill.sent
            rec["billed"] = bill.billed(provider)
        encoding = (self.headers.get("x-scripted-encoding") or "").strip().lower() or None
        request = parsed if isinstance(parsed, dict) else {}
        # Gemini Code Assist (/v1internal:...) wraps each answer: {"response": ..., "traceId"}.
        code_assist = path.endswith(("/v1internal:generateContent", "/v1internal:streamGenerateContent"))
        wrap = (lambda a: {"response": a, "traceId": f"trace-{number}"}) if code_assist else (lambda a: a)
        if suffix == ":streamGenerateContent":
            sse = "alt=sse" in (self.path.split("?", 1) + [""])[1].split("&")
            wrapped = ((name, wrap(data)) for name, data in events(request, number, text, bill))
            return self.gemini_stream(wrapped, pause, sse)
        stream = request.get("stream") is True
        if not stream and fault != "reset":
            return self.send_json(200, wrap(answer(request, number, text, bill)), encoding=encoding)

        self.start_stream(encoding)
        compressor = Compressor(encoding) if encoding else None
        for i, (name, data) in enumerate(events(request, number, text, bill)):
            if i > 0:
                time.sleep(pause)
            event = self.sse(name, data)
            self.send_chunk(compressor.flushed(event) if compressor else event)
            if fault == "reset":
                time.sleep(0.05)
                return self.reset_connection()
        tail = compressor.end() if compressor else b""
        if tail:
            self.send_chunk(tail)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Compressor:
    """gzip or zstd for a whole answer, or for a stream flushed event by event."""

    def __init__(self, encoding):
        if encoding == "gzip":
            self.z = zlib.compressobj(6, zlib.DEFLATED, 31)
        elif encoding == "zstd":
            import zstandard
            self.z = zstandard.ZstdCompressor().compressobj()
        else:
            raise ValueError(f"x-scripted-encoding {encoding!r} is not gzip or zstd")
        self.encoding = encoding

    def whole(self, data):
        return gzip.compress(data) if self.encoding == "gzip" else self.flushed(data) + self.end()

    def flushed(self, data):
        if self.encoding == "gzip":
            return self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)
        import zstandard
        return self.z.compress(data) + self.z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)

    def end(self):
        return self.z.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        # A client that went away (or a connection this script reset itself) is part of the script.
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return
        super().handle_error(request, client_address)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = Server(("127.0.0.1", port), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
