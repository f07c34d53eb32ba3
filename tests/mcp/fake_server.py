#!/usr/bin/env python3
"""A fake browser MCP server for the guard's fault tests and its soak (standard library only).

It speaks newline-delimited JSON-RPC on standard input and output like Playwright MCP
0.0.41 (inline snapshots, ref numbers reused on every page) or, with --file-linked, like
0.0.69 and later (snapshots linked to a file; browser_snapshot still answers inline), and
is told per call to misbehave:

  browser_navigate {url, buttons?, filler?, linked?, snapshot_delay_ms?, digest?}
                                             a new page of `buttons` buttons (default 3),
                                             each name padded by `filler` words; `linked`
                                             overrides --file-linked; browser_snapshot
                                             answers after `snapshot_delay_ms` from then
                                             on; `digest` adds the text's SHA-256 to _meta
  browser_snapshot                           the current page, inline
  browser_click {ref | target}               a ref of the current page opens a new page
  browser_take_screenshot {bytes?}           an image part of `bytes` of base64 (_meta as
                                             for fake_huge)
  fake_crash {code? | signal?}               dies without answering (default: exit 3)
  fake_exit_later {ms, code? | signal?}      answers, then exits after `ms` (or kills
                                             itself with `signal`)
  fake_close_stdout                          closes its standard output and keeps reading
  fake_garbage {lines?, hex?, split?}        writes the raw `lines` (and bytes from `hex`)
                                             to its standard output, then answers;
                                             `split` writes the answer in two pieces
  fake_hold                                  not answered until fake_release
  fake_release                               answers the held calls last-first, a
                                             notification before each, then itself
  fake_sleep {ms}                            answered after `ms`, others meanwhile
  fake_huge {bytes, kind}                    a result of `bytes`: kind "text" (one text
                                             part), "image" (base64 PNG-like data) or
                                             "page" (a page of that size); its SHA-256
                                             and length are in the result's _meta
  fake_received                              the messages it was sent so far (JSON text)

Options:
  --start-delay SECS   sleep before reading anything (a slow start)
  --file-linked        link page snapshots to a file instead of showing them inline

Every line it is sent must be one JSON-RPC 2.0 message object: anything else (not JSON, a
batch, no "jsonrpc", an id of the wrong type) makes it exit 99 at once, as a fragile
server might, so a test sees what the guard let through.
"""

import base64
import hashlib
import json
import os
import signal
import sys
import threading
import time

OUT = sys.stdout.buffer
LOCK = threading.Lock()

state = {
    "url": None,
    "doc": 0,
    "buttons": 3,
    "filler": 0,
    "linked": False,
    "snapshot_delay": 0.0,
    "received": [],
    "held": [],
    "cancelled": set(),
}


def write_raw(data):
    with LOCK:
        OUT.write(data)
        OUT.flush()


def send(message):
    write_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def answer(request_id, result):
    if request_id in state["cancelled"]:
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text_result(text, is_error=False, meta=None):
    result = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    if meta:
        result["_meta"] = meta
    return result


def die(why):
    sys.stderr.write("fake server: %s\n" % why)
    sys.stderr.flush()
    os._exit(99)


def valid(message):
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "id" in message:
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return False
    if "method" in message:
        return isinstance(message["method"], str)
    return "result" in message or "error" in message


def tree(doc, buttons, filler):
    pad = (" " + "lorem ipsum " * filler) if filler else ""
    lines = ['- heading "Page %d" [level=1]' % doc]
    for i in range(1, buttons + 1):
        lines.append('- button "Button %d of page %d%s" [ref=e%d]' % (i, doc, pad, i))
    return "\n".join(lines)


def page_text(inline=None):
    url, doc = state["url"], state["doc"]
    if inline is None:
        inline = not state["linked"]
    if not inline:
        return (
            "### Page\n- Page URL: %s\n- Page Title: Page %d\n### Snapshot\n"
            "- [Snapshot](.playwright-mcp/page-%d.yml)" % (url, doc, doc)
        )
    return (
        "### Page state\n- Page URL: %s\n- Page Title: Page %d\n- Page Snapshot:\n```yaml\n%s\n```"
        % (url, doc, tree(doc, state["buttons"], state["filler"]))
    )


def open_page(url, buttons=None, filler=None):
    state["url"] = url
    state["doc"] += 1
    if buttons is not None:
        state["buttons"] = buttons
    if filler is not None:
        state["filler"] = filler


TOOLS = [
    {"name": "browser_navigate", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}},
    {"name": "browser_snapshot", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "browser_click", "inputSchema": {"type": "object", "properties": {"ref": {"type": "string"}, "element": {"type": "string"}}}},
    {"name": "browser_take_screenshot", "inputSchema": {"type": "object", "properties": {}}},
] + [
    {"name": name, "inputSchema": {"type": "object", "properties": {}}}
    for name in [
        "fake_crash",
        "fake_exit_later",
        "fake_garbage",
        "fake_hold",
        "fake_release",
        "fake_sleep",
        "fake_huge",
        "fake_received",
    ]
]


def image(size):
    raw = bytes((i * 7 + 3) & 0xFF for i in range(256)) * (size * 3 // 4 // 256 + 1)
    data = base64.b64encode(raw)[:size].decode()
    data = data[: len(data) - len(data) % 4]
    result = {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
    result["_meta"] = {"sha256": hashlib.sha256(data.encode()).hexdigest(), "length": len(data)}
    return result


def huge(request_id, arguments):
    size = int(arguments.get("bytes", 1 << 20))
    kind = arguments.get("kind", "text")
    if kind == "image":
        answer(request_id, image(size))
        return
    else:
        if kind == "page":
            line_size = len(tree(1, 1, 8).split("\n")[1]) + 1
            open_page("http://fake.test/huge", buttons=max(1, size // line_size), filler=8)
            text = page_text(inline=True)
        else:
            unit = "staleguard fake result: the quick brown fox jumps over the lazy dog \u00e9\u6f22\n"
            text = (unit * (size // len(unit.encode()) + 1))[:size]
        result = text_result(text)
        digest, length = hashlib.sha256(text.encode()).hexdigest(), len(text.encode())
    result["_meta"] = {"sha256": digest, "length": length}
    answer(request_id, result)


def call(request_id, name, arguments):
    if name == "browser_navigate":
        open_page(arguments.get("url", "about:blank"), arguments.get("buttons"), arguments.get("filler"))
        if "linked" in arguments:
            state["linked"] = bool(arguments["linked"])
        if "snapshot_delay_ms" in arguments:
            state["snapshot_delay"] = int(arguments["snapshot_delay_ms"]) / 1000
        text = "### Ran Playwright code\nawait page.goto('%s');\n\n%s" % (state["url"], page_text())
        meta = None
        if arguments.get("digest"):
            meta = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "length": len(text.encode())}
        answer(request_id, text_result(text, meta=meta))
    elif name == "browser_snapshot":
        result = text_result(page_text(inline=True))
        if state["snapshot_delay"] > 0:
            timer = threading.Timer(state["snapshot_delay"], answer, (request_id, result))
            timer.daemon = True
            timer.start()
        else:
            answer(request_id, result)
    elif name == "browser_take_screenshot":
        answer(request_id, image(int(arguments.get("bytes", 4096))))
    elif name == "browser_click":
        ref = arguments.get("ref") or arguments.get("target") or ""
        number = ref[1:] if ref.startswith("e") else ""
        if state["url"] is None or not number.isdigit() or not 1 <= int(number) <= state["buttons"]:
            answer(request_id, text_result("Error: Ref %s not found in the current page snapshot." % ref, is_error=True))
            return
        open_page("%s/after-%s" % (state["url"].split("/after-")[0], number))
        answer(request_id, text_result("### Ran Playwright code\nawait page.click();\n\n%s" % page_text()))
    elif name == "fake_crash":
        sys.stderr.write("fake server: crashing as told\n")
        sys.stderr.flush()
        if "signal" in arguments:
            os.kill(os.getpid(), int(arguments["signal"]))
            time.sleep(5)
        os._exit(int(arguments.get("code", 3)))
    elif name == "fake_exit_later":
        answer(request_id, text_result("exiting later"))
        code = int(arguments.get("code", 0))
        sig = arguments.get("signal")

        def end():
            if sig is not None:
                os.kill(os.getpid(), int(sig))
            os._exit(code)

        timer = threading.Timer(int(arguments.get("ms", 100)) / 1000, end)
        timer.daemon = True
        timer.start()
    elif name == "fake_garbage":
        for line in arguments.get("lines", []):
            write_raw(line.encode() + b"\n")
        if "hex" in arguments:
            write_raw(bytes.fromhex(arguments["hex"]) + b"\n")
        if arguments.get("split"):
            whole = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text_result("answered in pieces")}).encode()
            write_raw(whole[: len(whole) // 2])
            time.sleep(0.2)
            write_raw(whole[len(whole) // 2 :] + b"\n")
        else:
            answer(request_id, text_result("after the garbage"))
    elif name == "fake_close_stdout":
        # It goes on reading, so that it still ends when its input does.
        with LOCK:
            OUT.flush()
            os.close(1)
    elif name == "fake_hold":
        state["held"].append(request_id)
    elif name == "fake_release":
        for held in reversed(state["held"]):
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "releasing %s" % json.dumps(held)}})
            answer(held, text_result("held call %s" % json.dumps(held)))
        state["held"] = []
        answer(request_id, text_result("released"))
    elif name == "fake_sleep":
        timer = threading.Timer(int(arguments.get("ms", 100)) / 1000, answer, (request_id, text_result("slept")))
        timer.daemon = True
        timer.start()
    elif name == "fake_huge":
        huge(request_id, arguments)
    elif name == "fake_received":
        answer(request_id, text_result(json.dumps(state["received"])))
    else:
        answer(request_id, text_result("Tool %s not found" % name, is_error=True))


def handle(message):
    method = message.get("method")
    request_id = message.get("id")
    if method is None:
        return
    if method == "notifications/cancelled":
        cancelled = message.get("params", {}).get("requestId")
        if isinstance(cancelled, (str, int)):
            state["cancelled"].add(cancelled)
        return
    if request_id is None:
        return
    params = message.get("params") or {}
    if method == "initialize":
        answer(request_id, {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake-browser", "version": "1"},
            "_meta": {"pid": os.getpid()},
        })
    elif method == "tools/list":
        answer(request_id, {"tools": TOOLS})
    elif method == "ping":
        answer(request_id, {})
    elif method == "tools/call":
        call(request_id, params.get("name"), params.get("arguments") or {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})


def main():
    args = sys.argv[1:]
    if "--start-delay" in args:
        time.sleep(float(args[args.index("--start-delay") + 1]))
    state["linked"] = "--file-linked" in args
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            die("not JSON from the client: %r" % raw[:80])
        if not valid(message):
            die("not a JSON-RPC message from the client: %r" % raw[:80])
        state["received"].append({k: message[k] for k in ("id", "method") if k in message})
        if message.get("method") == "notifications/cancelled":
            state["received"][-1]["requestId"] = message.get("params", {}).get("requestId")
        handle(message)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
