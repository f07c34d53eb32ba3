#!/usr/bin/env bash
# Records the sessions over real documentation sets (fixtures/docsets): serves
# fixtures/docsets/sites on 127.0.0.1:$PORT (8450 by default; 8450-8459 are the
# ports set aside for it), runs record_docsets.mjs against pw-0.0.41, pw-0.0.83 and
# cdmcp-1.11.0 (tests/mcp/node/*), and stops the server, also on failure.
# usage: tests/record/record-docsets.sh [record_docsets.mjs options]
#   e.g. --server pw-0.0.83 --only git-lost_commits --out /tmp/x
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
port="${PORT:-8450}"

python3 -m http.server "$port" --bind 127.0.0.1 --directory "$repo/fixtures/docsets/sites" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/git/copyright')" 2>/dev/null && break
  sleep 0.1
done
node "$here/record_docsets.mjs" --base "http://127.0.0.1:$port" "$@"
