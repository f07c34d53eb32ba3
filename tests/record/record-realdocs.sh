#!/usr/bin/env bash
# Records the sessions over real documentation pages (fixtures/realdocs): serves
# fixtures/realdocs/site on 127.0.0.1:$PORT, runs record_realdocs.mjs with the
# @playwright/mcp install in tests/mcp/node/pw-0.0.41, and stops the server.
# usage: tests/record/record-realdocs.sh [OUT_DIR] [--only a,b]   (OUT_DIR defaults to fixtures/realdocs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$repo/fixtures/realdocs}"
shift || true
port="${PORT:-8441}"
install="${INSTALL:-$repo/tests/mcp/node/pw-0.0.41}"

python3 -m http.server "$port" --bind 127.0.0.1 --directory "$repo/fixtures/realdocs/site" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/index.html')" 2>/dev/null && break
  sleep 0.1
done
node "$here/record_realdocs.mjs" "$install" --base "http://127.0.0.1:$port" --out "$out" "$@"
