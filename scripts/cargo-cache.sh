#!/usr/bin/env bash
# The compiled dependencies (every crate that is not one of this repository's
# own), kept outside the clone as scripts/tools.sh keeps the tool installs: a
# second `make test` on the same machine compiles only the repository's crates.
# It is what CI caches such as Swatinem/rust-cache keep.
#
#   scripts/cargo-cache.sh restore   before the first cargo command: copies the
#                                    snapshot into target/debug, if the clone has
#                                    no target/debug yet (a fresh clone, make clean)
#   scripts/cargo-cache.sh save      once the build and clippy have run: writes the
#                                    snapshot, if there is none for this key yet
#
# Keyed by Cargo.lock and the toolchain (rustc -vV). The key only decides
# whether a snapshot is worth copying: which artifact is fresh stays cargo's
# decision, by each unit's fingerprint (a dependency's version, features,
# profile, flags). An artifact built from other inputs is compiled again, never
# used. The repository's own crates are left out of the snapshot: cargo judges
# them by their sources' mtimes, and a fresh clone's sources are all new.
#
# The cache: $SFN_LOCK_CARGO_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sfn-lock/cargo.
# One snapshot is kept: saving one for a new key removes the others.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SFN_LOCK_CARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sfn-lock/cargo}"
key=$({ rustc -vV; cat Cargo.lock; } | sha256sum | cut -c1-16)
snapshot="$cache/debug-$key"
debug=target/debug

case "${1:-}" in
  restore)
    if [ -e "$debug" ]; then
      echo "cargo-cache: $debug exists; nothing restored" >&2
    elif [ -e "$snapshot/.complete" ]; then
      started=$SECONDS
      mkdir -p target
      cp -a "$snapshot" "$debug"
      rm -f "$debug/.complete"
      echo "cargo-cache: compiled dependencies restored from $snapshot in $((SECONDS - started)) s" >&2
    else
      echo "cargo-cache: no snapshot for this Cargo.lock and toolchain yet; the first build compiles every dependency" >&2
    fi
    ;;
  save)
    [ -d "$debug" ] || { echo "cargo-cache: no $debug to save" >&2; exit 1; }
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock 9
    if [ -e "$snapshot/.complete" ]; then
      echo "cargo-cache: snapshot $snapshot exists" >&2
      exit 0
    fi
    started=$SECONDS
    partial="$snapshot.partial.$$"
    rm -rf "$partial"
    # The repository's crates: every package and target name of both workspaces
    # (the bench's own is apart), as cargo names their artifacts.
    own=$(for manifest in Cargo.toml bench/rust/Cargo.toml; do
      cargo metadata --offline --no-deps --format-version 1 --manifest-path "$manifest"
    done | python3 -c '
import json, sys
names = set()
for doc in sys.stdin:
    for package in json.loads(doc)["packages"]:
        names.add(package["name"])
        names.update(target["name"] for target in package["targets"])
print("\n".join(sorted(names | {n.replace("-", "_") for n in names})))')
    python3 - "$debug" "$partial" "$own" <<'EOF'
import os, shutil, sys
debug, partial, own = sys.argv[1], sys.argv[2], set(sys.argv[3].split())

def ours(entry):
    # deps/: NAME-HASH[.ext] and libNAME-HASH.{rlib,rmeta,so}; .fingerprint/
    # and build/: PACKAGE-HASH. A name may itself hold dashes.
    stem = entry[3:] if entry.startswith("lib") else entry
    base = stem.rsplit("-", 1)[0]
    return base in own or entry.rsplit("-", 1)[0] in own

for part in ("deps", ".fingerprint", "build"):
    source = os.path.join(debug, part)
    if not os.path.isdir(source):
        continue
    os.makedirs(os.path.join(partial, part))
    for entry in os.listdir(source):
        if ours(entry):
            continue
        src, dst = os.path.join(source, entry), os.path.join(partial, part, entry)
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
EOF
    touch "$partial/.complete"
    for old in "$cache"/debug-*; do
      [ "$old" = "$partial" ] || rm -rf "$old"
    done
    mv "$partial" "$snapshot"
    echo "cargo-cache: compiled dependencies saved to $snapshot ($(du -sh "$snapshot" | cut -f1)) in $((SECONDS - started)) s" >&2
    ;;
  *)
    echo "usage: $0 restore | save" >&2
    exit 2
    ;;
esac
