#!/usr/bin/env python3
"""Real SDK clients for the proxy end-to-end tests (needs `pip install openai anthropic google-genai zstandard`).

One call, one JSON line on standard output; the exit status is 1 when the call failed:
    clients.py openai-chat            BASE_URL BODY_FILE [--stream] [--header K:V]... [--timeout S]
    clients.py openai-responses       BASE_URL BODY_FILE [--stream] ...
    clients.py anthropic-messages     BASE_URL BODY_FILE [--stream] ...
    clients.py anthropic-count-tokens BASE_URL BODY_FILE ...
    clients.py gemini-generate        BASE_URL BODY_FILE [--stream] ...   google-genai, with
                                      GOOGLE_GEMINI_BASE_URL=BASE_URL; BODY_FILE is a
                                      generateContent body with a "model" key
    clients.py raw METHOD URL [--body-file F] [--header K:V]... [--encoding gzip|zstd]
    clients.py metrics URL    GET a Prometheus text page and parse it with prometheus_client
Several calls in one process (importing the SDKs is slow), one JSON line per call, exit 0:
    clients.py batch FILE     FILE is a JSON list of {"cmd", "base_url" | "url", "body_file",
                              "stream", "include_usage", "headers", "method", "encoding", "timeout"}
Many concurrent streams through one AsyncOpenAI client; exit 1 unless every stream got its own echo:
    clients.py load BASE_URL N
A Responses (or Gemini) request built from a Chat Completions request:
    clients.py chat-to-responses IN_FILE OUT_FILE
    clients.py chat-to-gemini IN_FILE OUT_FILE      as Gemini CLI writes it

A call's line: {"ok", "status", "headers", "text", "events", "event_types", "first_event_s",
"total_s", "input_tokens", "usage", "error", "body"}; times in seconds from the start of the
call. "usage" lists the usage objects the SDK parsed, in the order they came (a JSON answer's
one; a stream's from every event that carries one), each with exactly the fields it was sent.
A metrics line: {"ok", "status", "content_type", "families": {name: {"type", "documentation",
"samples": [[sample name, labels, value]]}}, "error"}.
"""

import argparse
import asyncio
import base64
import http.client
import json
import sys
import time
import urllib.parse

OPENAI_KEY = "sk-test-secret"
ANTHROPIC_KEY = "sk-ant-test-secret"
GEMINI_KEY = "AIza-test-secret"
SHOWN_HEADERS = ("x-staleguard", "retry-after", "content-type", "x-request-id", "content-encoding")


def headers_of(response):
    if response is None:
        return {}
    return {k.lower(): v for k, v in response.headers.items() if k.lower() in SHOWN_HEADERS}


def openai_client(base_url, timeout):
    import openai
    return openai.OpenAI(base_url=base_url, api_key=OPENAI_KEY, max_retries=0, timeout=timeout)


def anthropic_client(base_url, timeout):
    import anthropic
    return anthropic.Anthropic(base_url=base_url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=timeout)


def pick(body, keys):
    return {k: body[k] for k in keys if k in body}


def sdk_call(cmd, base_url, body, stream, headers, timeout, include_usage=False):
    """Calls the SDK; returns (raw response, parsed result)."""
    extra = {"extra_headers": headers} if headers else {}
    if stream:
        extra["stream"] = True
    if include_usage:
        extra["stream_options"] = {"include_usage": True}
    if cmd == "openai-chat":
        api = openai_client(base_url, timeout).chat.completions.with_raw_response
        raw = api.create(**pick(body, ("model", "messages", "tools")), **extra)
    elif cmd == "openai-responses":
        api = openai_client(base_url, timeout).responses.with_raw_response
        raw = api.create(**pick(body, ("model", "input", "tools", "instructions")), **extra)
    elif cmd == "anthropic-messages":
        api = anthropic_client(base_url, timeout).messages.with_raw_response
        raw = api.create(**pick(body, ("model", "max_tokens", "system", "messages", "tools")), **extra)
    elif cmd == "anthropic-count-tokens":
        extra.pop("stream", None)
        api = anthropic_client(base_url, timeout).messages.with_raw_response
        raw = api.count_tokens(**pick(body, ("model", "system", "messages", "tools")), **extra)
    else:
        raise SystemExit(f"clients.py: unknown command {cmd}")
    return raw, raw.parse()


def delta_text(cmd, event):
    """The answer text an SSE event adds, and the event's type name."""
    if cmd == "openai-chat":
        choice = event.choices[0] if event.choices else None
        return (choice.delta.content or "") if choice and choice.delta else "", "chunk"
    kind = getattr(event, "type", type(event).__name__)
    if cmd == "openai-responses":
        return (event.delta if kind == "response.output_text.delta" else ""), kind
    if kind == "content_block_delta" and getattr(event.delta, "type", None) == "text_delta":
        return event.delta.text, kind
    return "", kind


def dumped(usage):
    """A parsed usage object with the fields the answer had, nested ones included."""
    return usage.model_dump(mode="json", exclude_unset=True)


def usage_of(cmd, event):
    """The usage object an SSE event carries, or None."""
    if cmd == "openai-chat":
        return getattr(event, "usage", None)
    kind = getattr(event, "type", None)
    if cmd == "openai-responses":
        response = getattr(event, "response", None)
        return getattr(response, "usage", None)
    if kind == "message_start":
        return event.message.usage
    if kind == "message_delta":
        return event.usage
    return None


def status_error_types():
    types = []
    for name in ("openai", "anthropic"):
        module = sys.modules.get(name)
        if module is not None:
            types.append((module.APIStatusError, module.APIConnectionError))
    return types


def run_sdk(cmd, base_url, body_file, stream=False, headers=None, timeout=30.0, include_usage=False):
    with open(body_file, encoding="utf-8") as f:
        body = json.load(f)
    out = {"cmd": cmd, "ok": False, "status": None, "headers": {}, "text": None, "events": 0,
           "event_types": [], "first_event_s": None, "total_s": None, "usage": [], "error": None}
    # Import the SDK before the clock starts: importing takes seconds.
    __import__("openai" if cmd.startswith("openai") else "anthropic")
    start = time.monotonic()
    try:
        raw, parsed = sdk_call(cmd, base_url, body, stream, headers or {}, timeout, include_usage)
        out["status"] = raw.status_code
        out["headers"] = headers_of(raw)
        if stream:
            text = []
            try:
                for event in parsed:
                    if out["first_event_s"] is None:
                        out["first_event_s"] = time.monotonic() - start
                    out["events"] += 1
                    piece, kind = delta_text(cmd, event)
                    text.append(piece)
                    out["event_types"].append(kind)
                    usage = usage_of(cmd, event)
                    if usage is not None:
                        out["usage"].append(dumped(usage))
            except Exception as e:  # a stream that ends early: the events so far, and why
                out["error"] = f"{type(e).__name__}: {e}"
            out["text"] = "".join(text)
        elif cmd == "openai-chat":
            out["text"] = parsed.choices[0].message.content
        elif cmd == "openai-responses":
            out["text"] = parsed.output_text
        elif cmd == "anthropic-messages":
            out["text"] = "".join(b.text for b in parsed.content if getattr(b, "type", None) == "text")
        else:
            out["input_tokens"] = parsed.input_tokens
        if not stream and getattr(parsed, "usage", None) is not None:
            out["usage"].append(dumped(parsed.usage))
        out["ok"] = out["error"] is None
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        response = getattr(e, "response", None)
        status = getattr(e, "status_code", None)
        if status is not None:
            out["status"] = status
            out["headers"] = headers_of(response)
            try:
                out["body"] = response.text
            except Exception:
                out["body"] = None
    out["total_s"] = time.monotonic() - start
    return out


def run_gemini(base_url, body_file, stream=False, headers=None, timeout=30.0):
    """generate_content or generate_content_stream of google-genai, pointed at BASE_URL the way
    the README says: GOOGLE_GEMINI_BASE_URL."""
    import os
    from google import genai
    from google.genai import types
    with open(body_file, encoding="utf-8") as f:
        body = json.load(f)
    out = {"cmd": "gemini-generate", "ok": False, "status": None, "headers": {}, "text": None, "events": 0,
           "event_types": [], "first_event_s": None, "total_s": None, "usage": [], "error": None}
    os.environ["GOOGLE_GEMINI_BASE_URL"] = base_url
    client = genai.Client(api_key=GEMINI_KEY, http_options=types.HttpOptions(
        headers=headers or None, timeout=int(timeout * 1000)))
    config = types.GenerateContentConfig(system_instruction=body.get("systemInstruction"),
                                         tools=body.get("tools"))
    call = {"model": body["model"], "contents": body["contents"], "config": config}

    def took(response):
        if response.sdk_http_response is not None and out["status"] is None:
            out["status"] = 200
            out["headers"] = {k.lower(): v for k, v in (response.sdk_http_response.headers or {}).items()
                              if k.lower() in SHOWN_HEADERS}
        if response.usage_metadata is not None:
            out["usage"].append(response.usage_metadata.model_dump(mode="json", by_alias=True, exclude_none=True))
        return response.text or ""

    start = time.monotonic()
    try:
        if stream:
            text = []
            for chunk in client.models.generate_content_stream(**call):
                if out["first_event_s"] is None:
                    out["first_event_s"] = time.monotonic() - start
                out["events"] += 1
                out["event_types"].append("chunk")
                text.append(took(chunk))
            out["text"] = "".join(text)
        else:
            out["text"] = took(client.models.generate_content(**call))
        out["ok"] = True
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        out["status"] = getattr(e, "code", None)
    out["total_s"] = time.monotonic() - start
    return out


def run_raw(method, url, body_file=None, headers=None, encoding=None, timeout=30.0):
    """One plain HTTP/1.1 request with http.client; the body is sent as it is in the file."""
    body = None
    if body_file:
        with open(body_file, "rb") as f:
            body = f.read()
    headers = dict(headers or {})
    if body is not None and encoding == "gzip":
        import gzip
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    elif body is not None and encoding == "zstd":
        import zstandard
        body = zstandard.ZstdCompressor().compress(body)
        headers["Content-Encoding"] = "zstd"
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
    parts = urllib.parse.urlsplit(url)
    target = parts.path + ("?" + parts.query if parts.query else "")
    out = {"cmd": "raw", "ok": False, "status": None, "headers": {}, "body": None, "body_b64": None, "error": None}
    start = time.monotonic()
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        conn.request(method, target, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        out["status"] = response.status
        out["headers"] = {k.lower(): v for k, v in response.getheaders()}
        out["body"] = data.decode("utf-8", errors="replace")
        out["body_b64"] = base64.b64encode(data).decode()
        out["ok"] = True
        conn.close()
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    out["total_s"] = time.monotonic() - start
    return out


def run_metrics(url, timeout=30.0):
    """GETs a metrics page and parses it as the Prometheus text format; a page that does not
    parse is an error."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {"cmd": "metrics", "ok": False, "status": None, "content_type": None, "families": {},
           "error": None}
    fetched = run_raw("GET", url, timeout=timeout)
    out["status"] = fetched["status"]
    out["content_type"] = fetched["headers"].get("content-type")
    if fetched["error"]:
        out["error"] = fetched["error"]
        return out
    try:
        for family in text_string_to_metric_families(fetched["body"]):
            out["families"][family.name] = {
                "type": family.type,
                "documentation": family.documentation,
                "samples": [[s.name, s.labels, s.value] for s in family.samples],
            }
        out["ok"] = True
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        out["body"] = fetched["body"]
    return out


def run_entry(entry):
    if entry["cmd"] == "metrics":
        return run_metrics(entry["url"], entry.get("timeout", 30.0))
    if entry["cmd"] == "gemini-generate":
        return run_gemini(entry["base_url"], entry["body_file"], entry.get("stream", False),
                          entry.get("headers"), entry.get("timeout", 30.0))
    if entry["cmd"] == "raw":
        return run_raw(entry.get("method", "POST"), entry["url"], entry.get("body_file"),
                       entry.get("headers"), entry.get("encoding"), entry.get("timeout", 30.0))
    return run_sdk(entry["cmd"], entry["base_url"], entry["body_file"], entry.get("stream", False),
                   entry.get("headers"), entry.get("timeout", 30.0), entry.get("include_usage", False))


async def load(base_url, n):
    import openai
    client = openai.AsyncOpenAI(base_url=base_url, api_key=OPENAI_KEY, max_retries=0, timeout=60.0)

    async def one(i):
        stream = await client.chat.completions.create(
            model="gpt-scripted", messages=[{"role": "user", "content": f"load-{i}"}], stream=True)
        text, events = [], 0
        async for chunk in stream:
            events += 1
            if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
        return "".join(text), events

    start = time.monotonic()
    results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    elapsed = time.monotonic() - start
    bad = []
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            bad.append({"i": i, "error": f"{type(result).__name__}: {result}"})
        elif not result[0].startswith(f"echo: load-{i} (request "):
            bad.append({"i": i, "text": result[0], "events": result[1]})
    await client.close()
    return {"n": n, "ok": n - len(bad), "bad": bad[:10], "bad_count": len(bad), "elapsed_s": elapsed}


def chat_to_responses(chat):
    """The same conversation as Responses input items: message, function_call, function_call_output."""
    items = []
    for m in chat.get("messages", []):
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        if m.get("content"):
            items.append({"type": "message", "role": role, "content": m["content"]})
        for call in m.get("tool_calls") or []:
            fn = call["function"]
            items.append({"type": "function_call", "call_id": call["id"], "name": fn["name"],
                          "arguments": fn["arguments"]})
    tools = []
    for tool in chat.get("tools", []):
        fn = tool["function"]
        tools.append({"type": "function", "name": fn["name"], "description": fn.get("description", ""),
                      "parameters": fn.get("parameters", {}), "strict": False})
    return {"model": chat.get("model", "gpt-4.1"), "input": items, "tools": tools}


def chat_to_gemini(chat):
    """The same conversation as Gemini CLI sends it: systemInstruction, model turns of functionCall
    parts without ids, and the results of a turn in one user content of functionResponse parts
    with the CLI's own ids and {"output": text}, the MCP text wrapped as the CLI wraps it."""
    contents, names, system = [], {}, None
    for m in chat.get("messages", []):
        role, content = m.get("role"), m.get("content")
        text = content if isinstance(content, str) else ""
        if role == "system":
            system = {"parts": [{"text": text}]}
        elif role == "user":
            contents.append({"role": "user", "parts": [{"text": text}]})
        elif role == "assistant":
            parts = [{"text": text}] if text else []
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                names[call["id"]] = fn["name"]
                parts.append({"functionCall": {"name": fn["name"], "args": json.loads(fn["arguments"] or "{}")}})
            contents.append({"role": "model", "parts": parts})
        elif role == "tool":
            name = names.get(m["tool_call_id"], "")
            untrusted = content.replace("</untrusted_context>", "&lt;/untrusted_context&gt;")
            output = f"<untrusted_context>\n{untrusted}\n</untrusted_context>"
            part = {"functionResponse": {"id": f"{name}-1764550000-{m['tool_call_id']}", "name": name,
                                         "response": {"output": output}}}
            last = contents[-1] if contents else None
            if last and last["role"] == "user" and "functionResponse" in last["parts"][0]:
                last["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
    declarations = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                     "parametersJsonSchema": t["function"].get("parameters", {"type": "object"})}
                    for t in chat.get("tools", [])]
    body = {"model": "gemini-2.5-flash", "contents": contents, "tools": [{"functionDeclarations": declarations}]}
    if system:
        body["systemInstruction"] = system
    return body


def header_pairs(values):
    headers = {}
    for value in values or []:
        name, _, v = value.partition(":")
        headers[name.strip()] = v.strip()
    return headers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd in ("openai-chat", "openai-responses", "anthropic-messages", "anthropic-count-tokens",
                "gemini-generate"):
        p = sub.add_parser(cmd)
        p.add_argument("base_url")
        p.add_argument("body_file")
        p.add_argument("--stream", action="store_true")
        p.add_argument("--header", action="append")
        p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("raw")
    p.add_argument("method")
    p.add_argument("url")
    p.add_argument("--body-file")
    p.add_argument("--header", action="append")
    p.add_argument("--encoding", choices=("gzip", "zstd"))
    p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("metrics")
    p.add_argument("url")
    p = sub.add_parser("batch")
    p.add_argument("file")
    p = sub.add_parser("load")
    p.add_argument("base_url")
    p.add_argument("n", type=int)
    for cmd in ("chat-to-responses", "chat-to-gemini"):
        p = sub.add_parser(cmd)
        p.add_argument("input")
        p.add_argument("output")
    args = parser.parse_args()

    if args.cmd == "batch":
        with open(args.file, encoding="utf-8") as f:
            entries = json.load(f)
        for entry in entries:
            print(json.dumps(run_entry(entry)), flush=True)
        return 0
    if args.cmd == "load":
        result = asyncio.run(load(args.base_url, args.n))
        print(json.dumps(result), flush=True)
        return 0 if result["ok"] == args.n else 1
    if args.cmd in ("chat-to-responses", "chat-to-gemini"):
        convert = chat_to_responses if args.cmd == "chat-to-responses" else chat_to_gemini
        with open(args.input, encoding="utf-8") as f:
            chat = json.load(f)
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(convert(chat), f)
        return 0
    if args.cmd == "metrics":
        out = run_metrics(args.url)
    elif args.cmd == "raw":
        out = run_raw(args.method, args.url, args.body_file, header_pairs(args.header), args.encoding, args.timeout)
    else:
        out = run_entry({"cmd": args.cmd, "base_url": args.base_url, "body_file": args.body_file,
                         "stream": args.stream, "headers": header_pairs(args.header), "timeout": args.timeout})
    print(json.dumps(out), flush=True)
    if not out["ok"]:
        print(f"clients.py: {args.cmd} failed: status {out['status']}: {out['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
