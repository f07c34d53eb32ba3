"""Times `staleguard.project` on a ~1 MB request against `json.loads` + `json.dumps` of it.

The request is the recorded long_page session (pwmcp-0.0.41, 198 KB) played six times in
one conversation (tool call IDs made unique), so every browser page but the newest collapses.
Run: python bindings/python/bench.py (from the repository root, with the package installed).
"""

import json
import statistics
import time
from pathlib import Path

import staleguard

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/pwmcp-0.0.41/long_page.openai.json"


def megabyte_request() -> str:
    session = json.loads(FIXTURE.read_text(encoding="utf-8"))
    first, rest = session["messages"][:1], session["messages"][1:]
    messages = list(first)
    for round_ in range(6):
        text = json.dumps(rest).replace('"call_', f'"r{round_}_call_')
        messages += json.loads(text)
    return json.dumps({**session, "messages": messages})


def best_of(fn, runs=15):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    body = megabyte_request()
    as_dict = json.loads(body)
    assert staleguard.project(body) != body
    rows = {
        "json.loads + json.dumps (str)": lambda: json.dumps(json.loads(body)),
        "staleguard.project(str)": lambda: staleguard.project(body),
        "staleguard.project(bytes)": lambda: staleguard.project(body.encode()),
        "staleguard.project(dict)": lambda: staleguard.project(as_dict),
    }
    print(f"request: {len(body.encode()) / 1e6:.2f} MB")
    baseline = None
    for name, fn in rows.items():
        best, median = best_of(fn)
        baseline = baseline or median
        print(f"{name:32} best {best * 1e3:7.2f} ms  median {median * 1e3:7.2f} ms  x{median / baseline:.2f}")


if __name__ == "__main__":
    main()
