#!/usr/bin/env bash
# Runs the official MCP conformance suite (`@modelcontextprotocol/conformance`, server scenarios) against
# `mesh mcp --port` from dist/, bridging a `mesh hub` started here on a fresh SQLite file (docs/bridges.md, "MCP
# conformance"). The suite needs Node.js 22 or later: it runs on the Node.js 22 that scripts/node-versions.sh pins,
# installed from .ci/mcp-conformance's lockfile into the cache; the hub and the bridge run on the machine's Node.js.
# Every scenario must pass but those .ci/mcp-conformance/expected-failures.yml lists (capabilities the bridge does not
# offer); the suite exits non-zero on any other failure, and on a listed scenario that passes.
#
#   scripts/mcp-conformance.sh    needs a built dist/ (npm run build; npm ci builds it)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${MESH_NODE_CACHE:-$root/.ci/cache}"
[ -f "$root/dist/bin/mesh.js" ] || { echo "mcp-conformance: no dist/bin/mesh.js; run npm run build first" >&2; exit 1; }

node22="$("$root/scripts/node-versions.sh" install 22)"

# The suite and its whole tree, as the lockfile pins them; installed again only when the lockfile changed.
suite="$cache/mcp-conformance"
stamp="$(sha256sum "$root/.ci/mcp-conformance/package-lock.json" | cut -d' ' -f1) $("$node22/bin/node" --version)"
if [ "$(cat "$suite/.installed-for" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$suite"
  mkdir -p "$suite"
  cp "$root/.ci/mcp-conformance/package.json" "$root/.ci/mcp-conformance/package-lock.json" "$suite/"
  # npm's own script runs on the first node in PATH: Node.js 22, whose engine range the suite's tree asks for.
  (cd "$suite" && PATH="$node22/bin:$PATH" npm ci --silent --no-audit --no-fund --ignore-scripts)
  echo "$stamp" >"$suite/.installed-for"
fi

work="$(mktemp -d)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits for a line matching PATTERN in FILE (a server's start-up banner) and prints its first URL.
url_in() {
  local file="$1" pattern="$2" pid="$3" line
  for _ in $(seq 1 300); do
    line="$(grep -m1 -E "$pattern" "$file" || true)"
    if [ -n "$line" ]; then
      grep -oE 'http://[^ ;)]+' <<<"$line" | head -1
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "mcp-conformance: no '$pattern' in $file:" >&2
  cat "$file" >&2
  return 1
}

node "$root/dist/bin/mesh.js" hub --port 0 --db "$work/hub.db" >"$work/hub.log" 2>&1 &
pids+=("$!")
hub="$(url_in "$work/hub.log" 'listening on http://' "${pids[-1]}")"
node "$root/dist/bin/mesh.js" mcp --hub "$hub" --port 0 >"$work/mcp.log" 2>&1 &
pids+=("$!")
mcp="$(url_in "$work/mcp.log" 'MCP server .* on http://' "${pids[-1]}")"
echo "mcp-conformance: $("$node22/bin/node" -p "require('$suite/node_modules/@modelcontextprotocol/conformance/package.json').version") against $mcp (hub $hub)"

# The suite writes its results/ under the working directory: the temporary one.
status=0
(cd "$work" && "$node22/bin/node" "$suite/node_modules/@modelcontextprotocol/conformance/dist/index.js" server \
  --url "$mcp" --expected-failures "$root/.ci/mcp-conformance/expected-failures.yml") >"$work/suite.log" 2>&1 || status=$?
# The summary (one line per scenario, then the totals and the verdict on the expected failures) without the
# per-scenario progress lines.
sed -n '/=== SUMMARY ===/,$p' "$work/suite.log"
if [ "$status" -ne 0 ]; then
  echo "mcp-conformance: the suite failed (exit $status); its whole output:" >&2
  cat "$work/suite.log" >&2
  echo "mcp-conformance: the bridge's log:" >&2
  cat "$work/mcp.log" >&2
fi
exit "$status"
