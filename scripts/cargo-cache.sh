#!/usr/bin/env bash
# The compiled dependencies (every crate that is not one of this repository's
# own), kept outside the clone as scripts/tools.sh keeps the tool installs: a
# second `make test` on the same machine compiles only the repository's crates.
# It is what CI caches such as Swatinem/rust-cache keep.
#
#   scripts/cargo-cache.sh restore   before the first cargo command: copies the
#                                    snapshot into target/debug, if the clone has
#                                    no target/debug yet (a fresh clone, make clean)
#   scripts/cargo-cache.sh save      once the build and clippy have run: writes a
#                                    snapshot if there is none for this key and
#                                    this run started from an empty target/debug
#
# Keyed by Cargo.lock, every Cargo.toml, RUSTFLAGS and the toolchain (rustc -vV).
# The key only decides whether a snapshot is worth copying: which artifact is
# fresh stays cargo's decision, by each unit's fingerprint (a dependency's
# version, features, profile, flags). An artifact built from other inputs is
# compiled again, never used. The repository's own crates are left out of the
# snapshot: cargo judges them by their sources' mtimes, and a fresh clone's
# sources are all new.
#
# Best effort: a cache that cannot be read or written costs a full build, never
# the run (both commands exit 0 and say what happened).
#
# The cache: $SFN_LOCK_CARGO_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sfn-lock/cargo.
# One snapshot is kept: saving one for a new key removes the others.
set -uo pipefail
cd "$(dirname "$0")/.."
cache="${SFN_LOCK_CARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sfn-lock/cargo}"
target="${CARGO_TARGET_DIR:-target}"
debug="$target/debug"
# Written by restore when this run starts from nothing: only such a run's
# target/debug holds just what this key needs (a developer's may hold every
# build of the past months).
from_scratch="$target/.cargo-cache-from-scratch"
say() { echo "cargo-cache: $*" >&2; }

key=$({ rustc -vV; cat Cargo.lock; git ls-files -z -- '*Cargo.toml' | xargs -0 cat; echo "${RUSTFLAGS:-}"; } |
  sha256sum | cut -c1-16)
snapshot="$cache/debug-$key"

case "${1:-}" in
  restore)
    rm -f "$from_scratch"
    if [ -e "$debug" ]; then
      say "$debug exists; nothing restored"
      exit 0
    fi
    mkdir -p "$target" "$cache" && : >"$from_scratch" || exit 0
    exec 9>"$cache/.lock"
    flock -s 9 # a save removing this snapshot waits for the copy
    if [ ! -e "$snapshot/.complete" ]; then
      say "no snapshot for this Cargo.lock and toolchain yet; the first build compiles every dependency"
      exit 0
    fi
    started=$SECONDS
    if cp -a "$snapshot" "$debug.partial" && rm -f "$debug.partial/.complete" && mv "$debug.partial" "$debug"; then
      say "compiled dependencies restored from $snapshot in $((SECONDS - started)) s"
    else
      rm -rf "$debug.partial" "$debug"
      say "could not restore $snapshot; the build compiles every dependency"
    fi
    ;;
  save)
    if [ ! -e "$from_scratch" ]; then
      say "this run did not start from an empty $debug; nothing saved"
      exit 0
    fi
    mkdir -p "$cache" || exit 0
    exec 9>"$cache/.lock"
    flock 9
    if [ -e "$snapshot/.complete" ]; then
      say "snapshot $snapshot exists"
      exit 0
    fi
    started=$SECONDS
    partial="$snapshot.partial.$$"
    # The repository's crates: every package and target name of both workspaces
    # (the bench's own is apart), as cargo names their artifacts.
    own=""
    for manifest in Cargo.toml bench/rust/Cargo.toml; do
      metadata=$(cargo metadata --offline --no-deps --format-version 1 --manifest-path "$manifest") ||
        { say "cargo metadata failed for $manifest; nothing saved"; exit 0; }
      own+=$(python3 -c '
import json, sys
for package in json.loads(sys.stdin.read())["packages"]:
    for name in [package["name"]] + [target["name"] for target in package["targets"]]:
        print(name, name.replace("-", "_"))' <<<"$metadata")$'\n'
    done
    case " $(echo $own) " in
      *" sfn_lock "*) ;;
      *) say "the repository's crates were not found; nothing saved"; exit 0 ;;
    esac
    if python3 - "$debug" "$partial" "$own" <<'EOF'; then
import os, shutil, sys
debug, partial, own = sys.argv[1], sys.argv[2], set(sys.argv[3].split())

def ours(entry):
    # deps/: NAME-HASH[.ext] and libNAME-HASH.{rlib,rmeta,so}; .fingerprint/
    # and build/: PACKAGE-HASH. A name may itself hold dashes.
    stem = entry[3:] if entry.startswith("lib") else entry
    return stem.rsplit("-", 1)[0] in own or entry.rsplit("-", 1)[0] in own

for part in ("deps", ".fingerprint", "build"):
    source = os.path.join(debug, part)
    if not os.path.isdir(source):
        continue
    os.makedirs(os.path.join(partial, part))
    for entry in os.listdir(source):
        if ours(entry):
            continue
        src, dst = os.path.join(source, entry), os.path.join(partial, part, entry)
        try:
            if os.path.isdir(src) and not os.path.islink(src):
                shutil.copytree(src, dst, symlinks=True)
            else:
                shutil.copy2(src, dst, follow_symlinks=False)
        except FileNotFoundError:
            # A compiler's temporary file, gone between listing and copying
            # (the local stack may be building the binaries meanwhile).
            shutil.rmtree(dst, ignore_errors=True)
EOF
      touch "$partial/.complete"
      for old in "$cache"/debug-*; do
        [ "$old" = "$partial" ] || rm -rf "$old"
      done
      mv "$partial" "$snapshot"
      say "compiled dependencies saved to $snapshot ($(du -sh "$snapshot" | cut -f1)) in $((SECONDS - started)) s"
    else
      rm -rf "$partial"
      say "could not write a snapshot to $cache; the next run compiles every dependency"
    fi
    ;;
  *)
    echo "usage: $0 restore | save" >&2
    exit 2
    ;;
esac
