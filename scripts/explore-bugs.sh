#!/usr/bin/env bash
# Re-introduces, one at a time, each bug an earlier issue fixed
# (tests/explorer-bugs/*.patch) and runs the explorer on that bug's store
# within the budget `make test` gives it: each must be found, and by the
# invariant its patch names. The shrunk trace the explorer prints is shown.
#
#   scripts/local-stack.sh scripts/explore-bugs.sh [ID ...]     (make explore-bugs)
#
# Patches are applied in place (git apply) and always taken back, so the
# library's files they touch must have no uncommitted changes. A patch that
# no longer applies is an error: the list must follow the code.
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${EXPLORE_SECONDS:-30}"
ids=("$@")
if [ ${#ids[@]} -eq 0 ]; then
  shopt -s nullglob
  for patch in tests/explorer-bugs/*.patch; do ids+=("$(basename "$patch" .patch)"); done
  [ ${#ids[@]} -gt 0 ] || { echo "explore-bugs: no patches in tests/explorer-bugs" >&2; exit 2; }
fi
if ! git diff --quiet -- crates/sfn-lock/src; then
  echo "explore-bugs: crates/sfn-lock/src has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
applied=""
take_back() { if [ -n "$applied" ]; then git apply -R "$applied"; applied=""; fi; }
trap take_back EXIT INT TERM
missed=0
known=0
for id in "${ids[@]}"; do
  patch="tests/explorer-bugs/$id.patch"
  store=$(sed -n 's/^Store: *//p' "$patch" | head -1)
  caught_by=$(sed -n 's/^Caught by: *//p' "$patch" | head -1)
  also=$(sed -n 's/^Also caught by: *//p' "$patch" | head -1)
  git apply --check "$patch" || { echo "explore-bugs: $id no longer applies" >&2; exit 2; }
  git apply "$patch"
  applied="$patch"
  echo "== $id: $(sed -n 's/^Bug: *//p' "$patch" | head -1)"
  log=$(mktemp)
  started=$(date +%s)
  if EXPLORE_STORE="$store" EXPLORE_SECONDS="$budget" \
       cargo test -q --workspace --features sfn-lock/test-util --test explore -- --test-threads 1 >"$log" 2>&1; then
    echo "   MISSED: the explorer found nothing on $store in ${budget} s"
    missed=$((missed + 1))
    # A bug the explorer is known to miss at this budget must still be
    # caught by the test its patch names (`Also caught by:`), or it counts.
    if [ -n "$also" ]; then
      cargo test -q --workspace --features sfn-lock/test-util --test suite -- "$also" >"$log" 2>&1 || true
      if ! grep "^test result: FAILED" "$log" >/dev/null; then
        echo "   and '$also' did not fail with the bug in: nothing catches it"
      else
        echo "   caught by '$also' instead (the explorer misses it at this budget)"
        missed=$((missed - 1))
        known=$((known + 1))
      fi
    fi
  # (no `grep -q` or `head` in these pipelines: an early exit is a SIGPIPE,
  # which pipefail turns into a failure)
  elif grep -A1 "panicked at" "$log" | grep -E "^($caught_by):" >/dev/null; then
    echo "   found in $(( $(date +%s) - started )) s (build included), by '$caught_by':"
    sed -n '/panicked at/,/^stack backtrace\|^note:/p' "$log" | sed '1d;$d' | sed 's/^/   /'
  else
    echo "   MISSED: the run failed, but not on '$caught_by':"
    sed -n '/panicked at/,/^stack backtrace\|^note:/p' "$log" | sed -n '1,40s/^/   /p'
    missed=$((missed + 1))
  fi
  rm -f "$log"
  take_back
done
if [ "$missed" -gt 0 ]; then
  echo "explore-bugs: $missed of ${#ids[@]} re-introduced bug(s) missed" >&2
  exit 1
fi
echo "explore-bugs: every one of ${#ids[@]} re-introduced bug(s) found ($known by the contract test its patch names)"
