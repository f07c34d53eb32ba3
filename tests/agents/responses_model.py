#!/usr/bin/env python3
"""A scripted model that speaks the OpenAI Responses API, for Codex CLI (standard library only).

    python3 tests/agents/responses_model.py [--port PORT]

The first line on standard output is the port it listens on (127.0.0.1 only). It is model.py's
model behind another wire format: every answer is decided by model.decide() from what the
request holds (the tools it offers, the newest page among the tool results, the calls made
since, refusals), the order flow of tests/site/pages/order that model.py describes, and
what it received is listed at `GET /_requests` as model.py lists it (the test puts model.py's
recording relay in front of the proxy, as for the other agents).

It answers `POST .../responses` as the Responses API does: a `response` object, or with
`"stream": true` the server-sent events Codex reads (`response.created`,
`response.in_progress`, `response.output_item.added` / `.done` for each output item, the
argument and text deltas between them, and `response.completed` with `usage`). Each answer
opens with a `reasoning` item that carries opaque `encrypted_content`, as a reasoning model's
does when the request asks for `include: ["reasoning.encrypted_content"]` with `store: false`,
so the test sees the agent send it back; then one `function_call` or one assistant `message`.

Tools: a `function` tool is offered by its name; a `namespace` tool (Codex puts each MCP
server's tools in one, `{"type": "namespace", "name": "mcp__playwright", "tools": [...]}`)
offers each of its tools as `<namespace>__<tool>` (`mcp__playwright__browser_click`), the name
decide() looks for. A call to such a tool is answered as the API answers it, with the tool's own
`name` and the `namespace` beside it, and read back from the request the same way. Codex offers
the tools in one of three ways, by model, and the script follows each:

  * up front, the namespace in `tools` (a model Codex has no metadata for);
  * deferred (`gpt-5.5`): a developer message lists `Deferred tool namespaces:` and `tools` holds
    `{"type": "tool_search", "execution": "client"}`; decide() searches for the browser tools
    (model.find_tools), answered as a `tool_search_call` item whose `arguments` are a query in
    words, and the `tool_search_output` Codex sends back offers what it found;
  * code mode (Codex's default models): no `tools`; an `additional_tools` item of `input`
    offers an `exec` custom tool, and the deferred namespaces' tools are called from it by name.
    Every call is then an `exec` script, `const result = await tools.<tool>(<arguments JSON>);`
    and a line that prints the text of what the tool returned; a script of ours in the request
    is read back as the call it makes, and its output as that call's result.
"""

import argparse
import json
import re
import sys
from http.server import ThreadingHTTPServer

import model

# Where Codex's environment context names its working directory.
CWD = re.compile(r"<cwd>([^<]+)</cwd>")
# The namespaces whose tools Codex defers behind `tool_search`, one a line after this header.
DEFERRED = re.compile(r"Deferred tool namespaces:\n((?:- [^\n]+\n?)+)")
# What the model calls the client-side tool search, as decide() knows it (model.search_tool).
SEARCH = "tool_search"
# Code mode: the one tool the model calls, and how it calls a tool from the script.
EXEC = "exec"
NESTED = re.compile(r"await tools\.(\w+)\((.*)\);\n")


# ---------------------------------------------------------------- reading a Responses body

def joined(namespace, name):
    return f"{namespace}__{name}" if namespace else name


def part_text(content):
    """The text of a message's content or of a tool output: a string, or parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def offer(convo, tools):
    """Adds `tools` (function tools, and namespaces of them) to what the request offers."""
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == SEARCH:
            convo.tools[SEARCH] = False
            continue
        inner = tool.get("tools") if tool.get("type") == "namespace" else [tool]
        prefix = tool.get("name") if tool.get("type") == "namespace" else None
        for t in inner or []:
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                name = joined(prefix, t["name"])
                convo.tools[name] = False
                if isinstance(t.get("parameters"), dict):
                    convo.schemas[name] = t["parameters"]


def additional_tools(body):
    """Code mode's tools: Codex offers them in a developer `additional_tools` item of `input`."""
    return [t for item in body.get("input") or [] if isinstance(item, dict)
            and item.get("type") == "additional_tools" for t in item.get("tools") or []]


def code_mode(body):
    """The full name of the `exec` tool of code mode (`functions__exec`), or None."""
    for tool in additional_tools(body):
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            for t in tool.get("tools") or []:
                if isinstance(t, dict) and t.get("type") == "custom" and t.get("name") == EXEC:
                    return joined(tool.get("name"), EXEC)
    return None


def nested_call(source):
    """(tool, arguments) of the call a code-mode script of ours makes, or None."""
    found = NESTED.search(source) if isinstance(source, str) else None
    if found is None:
        return None
    try:
        return found.group(1), json.loads(found.group(2))
    except ValueError:
        return None


def responses_view(body):
    convo = model.Conversation()
    offer(convo, body.get("tools"))
    offer(convo, additional_tools(body))
    coded = code_mode(body)
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "custom_tool_call" and coded and joined(item.get("namespace"), item.get("name")) == coded:
            # A script of ours: the call it makes is the model's call.
            nested = nested_call(item.get("input"))
            if nested:
                convo.calls.append((item.get("call_id"), nested[0], nested[1]))
                continue
        if kind == "tool_search_call":
            convo.calls.append((item.get("call_id"), SEARCH, item.get("arguments")))
        elif kind == "tool_search_output":
            # What the search found is offered from here on.
            offer(convo, item.get("tools"))
            convo.results.append((item.get("call_id"), json.dumps(item.get("tools"))))
        elif kind == "message":
            text = part_text(item.get("content"))
            # A deferred namespace's browser tools, by the names decide() searches for.
            for listed in DEFERRED.findall(text):
                for line in listed.splitlines():
                    namespace = line[2:].split(":")[0].strip()
                    if namespace.startswith("mcp__"):
                        wanted = {f"{namespace}__{n}" for n in model.NEEDED}
                        convo.deferred.update(wanted)
                        if coded:
                            # A script calls deferred tools by name, unsearched.
                            convo.tools.update(dict.fromkeys(wanted, False))
            found = CWD.search(text)
            if found and convo.workdir is None:
                convo.workdir = found.group(1)
            if item.get("role") == "user":
                convo.user_texts.append(text)
                if not convo.prompt and "form.html" in text:
                    convo.prompt = text
        elif kind in ("function_call", "custom_tool_call"):
            raw = item.get("arguments", item.get("input"))
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                arguments = raw
            convo.calls.append((item.get("call_id"), joined(item.get("namespace"), item.get("name", "")),
                                arguments))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            convo.results.append((item.get("call_id"), part_text(item.get("output"))))
    return convo


# ---------------------------------------------------------------- writing the answer

def split_name(body, full):
    """(namespace, name) of the offered tool `full` names: a namespace's tool is called by its
    own name with the namespace beside it. Tools a tool search found count too."""
    found = [t for item in body.get("input") or [] if isinstance(item, dict)
             and item.get("type") == "tool_search_output" for t in item.get("tools") or []]
    for tool in list(body.get("tools") or []) + found + additional_tools(body):
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            for t in tool.get("tools") or []:
                if isinstance(t, dict) and joined(tool.get("name"), t.get("name")) == full:
                    return tool.get("name"), t.get("name")
    return None, full


def output_items(body, action, number):
    """The answer's output items, as they are when done: reasoning, then the call or text."""
    reasoning = {"type": "reasoning", "id": f"rs_scripted_{number:04d}", "summary": [],
                 "encrypted_content": f"gAAAAB-scripted-opaque-reasoning-{number:04d}=="}
    if action.tool == SEARCH and not any(isinstance(t, dict) and t.get("name") == SEARCH
                                         for t in body.get("tools") or []):
        # Codex's client-side tool search: a search of its own, not a function call. decide()
        # asks as Claude Code's ToolSearch is asked (`select:a,b`); BM25 is asked in words.
        wanted = action.arguments.get("query", "").removeprefix("select:").split(",")
        query = " ".join(sorted({w.split("__")[-1].replace("_", " ") for w in wanted}))
        item = {"type": "tool_search_call", "id": f"ts_scripted_{number:04d}", "status": "completed",
                "call_id": f"call_scripted_{number:04d}", "execution": "client",
                "arguments": {"query": query, "limit": 50}}
    elif action.tool and code_mode(body):
        # Code mode: a script that calls the tool and prints the text it returned.
        namespace, name = split_name(body, code_mode(body))
        source = (f"const result = await tools.{action.tool}({json.dumps(action.arguments)});\n"
                  "text(result.content.filter((c) => c.type === \"text\").map((c) => c.text).join(\"\\n\"));\n")
        item = {"type": "custom_tool_call", "id": f"ctc_scripted_{number:04d}", "status": "completed",
                "call_id": f"call_scripted_{number:04d}", "namespace": namespace, "name": name,
                "input": source}
    elif action.tool:
        namespace, name = split_name(body, action.tool)
        item = {"type": "function_call", "id": f"fc_scripted_{number:04d}", "status": "completed",
                "call_id": f"call_scripted_{number:04d}", "name": name,
                "arguments": json.dumps(action.arguments)}
        if namespace:
            item["namespace"] = namespace
    else:
        item = {"type": "message", "id": f"msg_scripted_{number:04d}", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
    return [reasoning, item]


def usage(size):
    prompt = max(1, size // 4)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 5},
            "total_tokens": prompt + 10}


def response(body, number, status, output, size=None):
    obj = {"id": f"resp_scripted_{number:04d}", "object": "response", "created_at": 1760000000 + number,
           "status": status, "model": body.get("model", "scripted"), "output": output,
           "parallel_tool_calls": body.get("parallel_tool_calls", True), "tool_choice": "auto",
           "usage": usage(size) if size is not None else None}
    return obj


def responses_json(body, action, number, size):
    return response(body, number, "completed", output_items(body, action, number), size)


def responses_events(body, action, number, size):
    """The events of a streamed answer, each with its `sequence_number`."""
    items = output_items(body, action, number)
    events = [("response.created", {"response": response(body, number, "in_progress", [])}),
              ("response.in_progress", {"response": response(body, number, "in_progress", [])})]
    for index, item in enumerate(items):
        at = {"output_index": index}
        if item["type"] == "reasoning":
            events.append(("response.output_item.added", dict(at, item=dict(item, encrypted_content=None))))
        elif item["type"] == "tool_search_call":
            events.append(("response.output_item.added", dict(at, item=dict(item, status="in_progress"))))
        elif item["type"] == "custom_tool_call":
            events.append(("response.output_item.added", dict(at, item=dict(item, input="", status="in_progress"))))
            ids = dict(at, item_id=item["id"])
            events.append(("response.custom_tool_call_input.delta", dict(ids, delta=item["input"])))
            events.append(("response.custom_tool_call_input.done", dict(ids, input=item["input"])))
        elif item["type"] == "function_call":
            events.append(("response.output_item.added",
                           dict(at, item=dict(item, arguments="", status="in_progress"))))
            ids = dict(at, item_id=item["id"])
            events.append(("response.function_call_arguments.delta", dict(ids, delta=item["arguments"])))
            events.append(("response.function_call_arguments.done", dict(ids, arguments=item["arguments"])))
        else:
            events.append(("response.output_item.added", dict(at, item=dict(item, content=[], status="in_progress"))))
            part = item["content"][0]
            ids = dict(at, item_id=item["id"], content_index=0)
            events.append(("response.content_part.added", dict(ids, part=dict(part, text=""))))
            events.append(("response.output_text.delta", dict(ids, delta=part["text"])))
            events.append(("response.output_text.done", dict(ids, text=part["text"])))
            events.append(("response.content_part.done", dict(ids, part=part)))
        events.append(("response.output_item.done", dict(at, item=item)))
    events.append(("response.completed", {"response": response(body, number, "completed", items, size)}))
    for seq, (name, event) in enumerate(events):
        yield name, dict({"type": name, "sequence_number": seq}, **event)


# ---------------------------------------------------------------- the server

class Handler(model.Handler):
    server_version = "scripted-responses-model/1"

    def answer(self, body):
        path = self.path.split("?", 1)[0]
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        if not (self.command == "POST" and path.endswith("/responses") and isinstance(request, dict)):
            self.record(body)
            return self.send_json(404 if isinstance(request, dict) or not body else 400,
                                  {"error": {"type": "invalid_request_error", "message": f"no {path}"}})
        action = model.decide(responses_view(request))
        number = self.record(body, action)
        if request.get("stream"):
            return self.send_events(responses_events(request, action, number, len(body)))
        return self.send_json(200, responses_json(request, action, number, len(body)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
