#!/usr/bin/env python3
"""A scripted Gemini model for the Gemini CLI end-to-end test (standard library only).

    python3 tests/agents/gemini_model.py SITE_BASE
    python3 tests/agents/gemini_model.py --readback SITE_BASE

It listens on a port of 127.0.0.1 and prints it on the first line of standard output. It
answers `POST .../models/M:generateContent` (JSON) and `:streamGenerateContent` (SSE with
`?alt=sse`, else one JSON array) as the Gemini API does, `usageMetadata` included, and records
every request it receives as model.py does (the test puts model.py's recording relay in front
of the proxy; the relay's `x-e2e-seq` header pairs what the agent sent with what the model
got):

  GET /_requests   JSON list of the recorded requests (method, path, headers, body as text)

The model acts as a real one would: it reads the newest function response it was sent (and
the newest page snapshot in the history) and decides the next call from them, never by
counting requests, since Gemini CLI sends side requests of its own. The script is the order
flow of the shared site, with Chrome DevTools MCP 1.11 tools behind an MCP server named in
the tool names (`mcp_browser_click`): list_pages, navigate to the form, take_snapshot, fill
the form, Review order, take_snapshot, Place order, then the OLD "Place order" uid again right
after the click that navigated (which staleguard mcp must refuse), take_snapshot, and a final
text answer that quotes the page. Requests that want JSON (`responseMimeType:
application/json`, Gemini CLI's routing and next-speaker checks) get an object built from
their schema; requests without tools get a short text.

With --readback the model drives Playwright MCP 0.0.69 on instead (`mcp_<server>_browser_*`),
whose action results only link their snapshot (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`):
whenever the newest page result links a file it has not read, it calls Gemini CLI's own
`read_file` (the path key taken from the tool's declared parameters) with the file's absolute
path, the link resolved against the first of the `Workspace Directories` Gemini CLI names, and
picks refs from what it read. The flow: navigate to the form, read, type the name and the
quantity, choose Blue, click "Review order", read, click "Place order", read, click the OLD
"Place order" again with the same arguments (which staleguard mcp must refuse), then
browser_snapshot and a final text answer that quotes the page. Without the flag nothing of this
applies.

Every answer opens with a thought part (`"thought": true`), as a thinking model's does with
`includeThoughts`, so the test sees what the agent sends back of it.
"""

import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RECORDS = []
SITE = ""

SNAPSHOT = "## Latest page snapshot"
REFUSED = "staleguard refused this call"
# --readback: Playwright MCP with file-linked snapshots, read back with `read_file`.
READBACK = False
READ_TOOL = "read_file"
LINKED = re.compile(r"^- \[Snapshot\]\(([^)\s]+\.yml)\)\s*$", re.M)
WORKSPACE = re.compile(r"Workspace Directories:\**\s*\n\s*- (/[^\n]+)")
REF = re.compile(r"\[ref=([^\]]+)\]")


# ---------------------------------------------------------------- reading the request


def strings_in(value):
    """Every string inside a JSON value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)


def fields(body, key):
    """The `key` fields (functionCall, functionResponse) of the request's parts, oldest first."""
    for content in body.get("contents") or []:
        for part in (content or {}).get("parts") or []:
            value = (part or {}).get(key)
            if isinstance(value, dict):
                yield value


def responses(body):
    """Every functionResponse part of the request, oldest first, as (name, text)."""
    return [(str(r.get("name", "")), "\n".join(strings_in(r.get("response")))) for r in fields(body, "functionResponse")]


def declared(body):
    """The names of the functions the request declares."""
    names = []
    for tool in body.get("tools") or []:
        for decl in (tool or {}).get("functionDeclarations") or []:
            names.append(str((decl or {}).get("name", "")))
    return names


def uid(snapshot, role, name):
    """The uid of the element `role "name"` in a Chrome DevTools MCP snapshot, or None."""
    pattern = re.compile(r"uid=(\S+) " + re.escape(role) + r' "' + re.escape(name) + r'"')
    match = pattern.search(snapshot)
    return match.group(1) if match else None


def newest_snapshot(found):
    """The newest response text that holds a live page snapshot, or ""."""
    for _, text in reversed(found):
        if SNAPSHOT in text:
            return text
    return ""


# ---------------------------------------------------------------- the order flow


def next_step(body):
    """The model's next move: ("call", tool, args) or ("text", words)."""
    if READBACK:
        return readback_step(body)
    names = declared(body)
    tool = next((n for n in names if n.endswith("_take_snapshot") or n == "take_snapshot"), None)
    if tool is None:
        return ("text", "I have no browser tools.")
    prefix = tool[: -len("take_snapshot")]
    found = responses(body)
    if not found:
        return ("call", prefix + "list_pages", {})
    name, text = found[-1]
    snapshot = newest_snapshot(found)
    if REFUSED in text:
        return ("call", prefix + "take_snapshot", {"pageId": 1})
    if SNAPSHOT in text:
        return on_snapshot(prefix, text)
    if "## Pages" in text and "about:blank" in text:
        url = SITE + "/order/form.html"
        return ("call", prefix + "navigate_page", {"pageId": 1, "type": "url", "url": url})
    if "Successfully filled out the form" in text:
        return click(prefix, snapshot, "Review order")
    if "Page navigated to" in text and "order/done.html" in text:
        # The click on "Place order" navigated; reuse its uid at once, as the recordings do.
        return click(prefix, snapshot, "Place order")
    if "navigated" in text:
        return ("call", prefix + "take_snapshot", {"pageId": 1})
    return ("text", "I could not tell what happened after " + name + ": " + text[:200])


def on_snapshot(prefix, page):
    if 'RootWebArea "Order a widget"' in page:
        name, qty = uid(page, "textbox", "Name"), uid(page, "spinbutton", "Quantity")
        if name and qty:
            elements = [{"uid": name, "value": "Ada Lovelace"}, {"uid": qty, "value": "3"}]
            return ("call", prefix + "fill_form", {"pageId": 1, "elements": elements})
    if 'RootWebArea "Confirm order"' in page:
        return click(prefix, page, "Place order")
    if 'RootWebArea "Order placed"' in page:
        line = next((l.strip() for l in page.splitlines() if "Confirmation number" in l), "")
        return ("text", "The order is placed. " + line)
    return ("text", "I do not know this page.")


def click(prefix, snapshot, label):
    target = uid(snapshot, "button", label)
    if target is None:
        return ("text", 'There is no "' + label + '" button in the newest snapshot.')
    return ("call", prefix + "click", {"pageId": 1, "uid": target})


# ---------------------------------------------------------------- --readback: Playwright MCP


def calls(body):
    """Every functionCall of the request, oldest first, as (name, args). Gemini CLI answers
    a turn's calls one for one and in order, so call i is answered by response i."""
    return [(str(c.get("name", "")), c.get("args") if isinstance(c.get("args"), dict) else {})
            for c in fields(body, "functionCall")]


def schema_of(body, name):
    """The declared parameter properties of function `name`."""
    for tool in body.get("tools") or []:
        for decl in (tool or {}).get("functionDeclarations") or []:
            if (decl or {}).get("name") == name:
                schema = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
                props = schema.get("properties") if isinstance(schema, dict) else None
                return props if isinstance(props, dict) else {}
    return {}


def workspace(body):
    """The first workspace directory Gemini CLI names in the conversation, or None."""
    for content in body.get("contents") or []:
        for part in (content or {}).get("parts") or []:
            found = WORKSPACE.search(str((part or {}).get("text") or ""))
            if found:
                return found.group(1).strip()
    return None


def unread_snapshot(body, made, found):
    """The read_file call for the snapshot file the newest page result links, when no newer
    result shows a page and the file was not read yet; else None."""
    props = schema_of(body, READ_TOOL)
    key = next((k for k in ("file_path", "absolute_path", "path") if k in props), None)
    if key is None:
        return None
    for _, text in reversed(found):
        if REF.search(text):
            return None
        link = LINKED.search(text)
        if link:
            path = link.group(1)
            if not path.startswith("/"):
                root = workspace(body)
                if root is None:
                    return None
                path = root.rstrip("/") + "/" + path
            if any(n == READ_TOOL and a.get(key) == path for n, a in made):
                return None
            return ("call", READ_TOOL, {key: path})
    return None


def newest_page(found):
    """(index, text) of the newest response that shows a page tree with refs."""
    for i in range(len(found) - 1, -1, -1):
        if REF.search(found[i][1]):
            return i, found[i][1]
    return None, ""


def ref_of(page, role, name):
    """The ref on the tree line holding `role "name"`, or None."""
    for line in page.splitlines():
        if role + ' "' + name + '"' in line:
            match = REF.search(line)
            if match:
                return match.group(1)
    return None


def value_of(page, role, name):
    """What follows the ref on the line of `role "name"` (a field's value), unquoted."""
    for line in page.splitlines():
        if role + ' "' + name + '"' in line:
            tail = line.split("]:", 1)
            return tail[1].strip().strip('"') if len(tail) == 2 else ""
    return None


def ref_key(body, tool):
    """The ref argument `tool` takes: `target` from Playwright MCP 0.0.7x on, else `ref`."""
    props = schema_of(body, tool)
    return "target" if "target" in props and "ref" not in props else "ref"


def act(body, tool, element, ref, **more):
    return ("call", tool, dict({"element": element, ref_key(body, tool): ref}, **more))


def readback_step(body):
    names = declared(body)
    navigate = next((n for n in names if n.endswith("_browser_navigate")), None)
    if navigate is None:
        return ("text", "I have no browser tools.")
    prefix = navigate[: -len("browser_navigate")]
    made, found = calls(body), responses(body)
    if not found:
        return ("call", navigate, {"url": SITE + "/order/form.html"})
    if REFUSED in found[-1][1]:
        return ("call", prefix + "browser_snapshot", {})
    if READ_TOOL in names:
        read = unread_snapshot(body, made, found)
        if read:
            return read
    index, page = newest_page(found)
    if index is None:
        return ("text", "I see no page after " + found[-1][0] + ": " + found[-1][1][:200])
    if "Order a widget" in page:
        return fill_form_readback(body, prefix, page, made[index + 1:])
    if 'button "Place order"' in page:
        return act(body, prefix + "browser_click", "Place order button", ref_of(page, "button", "Place order"))
    if "Order placed" in page:
        place = [c for c in made if c[0] == prefix + "browser_click" and c[1].get("element") == "Place order button"]
        if len(place) == 1:
            # The order is placed; reuse the old "Place order" call, as the recordings do.
            return ("call", place[0][0], dict(place[0][1]))
        facts = re.findall(r"Confirmation number: WX-\d+|Order WX-\d+ has been cancelled", page)
        return ("text", "Done. " + "; ".join(facts) if facts else "The order page shows no confirmation.")
    return ("text", "The page is not part of the order flow.")


def fill_form_readback(body, prefix, page, since):
    typed = {a.get(ref_key(body, n)) for n, a in since}
    for role, label, want in (("textbox", "Name", "Ada Lovelace"), ("spinbutton", "Quantity", "3")):
        ref = ref_of(page, role, label)
        if ref and ref not in typed and value_of(page, role, label) != want:
            return act(body, prefix + "browser_type", label + " " + role, ref, text=want)
    colour = ref_of(page, "combobox", "Colour")
    if colour and colour not in typed and 'option "Blue" [selected]' not in page:
        return act(body, prefix + "browser_select_option", "Colour combobox", colour, values=["Blue"])
    return act(body, prefix + "browser_click", "Review order button", ref_of(page, "button", "Review order"))


def from_schema(schema, key=""):
    """A value that fits a (Gemini or JSON) schema; a next-speaker check gets "user"."""
    schema = schema if isinstance(schema, dict) else {}
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        options = schema["enum"]
        return "user" if "user" in options else options[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: from_schema(v, k) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "user" if key == "next_speaker" else "Scripted."


def answer_parts(body):
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        return [{"text": json.dumps(from_schema(schema))}]
    if not body.get("tools"):
        return [{"text": "Scripted answer."}]
    step = next_step(body)
    thought = {"text": "I read the newest tool result and act on it.", "thought": True}
    if step[0] == "call":
        return [thought, {"functionCall": {"name": step[1], "args": step[2]}}]
    return [thought, {"text": step[1]}]


def answers(body, stream):
    """The answer chunks: one object, or the thought and the rest as two chunks."""
    parts = answer_parts(body)
    prompt = len(json.dumps(body)) // 4
    usage = {"promptTokenCount": prompt, "candidatesTokenCount": 20, "totalTokenCount": prompt + 20}
    pieces = [parts[:1], parts[1:]] if stream and len(parts) > 1 else [parts]
    chunks = []
    for i, piece in enumerate(pieces):
        candidate = {"content": {"role": "model", "parts": piece}, "index": 0}
        if i == len(pieces) - 1:
            candidate["finishReason"] = "STOP"
        chunks.append({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-scripted"})
    return chunks


# ---------------------------------------------------------------- HTTP


class Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, ctype, data):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_requests":
            with LOCK:
                data = json.dumps(RECORDS).encode()
            return self.reply(200, "application/json", data)
        self.reply(404, "application/json", b'{"error": {"code": 404, "message": "not found"}}')

    def record(self):
        """Records the request; its body parsed as JSON, or None."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        rec = {"method": self.command, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.items()],
               "body": raw.decode("utf-8", "replace")}
        with LOCK:
            RECORDS.append(rec)
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def do_POST(self):
        body = self.record()
        path = urllib.parse.urlsplit(self.path).path
        if not isinstance(body, dict) or not re.search(r":(stream)?[gG]enerateContent$", path):
            if path.endswith(":countTokens"):
                return self.reply(200, "application/json", b'{"totalTokens": 100}')
            return self.reply(404, "application/json", b'{"error": {"code": 404, "message": "not scripted"}}')
        stream = ":streamGenerateContent" in path
        chunks = answers(body, stream)
        if not stream:
            return self.reply(200, "application/json", json.dumps(chunks[0]).encode())
        if "alt=sse" in self.path:
            data = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
            return self.reply(200, "text/event-stream", data)
        self.reply(200, "application/json", json.dumps(chunks).encode())


def main():
    global SITE, READBACK
    args = sys.argv[1:]
    if args[:1] == ["--readback"]:
        READBACK, args = True, args[1:]
    if len(args) != 1:
        sys.exit("usage: gemini_model.py [--readback] SITE_BASE")
    SITE = args[0].rstrip("/")
    model = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    print(model.server_address[1], flush=True)
    model.serve_forever()


if __name__ == "__main__":
    main()
