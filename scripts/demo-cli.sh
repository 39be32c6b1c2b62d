#!/usr/bin/env bash
# `make demo`, last part: the sfn-lock command line on the demo's local stack
# (run under scripts/local-stack.sh): a command run under the lock, a second
# run refused while it holds it, status and list, and `wrap` of a definition.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==> sfn-lock, the command line (building it)" >&2
cargo build -p sfn-lock-cli
export LOCK_STORE_URL="$SFN_LOCK_STORE_URL" PATH="$PWD/target/debug:$PATH"

show() {
  echo
  echo "\$ $*"
  "$@"
}

lock="demo-cli-etl-$$"
# Inside the run: the lock is held, so a second run without waiting gets 111.
show sfn-lock run "$lock" -- sh -c '
  echo "  the command runs under the lock, fencing token $SFN_LOCK_FENCING_TOKEN"
  echo "\$ sfn-lock status $SFN_LOCK_NAME"
  sfn-lock status "$SFN_LOCK_NAME"
  echo "\$ sfn-lock list"
  sfn-lock list
  echo "\$ sfn-lock run -n $SFN_LOCK_NAME -- true   # a second run while it is held"
  sfn-lock run -n "$SFN_LOCK_NAME" -- true || echo "  exit status $? (not obtained)"
'
show sfn-lock status "$lock"
echo
echo "\$ sfn-lock wrap --lock-name nightly-etl tests/e2e/fixtures/wrap-sample.asl.json > locked.asl.json"
wrapped=$(mktemp)
trap 'rm -f "$wrapped"' EXIT
sfn-lock wrap --lock-name nightly-etl tests/e2e/fixtures/wrap-sample.asl.json >"$wrapped"
python3 - "$wrapped" <<'PY'
import json, sys
definition = json.load(open(sys.argv[1]))
states = definition["States"]
branch = states["Run Workload Under Lock"]["Branches"][0]["States"]
print(f"  TimeoutSeconds {definition['TimeoutSeconds']} (the sample's 60 + the wait for the lock + the lock's own states)")
print(f"  lock states: {', '.join(states)}")
print(f"  the sample's states, under the lock: {', '.join(branch)}")
PY
