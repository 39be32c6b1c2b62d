#!/usr/bin/env bash
# Installs one tool set (a Python venv, or node_modules) into a cache outside
# the clone, keyed by everything that decides its content (the lock file, the
# interpreter's version, the install flags), and links it into the clone. A
# second clone on the same machine, or `make clean && make test`, finds it
# built; a new machine, or a changed lock file, builds a new one.
#
#   scripts/tools.sh venv DIR REQUIREMENTS [PIP_ARGS...]    (.venv, .venv-lint, ...)
#   scripts/tools.sh npm                                     (node_modules)
#   scripts/tools.sh cdk                                     (cdk/node_modules)
#
# The cache: $SFN_LOCK_TOOLS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sfn-lock/tools.
# A venv is built at its final path (venvs do not move) and marked complete
# last: a build cut short is started over, never used. One builder per entry
# at a time (flock), so clones building at once do not mix their files.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SFN_LOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sfn-lock/tools}"

digest() { sha256sum | cut -c1-16; }

# link NAME TARGET: the clone's NAME is a link to TARGET (a directory left by
# the layout before the cache, or a link to an older entry, is replaced).
link() {
  local name=$1 target=$2
  if [ "$(readlink "$name" 2>/dev/null)" != "$target" ]; then
    rm -rf "$name"
    ln -s "$target" "$name"
  fi
}

# build DIR WHAT COMMAND...: runs COMMAND to fill DIR unless DIR is complete.
build() {
  local dir=$1 what=$2 started=$SECONDS
  shift 2
  mkdir -p "$(dirname "$dir")"
  exec 9>"$dir.lock"
  flock 9
  if [ -e "$dir/.complete" ]; then
    echo "tools: $what: cached ($dir)" >&2
  else
    echo "tools: $what: installing into $dir (first time for this lock file on this machine)..." >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    "$@"
    touch "$dir/.complete"
    echo "tools: $what: installed in $((SECONDS - started)) s" >&2
  fi
  exec 9>&-
}

# npm_tree KIND FILES...: node_modules for the package whose package.json is
# the first of FILES, keyed by them (the lock file among them), linked into
# that package's folder.
npm_tree() {
  local kind=$1 package key dir
  shift
  package=$(dirname "$1")
  key=$({ npm --version; cat "$@"; } | digest)
  dir="$cache/$kind/$key"
  build "$dir" "$package/node_modules ($2)" sh -c '
    dir=$1; shift
    cp "$@" "$dir/"
    cd "$dir" && npm ci --no-audit --no-fund --loglevel=error' npm "$dir" "$@"
  link "$package/node_modules" "$dir/node_modules"
}

case "${1:-}" in
  venv)
    [ $# -ge 3 ] || { echo "usage: $0 venv DIR REQUIREMENTS [PIP_ARGS...]" >&2; exit 2; }
    name=$2 requirements=$3
    shift 3
    key=$({ python3 --version; cat "$requirements"; echo "$*"; } | digest)
    dir="$cache/venv/${name#.}-$key"
    build "$dir" "$name ($requirements)" sh -c '
      dir=$1 requirements=$2; shift 2
      python3 -m venv "$dir"
      "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" "$@"' \
      venv "$dir" "$requirements" "$@"
    link "$name" "$dir"
    ;;
  npm)
    npm_tree npm package.json package-lock.json .npmrc
    ;;
  cdk)
    # The CDK construct library's own package (cdk/), apart from the root's:
    # aws-cdk-lib is large and only make cdk-test needs it.
    npm_tree npm-cdk cdk/package.json cdk/package-lock.json
    ;;
  *)
    echo "usage: $0 venv DIR REQUIREMENTS [PIP_ARGS...] | $0 npm | $0 cdk" >&2
    exit 2
    ;;
esac
