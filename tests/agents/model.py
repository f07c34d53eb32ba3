#!/usr/bin/env python3
"""A scripted model that drives a real agent through the shared order flow (standard library only).

    python3 tests/agents/model.py [--port PORT]                # the model
    python3 tests/agents/model.py --relay URL [--port PORT]    # a recording relay to URL
    python3 tests/agents/model.py --readback [--port PORT]     # the model, reading linked snapshots
    python3 tests/agents/model.py --coding [--readback] [--port PORT]  # a coding agent checking pages

The first line on standard output is the port it listens on (127.0.0.1 only).

As the model it acts as a real model would: every answer is decided from what the request holds
(the tools it offers, the newest page snapshot among the tool results, the calls the model made
since, refusals), never from how many requests came before, because agents send side requests
(titles, summaries, tool searches) of their own. The order flow of tests/site/pages/order:

  1. (tools deferred behind a tool search) search for the browser tools
  2. navigate to the form URL named in the first user message
  3. type the name, type the quantity, select the colour, click "Review order"
  4. on the confirm page click "Place order"
  5. on the done page click "Place order" again with the SAME arguments: the stale ref the
     recordings in fixtures/*/order.* reused, which cancelled the order there
  6. when a result says "staleguard refused this call", take a snapshot
  7. answer with a final text that quotes the page's confirmation line

A request without tools (a title or summary side request) gets a short plain text answer.

With --readback the model reads file-linked snapshots (Playwright MCP 0.0.69 on: the newest
page result holds only `- [Snapshot](.playwright-mcp/page-<stamp>.yml)`) back with the agent's
own file tool, Claude Code's `Read` (`file_path`) or opencode's `read` (`filePath`), at the
absolute path (the link resolved against the `Working directory:` the agent's system prompt
names), instead of calling browser_snapshot; it then picks refs from what it read, its line
numbers (`     1→`, `1: `) stripped. Without the flag nothing of this applies.

With --coding the model works as a coding agent that checks pages in the browser while it
works: after every page it is shown (a browser result with a page, or with --readback a snapshot
file read back), and before its next browser call, it runs the chores that page's place in the
session calls for, with the agent's own tools: `Bash` (`cat`, `sed -n`, `ls -laR`, `curl -s` of the
test site, a doctest run) and `Read` of large files, all of them real files of this machine that
do not change (Python's standard library in /usr/lib/python3.11, this checkout's docs and recordings). Each chore is done
once after its page; a chore is done when a call with its exact input follows the page. Which
chores and which flow come from the request: the n-th page of the request gets the n-th list of
chores (pages collapsed to a staleguard receipt count), and the first user message names the flow:
  * the order form (`form.html`): the order flow above, the same calls and answer;
  * the parts catalog (`catalog.html`): a fixed plan of visits, the catalog three times and the
    knowledge base's search, results and two articles between, then an answer quoting the parts'
    rows and the articles' prices and dates that the request still shows.
Only the results of browser tools and of `Read`s of `.playwright-mcp/` files are pages to it;
what the chores print never is. Without the flag nothing of this applies.

As the relay it records every request and forwards it unchanged to URL, but for a header
`x-e2e-seq: N` (N counts its records from 1) and, on a WebSocket handshake, the hop-by-hop
`Connection: Upgrade`, then sends the whole answer back: what the agent sent, to compare with
what the model received behind the proxy, paired by N. (It speaks no WebSocket: a handshake the
server behind it accepted would fail.)

Either way:
  GET /_requests   JSON list of the recorded requests (method, path, headers, body as text, and
                   `at`, when it arrived in seconds since the Unix epoch)

Providers: Anthropic Messages (POST .../v1/messages, JSON or SSE with "stream": true;
.../v1/messages/count_tokens). Another provider needs a reader of its body into a Conversation
and a writer of an Action in its answer format (as anthropic_view and anthropic_events are),
and a route in Handler.answer; decide() is shared.
"""

import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LOCK = threading.Lock()
RECORDS = []

NAME = "Ada Lovelace"
QUANTITY = "3"
COLOUR = "Blue"
REFUSED = "staleguard refused this call"
# --readback: read file-linked snapshots with the agent's file tool.
READBACK = False
READ_TOOL = "Read"
# --coding: work like a coding agent between pages.
CODING = False
SHELL_TOOL = "Bash"
LINKED = re.compile(r"^- \[Snapshot\]\(([^)\s]+\.yml)\)\s*$", re.M)
# A file tool's line number: Claude Code's `     1→` (or `     1<tab>`), opencode's `1: `.
LINE_NUMBER = re.compile(r"^ *\d+(?:\u2192|\t|: )", re.M)
# The agents' file tools, by name, with the argument that names the file: Claude Code's
# `Read`, opencode's `read`.
FILE_READERS = {"Read": "file_path", "read": "filePath"}
WORKDIR = re.compile(r"[Ww]orking directory: *(/\S+)")
# The browser tools the flow uses, by their MCP tool name without the server prefix.
NEEDED = {"browser_navigate", "browser_type", "browser_select_option", "browser_click", "browser_snapshot"}


# ---------------------------------------------------------------- the provider-neutral view

class Conversation:
    """What a request holds, as the script reads it.

    tools: {name: deferred} for every tool offered
    calls: [(call_id, name, input)] in order
    results: [(call_id, text)] in order
    deferred: MCP tool names (`server__tool`) the conversation's text mentions
    prompt: the text of the first user message that names the order form
    schemas: {name: input schema} for every tool offered with one
    workdir: the agent's working directory its system prompt names, or None
    """

    def __init__(self):
        self.tools = {}
        self.calls = []
        self.results = []
        self.deferred = set()
        self.prompt = ""
        self.schemas = {}
        self.workdir = None
        # --coding only: the text of every user message, in order.
        self.user_texts = []


class Action:
    """The model's answer: a tool call (name, input) or a text."""

    def __init__(self, text=None, tool=None, arguments=None):
        self.text = text
        self.tool = tool
        self.arguments = arguments


def tool_named(convo, suffix):
    """The offered tool whose name is `suffix` or ends in `__suffix` (an MCP prefix), or in
    `_suffix` (opencode's `<server>_<tool>`)."""
    for name in convo.tools:
        if name == suffix or name.endswith("__" + suffix) or name.endswith("_" + suffix):
            return name
    return None


def file_reader(convo):
    """--readback: (name, path argument) of the agent's file tool the request offers, or None."""
    for name, key in FILE_READERS.items():
        if name in convo.tools:
            return name, key
    return None


def reads_file(call, path):
    """Whether `call` (call_id, name, input) read the file at `path` with an agent's file tool."""
    key = FILE_READERS.get(call[1])
    return key is not None and isinstance(call[2], dict) and call[2].get(key) == path


def search_tool(convo):
    for name in ("ToolSearch", "tool_search"):
        if name in convo.tools:
            return name
    return None


def latest_snapshot(convo):
    """(index in results, text) of the newest result that shows a page snapshot."""
    for i in range(len(convo.results) - 1, -1, -1):
        text = convo.results[i][1]
        if "Page Snapshot" in text or re.search(r"\[ref=", text):
            return i, (LINE_NUMBER.sub("", text) if READBACK else text)
    return None, ""


def unread_snapshot(convo):
    """--readback: the absolute path of the snapshot file the newest page result links, when
    no newer result shows a page and the file was not read yet; else None."""
    for _, text in reversed(convo.results):
        if re.search(r"\[ref=", text):
            return None
        link = LINKED.search(text)
        if link:
            path = link.group(1)
            if not path.startswith("/"):
                if convo.workdir is None:
                    return None
                path = convo.workdir.rstrip("/") + "/" + path
            read = any(reads_file(c, path) for c in convo.calls)
            return None if read else path
    return None


def ref_key(convo, suffix):
    """The ref argument the tool takes: `target` from Playwright MCP 0.0.7x on, else `ref`
    (--readback only, as it is the only mode run on those servers)."""
    if not READBACK:
        return "ref"
    schema = convo.schemas.get(tool_named(convo, suffix) or "") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and "target" in properties and "ref" not in properties:
        return "target"
    return "ref"


def calls_after(convo, index):
    """The calls answered after result `index`."""
    ids = {cid for cid, _ in convo.results[index + 1:]}
    return [c for c in convo.calls if c[0] in ids]


def ref_of(page, role, name):
    """The ref on the snapshot line holding `role "name"`, or None."""
    for line in page.splitlines():
        if f'{role} "{name}"' in line:
            m = re.search(r"\[ref=([^\]]+)\]", line)
            if m:
                return m.group(1)
    return None


def value_of(page, role, name):
    """What follows the ref on the line of `role "name"` (a field's value), stripped of quotes."""
    for line in page.splitlines():
        if f'{role} "{name}"' in line:
            tail = line.split("]:", 1)
            return tail[1].strip().strip('"') if len(tail) == 2 else ""
    return None


def call(convo, suffix, **arguments):
    name = tool_named(convo, suffix)
    if name is None:
        return Action(text=f"I cannot continue: no {suffix} tool is offered.")
    return Action(tool=name, arguments=arguments)


def decide(convo):
    """The next step of the order flow, from what the request holds."""
    if not convo.tools:
        return Action(text="Ordering widgets")
    if tool_named(convo, "browser_navigate") is None:
        return find_tools(convo)
    if convo.results and REFUSED in convo.results[-1][1]:
        return call(convo, "browser_snapshot")
    reader = file_reader(convo) if READBACK else None
    if reader:
        path = unread_snapshot(convo)
        if path:
            return Action(tool=reader[0], arguments={reader[1]: path})
    index, page = latest_snapshot(convo)
    if index is None:
        url = re.search(r"https?://127\.0\.0\.1:\d+/\S*form\.html", convo.prompt)
        if url is None:
            return Action(text="I need the URL of the order form.")
        return call(convo, "browser_navigate", url=url.group(0))
    if "Order a widget" in page:
        return fill_form(convo, page, calls_after(convo, index))
    if 'button "Place order"' in page:
        ref = ref_of(page, "button", "Place order")
        return call(convo, "browser_click", element="Place order button",
                    **{ref_key(convo, "browser_click"): ref})
    if "Order placed" in page:
        return after_order(convo, page)
    return Action(text="The page is not part of the order flow.")


def find_tools(convo):
    """The browser tools are deferred (named in the conversation, not defined): search for
    them once, as a real model does with Claude Code's ToolSearch."""
    search = search_tool(convo)
    wanted = sorted(n for n in convo.deferred if n.split("__")[-1] in NEEDED)
    searched = any(c[1] == search for c in convo.calls)
    if search is None or not wanted or searched:
        return Action(text="I cannot continue: no browser tools are offered.")
    return Action(tool=search, arguments={"query": "select:" + ",".join(wanted),
                                          "max_results": len(wanted)})


def fill_form(convo, page, since):
    typed = {c[2].get(ref_key(convo, c[1].split("__")[-1])) for c in since if isinstance(c[2], dict)}
    fields = [
        ("textbox", "Name", NAME, "browser_type"),
        ("spinbutton", "Quantity", QUANTITY, "browser_type"),
    ]
    for role, label, want, tool in fields:
        ref = ref_of(page, role, label)
        if ref and ref not in typed and value_of(page, role, label) != want:
            return call(convo, tool, element=f"{label} {role}", **{ref_key(convo, tool): ref}, text=want)
    colour = ref_of(page, "combobox", "Colour")
    if colour and colour not in typed and f'option "{COLOUR}" [selected]' not in page:
        return call(convo, "browser_select_option", element="Colour combobox",
                    **{ref_key(convo, "browser_select_option"): colour}, values=[COLOUR])
    review = ref_of(page, "button", "Review order")
    return call(convo, "browser_click", element="Review order button",
                **{ref_key(convo, "browser_click"): review})


def after_order(convo, page):
    """On the done page: reuse the "Place order" call once, as the recordings did, then answer."""
    clicks = [c for c in convo.calls
              if c[1].endswith("browser_click") and isinstance(c[2], dict)
              and c[2].get("element") == "Place order button"]
    if len(clicks) == 1:
        return Action(tool=clicks[0][1], arguments=dict(clicks[0][2]))
    facts = re.findall(r"Confirmation number: WX-\d+|Order WX-\d+ has been cancelled", page)
    return Action(text="Done. " + "; ".join(facts) if facts else "The order page shows no confirmation.")


# ---------------------------------------------------------------- --coding: a coding agent checking pages

SITE = re.compile(r"https?://127\.0\.0\.1:\d+")
# How staleguard's receipt of a collapsed page starts.
RECEIPT = "[staleguard receipt]"
PY = "/usr/lib/python3.11"
# This checkout: the chores read its spec, design notes, test site and recordings.
REPO = str(Path(__file__).resolve().parents[2])


def bash(command, description):
    return (SHELL_TOOL, {"command": command, "description": description})


def read(path, offset=None, limit=None):
    arguments = {"file_path": path}
    if offset is not None:
        arguments["offset"] = offset
    if limit is not None:
        arguments["limit"] = limit
    return (READ_TOOL, arguments)


def order_chores(site):
    """The chores after the n-th page of the order flow (index n - 1): 15-90 KB of output each
    (with --readback five of them, in another order)."""
    return [
        [bash(f"ls -laR {REPO}/tests/site", "List the test site"),
         read(f"{PY}/pathlib.py"),
         bash(f"curl -s {site}/order/confirm.html", "Fetch the confirm page's HTML")],
        [bash(f"sed -n '1,700p' {PY}/http/server.py", "Read how http.server answers GET"),
         bash(f"python3 -m doctest -v {PY}/difflib.py", "Run difflib's doctests")],
        [read(f"{PY}/http/client.py"),
         bash(f"grep -rn 'def ' {PY}/http/", "List the http package's functions")],
        [bash(f"curl -s {site}/index.html {site}/order/done.html", "Fetch the home and done pages"),
         read(f"{REPO}/docs/SPEC.md"),
         bash(f"ls -la {PY}", "List the standard library")],
        [read(f"{PY}/json/decoder.py"),
         read(f"{PY}/json/encoder.py"),
         bash(f"sed -n '700,1400p' {PY}/http/server.py", "Read the rest of http.server")],
        [bash(f"python3 -m doctest -v {PY}/statistics.py", "Run statistics' doctests"),
         read(f"{PY}/shutil.py"),
         bash(f"ls -laR {REPO}/fixtures/ankita {REPO}/fixtures/cdmcp-1.11.0 {REPO}/fixtures/pwmcp-0.0.41 {REPO}/fixtures/pwmcp-0.0.83", "List the recorded fixtures")],
        [bash(f"cat {REPO}/tests/site/check.mjs", "Read the fixture checker"),
         bash(f"python3 -m doctest -v {PY}/fractions.py", "Run fractions' doctests"),
         read(f"{REPO}/docs/DESIGN.md")],
    ]


def catalog_plan(site):
    """The whole catalog session: browser steps (tool, what it names) and the chores between
    them, in order. A browser step that acts on an element names it by (role, name)."""
    catalog = f"{site}/long/catalog.html"
    return [
        ("browser_navigate", {"url": catalog}),
        read(f"{PY}/pathlib.py"),
        bash(f"sed -n '1,700p' {PY}/http/server.py", "Read how http.server answers GET"),
        bash(f"ls -laR {PY}/json {PY}/http {PY}/email", "List the json, http and email packages"),
        bash(f"curl -s {site}/long/gen_catalog.py", "Fetch the catalog's generator"),
        ("browser_navigate", {"url": f"{site}/research/search.html"}),
        read(f"{PY}/http/client.py"),
        bash(f"grep -rn 'def ' {PY}/http/", "List the http package's functions"),
        ("browser_type", ("searchbox", "Search articles", "home battery")),
        bash(f"curl -s '{site}/research/results.html?q=home+battery'", "Fetch the results page's HTML"),
        read(f"{REPO}/docs/SPEC.md"),
        bash(f"python3 -m doctest -v {PY}/difflib.py", "Run difflib's doctests"),
        read(f"{PY}/json/encoder.py"),
        ("browser_click", ("link", "Home battery prices fell 14% in 2024")),
        read(f"{PY}/argparse.py", 1, 900),
        bash(f"sed -n '700,1400p' {PY}/http/server.py", "Read the rest of http.server"),
        bash(f"curl -s {site}/research/search.html", "Fetch the search page's HTML"),
        ("browser_navigate", {"url": catalog}),
        bash(f"python3 -m doctest -v {PY}/statistics.py", "Run statistics' doctests"),
        read(f"{PY}/threading.py"),
        bash(f"ls -la {PY}", "List the standard library"),
        ("browser_navigate", {"url": f"{site}/research/articles/northwind-h2-review.html"}),
        bash(f"cat {PY}/ipaddress.py", "Read ipaddress.py"),
        bash(f"cat {PY}/http/cookies.py", "Read http.cookies"),
        bash(f"curl -s {site}/index.html", "Fetch the home page's HTML"),
        ("browser_navigate", {"url": catalog}),
        bash(f"python3 -m doctest -v {PY}/fractions.py", "Run fractions' doctests"),
        read(f"{REPO}/docs/DESIGN.md"),
    ]


def call_tool(convo, call):
    """The name of the offered tool a call was made with (an MCP prefix aside), as plan steps
    name it: `Bash`, `Read`, `browser_click`."""
    name = call[1]
    return name.split("__")[-1] if "__browser_" in name else name


def is_page_result(call):
    """--coding: a result that may show a page: a browser tool's, or a Read of a snapshot file."""
    if call is None:
        return False
    name, arguments = call[1], call[2] if isinstance(call[2], dict) else {}
    return "__browser_" in name or (name == READ_TOOL and "/.playwright-mcp/" in str(arguments.get("file_path")))


def shows_page(text):
    return "Page Snapshot" in text or re.search(r"\[ref=", text) is not None


def page_view(convo):
    """The conversation with only the results that may show pages (what the order flow reads)."""
    calls = {c[0]: c for c in convo.calls}
    view = Conversation()
    view.__dict__.update(convo.__dict__)
    view.results = [r for r in convo.results if is_page_result(calls.get(r[0]))]
    return view


def chore_action(convo, chore):
    name, arguments = chore
    if name not in convo.tools:
        return Action(text=f"I cannot continue: no {name} tool is offered.")
    return Action(tool=name, arguments=dict(arguments))


def next_order_chore(convo, view):
    """The first chore of the newest page's list that no call after that page made. The n-th
    page counts the older pages the request shows collapsed (a staleguard receipt) too."""
    calls = {c[0]: c for c in convo.calls}
    pages = [r for r in view.results if shows_page(r[1]) or r[1].startswith(RECEIPT)]
    if not pages or not shows_page(pages[-1][1]):
        return None
    site = SITE.search(convo.prompt)
    chores = order_chores(site.group(0) if site else "")
    if READBACK:
        # Another session's shape: other chores, in another order.
        chores = [chores[i] for i in (5, 2, 1, 3, 6)]
    if len(pages) > len(chores):
        return None
    position = [r[0] for r in convo.results].index(pages[-1][0])
    done = [calls.get(cid) for cid, _ in convo.results[position + 1:]]
    done = [(c[1], c[2]) for c in done if c is not None]
    for chore in chores[len(pages) - 1]:
        if chore not in done:
            return chore_action(convo, chore)
    return None


def coding_decide(convo):
    """--coding: the next step, from what the request holds."""
    if not convo.tools:
        return Action(text="Checking pages while coding")
    if tool_named(convo, "browser_navigate") is None:
        return find_tools(convo)
    failed = [t for _, t in page_view(convo).results if re.match(r"(### )?Error\b", t)]
    if len(failed) >= 3:
        return Action(text="I cannot continue: the browser keeps failing: " + failed[-1][:600])
    prompt = next((t for t in convo.user_texts if SITE.search(t)), "")
    if "catalog.html" in prompt:
        return catalog_step(convo, prompt)
    view = page_view(convo)
    chore = next_order_chore(convo, view)
    return chore or decide(view)


def catalog_step(convo, prompt):
    """The next step of the catalog plan: the plan's calls are matched in order against the
    calls the conversation holds; the first one not made is next. With --readback a snapshot
    file the newest page result links is read first, as in the order flow."""
    if READBACK and READ_TOOL in convo.tools:
        path = unread_snapshot(page_view(convo))
        if path:
            return Action(tool=READ_TOOL, arguments={"file_path": path})
    plan = catalog_plan(SITE.search(prompt).group(0))
    made = [(call_tool(convo, c), c[2]) for c in convo.calls if c[1] not in ("ToolSearch", "tool_search")]
    at = 0
    for tool, arguments in made:
        if at < len(plan) and matches(plan[at], tool, arguments):
            at += 1
    if at == len(plan):
        return catalog_answer(convo, prompt)
    tool, what = plan[at]
    if tool in (SHELL_TOOL, READ_TOOL):
        return chore_action(convo, (tool, what))
    if isinstance(what, dict):
        return call(convo, tool, **what)
    role, name = what[0], what[1]
    _, page = latest_snapshot(page_view(convo))
    ref = ref_of(page, role, name)
    if ref is None:
        return Action(text=f"I cannot find the {role} \"{name}\" on the page.")
    schema = convo.schemas.get(tool_named(convo, tool) or "") or {}
    key = "target" if "target" in (schema.get("properties") or {}) else "ref"
    if tool == "browser_type":
        return call(convo, tool, element=f"{name} {role}", **{key: ref}, text=what[2], submit=True)
    return call(convo, tool, element=f"{name} {role}", **{key: ref})


def matches(step, tool, arguments):
    """Whether a call made is the plan's step: the same input, or for an element step the same
    tool on the element it names."""
    want_tool, what = step
    if want_tool != tool or not isinstance(arguments, dict):
        return False
    if isinstance(what, dict):
        return arguments == what
    return arguments.get("element") == f"{what[1]} {what[0]}"


def catalog_answer(convo, prompt):
    """The parts' rows and the articles' prices and dates the request's tool results show
    (what the model can still read: a collapsed page shows only what staleguard kept)."""
    texts = [t for _, t in convo.results]
    seen = "\n".join(texts)
    facts = []
    for part in sorted(set(re.findall(r"P-\d{4}", prompt))):
        row = None
        for text in reversed(texts):
            # A row named inline (`row "P-0042 Wood screw 60 mm, steel $9.89"`) or by its cells,
            # one a line (`cell "P-0042"`, `cell "Wood screw 60 mm, steel"`, `cell "$9.89"`).
            row = (re.search(rf'{part} ([A-Z][^"\n]*?, [a-z]+) (\$\d+\.\d\d)', text)
                   or re.search(rf'cell "{part}"[^\n]*\n[^\n]*cell "([^"]+)"[^\n]*\n[^\n]*cell "(\$\d+\.\d\d)"',
                                text))
            if row:
                break
        facts.append(f"{part}: {row.group(1)}, {row.group(2)}" if row else f"{part}: not found")
    published = r"[\s\S]{0,400}?Published (\d{1,2} [A-Z][a-z]+ \d{4})"
    for label, pattern in [("Home battery prices (Fenwick survey)", r"fell to (?:\*\*)?(\$[\d,]+ per kWh)"),
                           ("a year earlier", r"down from (\$[\d,]+) per kWh"),
                           ("survey published", r"Home battery prices fell 14% in 2024" + published),
                           ("Northwind H2", r"Price: (\$[\d,]+ installed)"),
                           ("review published", r"Review: Northwind H2 home battery" + published)]:
        found = re.search(pattern, seen)
        facts.append(f"{label}: {found.group(1) if found else 'not found'}")
    return Action(text="Checked in the browser. " + "; ".join(facts) + ".")


# ---------------------------------------------------------------- Anthropic Messages

def blocks(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def block_text(content):
    """The text of a tool_result's content (a string or text blocks)."""
    return "\n".join(b.get("text", "") for b in blocks(content) if b.get("type") == "text")


def anthropic_view(body):
    convo = Conversation()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            convo.tools[tool["name"]] = bool(tool.get("defer_loading"))
            if isinstance(tool.get("input_schema"), dict):
                convo.schemas[tool["name"]] = tool["input_schema"]
    # The system prompt first, then the messages (Claude Code also sends role "system" ones).
    for text in [block_text(body.get("system"))] + [
            block_text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict)]:
        found = WORKDIR.search(text)
        if found and convo.workdir is None:
            convo.workdir = found.group(1)
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for block in blocks(message.get("content")):
            kind = block.get("type")
            if kind == "tool_use":
                convo.calls.append((block.get("id"), block.get("name", ""), block.get("input")))
            elif kind == "tool_result":
                content = block.get("content")
                convo.results.append((block.get("tool_use_id"), block_text(content)))
            elif kind == "text":
                text = block.get("text", "")
                convo.deferred.update(re.findall(r"\b\w+__browser_\w+", text))
                if message.get("role") == "user" and not convo.prompt and "form.html" in text:
                    convo.prompt = text
                if message.get("role") == "user":
                    convo.user_texts.append(text)
    return convo


def anthropic_usage(body_bytes):
    prompt = max(1, body_bytes // 4)
    return {"input_tokens": prompt, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "output_tokens": 1}


def anthropic_content(action, number):
    if action.tool:
        return {"type": "tool_use", "id": f"toolu_scripted_{number:04d}", "name": action.tool,
                "input": action.arguments}
    return {"type": "text", "text": action.text}


def anthropic_json(body, action, number, size):
    return {"id": f"msg_scripted_{number}", "type": "message", "role": "assistant",
            "model": body.get("model", "claude-scripted"), "content": [anthropic_content(action, number)],
            "stop_reason": "tool_use" if action.tool else "end_turn", "stop_sequence": None,
            "usage": anthropic_usage(size)}


def anthropic_events(body, action, number, size):
    message = anthropic_json(body, action, number, size)
    block = message.pop("content")[0]
    stop = message.pop("stop_reason")
    message.update(content=[], stop_reason=None)
    yield "message_start", {"type": "message_start", "message": message}
    if action.tool:
        start = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(action.arguments)}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": action.text}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 10}}
    yield "message_stop", {"type": "message_stop"}


# ---------------------------------------------------------------- the server

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-agent-model/1"
    relay = None  # (scheme, host, port) when relaying

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def record(self, body, action=None):
        rec = {"method": self.command, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("utf-8", errors="replace"), "at": time.time()}
        if action is not None:
            rec["answer"] = {"tool": action.tool, "arguments": action.arguments, "text": action.text}
        with LOCK:
            RECORDS.append(rec)
            return len(RECORDS)

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events):
        data = b"".join(f"event: {name}\ndata: {json.dumps(event)}\n\n".encode() for name, event in events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_requests":
            with LOCK:
                return self.send_json(200, list(RECORDS))
        self.handle_any(b"")

    def do_POST(self):
        self.handle_any(self.read_body())

    def handle_any(self, body):
        try:
            if self.relay:
                return self.forward(body)
            self.answer(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def answer(self, body):
        path = self.path.split("?", 1)[0]
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = None
        if not isinstance(request, dict):
            self.record(body)
            return self.send_json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                   "message": "body is not a JSON object"}})
        if path.endswith("/messages/count_tokens"):
            self.record(body)
            return self.send_json(200, {"input_tokens": max(1, len(body) // 4)})
        if path.endswith("/messages") and self.command == "POST":
            action = (coding_decide if CODING else decide)(anthropic_view(request))
            number = self.record(body, action)
            if request.get("stream"):
                return self.send_events(anthropic_events(request, action, number, len(body)))
            return self.send_json(200, anthropic_json(request, action, number, len(body)))
        self.record(body)
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no {path}"}})

    def forward(self, body):
        seq = self.record(body)
        scheme, host, port = self.relay
        conn = (http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection)(
            host, port, timeout=300)
        skip = {"host", "content-length", "connection", "transfer-encoding"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        if "upgrade" in (k.lower() for k in headers):
            # A WebSocket handshake goes on as one: its Upgrade header is named in Connection.
            # (An answer of 101 would end the relay's use of the connection; none is expected.)
            headers["Connection"] = "Upgrade"
        headers["x-e2e-seq"] = str(seq)
        conn.request(self.command, self.path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in skip:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--relay", help="record and forward every request to this origin")
    parser.add_argument("--readback", action="store_true",
                        help="read file-linked snapshots with the agent's Read tool")
    parser.add_argument("--coding", action="store_true",
                        help="work like a coding agent: shell and file output between pages")
    args = parser.parse_args()
    global READBACK, CODING
    READBACK = args.readback
    CODING = args.coding
    if args.relay:
        url = urllib.parse.urlsplit(args.relay)
        Handler.relay = (url.scheme, url.hostname, url.port or (443 if url.scheme == "https" else 80))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
