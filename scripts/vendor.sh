#!/usr/bin/env bash
# Re-fetch the pinned front-end libraries from npm and copy their browser builds into static/vendor.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp package.json "$tmp/"
(cd "$tmp" && npm install --no-audit --no-fund --silent >/dev/null)
out=static/vendor
rm -rf "$out" && mkdir -p "$out"
copy() { # package file
  cp "$tmp/node_modules/$1/$2" "$out/"
  local version licence
  version=$(node -p "require('$tmp/node_modules/$1/package.json').version")
  licence=$(node -p "require('$tmp/node_modules/$1/package.json').license")
  echo "$1 $version $licence $(basename "$2")" >> "$out/VERSIONS.txt"
  for f in LICENSE LICENSE.md LICENSE.txt; do
    [ -f "$tmp/node_modules/$1/$f" ] && cp "$tmp/node_modules/$1/$f" "$out/LICENSE.$1" && break
  done
  # Some packages (ajv-dist) ship no licence file: record the licence their package.json declares.
  [ -f "$out/LICENSE.$1" ] || echo "$1 $version is licensed under $licence (declared in its package.json;" \
    "the npm package ships no licence file)." > "$out/LICENSE.$1"
}
copy cytoscape dist/cytoscape.min.js
# cytoscape-dagre 4 bundles its own dagre (@dagrejs/dagre) inside dist/cytoscape-dagre.js: no separate dagre.
copy cytoscape-dagre dist/cytoscape-dagre.js
printf '\nNote: dist/cytoscape-dagre.js bundles @dagrejs/dagre, MIT licensed, Copyright (c) 2012-2014 Chris Pettitt.\n' \
  >> "$out/LICENSE.cytoscape-dagre"
# cytoscape-edgehandles' browser build takes lodash's memoize and throttle from the global `_`.
copy lodash lodash.min.js
copy cytoscape-edgehandles cytoscape-edgehandles.js
# The editor validates node configs against their JSON Schema (draft 2020-12) as they are typed.
copy ajv-dist dist/ajv2020.min.js
copy chart.js dist/chart.umd.min.js
echo "vendored into $out:"; cat "$out/VERSIONS.txt"
# Test-only (package.json's devDependencies): axe-core, injected by the browser suite's accessibility
# check (tests/e2e/test_accessibility.py), never served by the app.
out=tests/e2e/vendor
rm -rf "$out" && mkdir -p "$out"
copy axe-core axe.min.js
echo "vendored into $out:"; cat "$out/VERSIONS.txt"
