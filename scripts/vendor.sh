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
  true
}
copy cytoscape dist/cytoscape.min.js
copy dagre dist/dagre.min.js
copy cytoscape-dagre dist/cytoscape-dagre.js
copy cytoscape-edgehandles cytoscape-edgehandles.js
copy chart.js dist/chart.umd.min.js
echo "vendored into $out:"; cat "$out/VERSIONS.txt"
