#!/usr/bin/env bash
# Runs a command with sfn-lock's local stack up, then takes the stack down.
#
#   scripts/local-stack.sh COMMAND [ARGS...]
#
# The stack: the atomic moto server (tests/support/dynamodb_server.py) as the
# DynamoDB endpoint, the lock table created as template.yaml creates it, a
# Step Functions endpoint for task tokens in front of it
# (tests/support/sfn_endpoint.py), and `cargo lambda watch` serving the real
# acquire-lock / release-lock binaries over the Lambda Runtime and Invoke APIs.
# All listen on free 127.0.0.1 ports.
# COMMAND sees:
#   AWS_ENDPOINT_URL_DYNAMODB  the DynamoDB endpoint (plus fake credentials, AWS_REGION);
#                              AWS_ENDPOINT_URL_SQS names the same moto server
#   AWS_ENDPOINT_URL_SFN       the local Step Functions endpoint (tests/support/sfn_endpoint.py):
#                              task tokens itself, every other call forwarded to moto
#   SFN_LOCK_SFN_ENDPOINT      the same URL, for tests (its /_local/ routes mint tokens, ...)
#   SFN_LOCK_CLEANUP_QUEUE_URL the queue the sweep sends early events back to
#   SFN_LOCK_TABLE             the lock table
#   SFN_LOCK_BUCKET            a bucket for the S3 store (AWS_ENDPOINT_URL_S3 and _SSM name moto too)
#   SFN_LOCK_STORE_URL         the store the functions use (LOCK_STORE_URL): set it before
#                              the call to run them on another store, e.g.
#                              SFN_LOCK_STORE_URL=s3://sfn-lock-test/e2e/ or ssm:///sfn-lock/e2e;
#                              the default is dynamodb://$SFN_LOCK_TABLE
#   SFN_LOCK_LAMBDA_URL        the Invoke API: POST $SFN_LOCK_LAMBDA_URL/2015-03-31/functions/<name>/invocations
#   SFN_LOCK_LAMBDA_LOG        what the functions log (JSON lines, AWS_LAMBDA_LOG_FORMAT=JSON)
#   SFN_LOCK_DYNAMODB_PID      the DynamoDB server's pid (fault tests pause it with SIGSTOP)
# Needs `make tools` first (the .venv with moto and cargo-lambda).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
# Each stack logs to its own directory: two stacks at once (a developer's and a
# test's) must not truncate each other's function log, which tests read.
mkdir -p "$root/target/local-stack"
find "$root/target/local-stack" -mindepth 1 -maxdepth 1 -type d -name 'run.*' -mmin +1440 \
  -exec rm -rf {} + 2>/dev/null || true
logs=$(mktemp -d "$root/target/local-stack/run.XXXXXX")

if [ ! -x "$venv/bin/moto_server" ] || [ ! -x "$venv/bin/cargo-lambda" ]; then
  echo "local-stack: $venv lacks moto or cargo-lambda; run 'make tools' first" >&2
  exit 1
fi

free_port() {
  "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to 120 s for a TCP listener; fails loudly, never skips.
wait_for_port() {
  "$venv/bin/python" - "$1" "$2" "$3" <<'PY'
import socket, sys, time
port, name, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(f"local-stack: {name} did not listen on 127.0.0.1:{port} within 120 s; see {log}")
PY
}

# Waits up to 120 s for a server started with port 0 to write its port.
wait_for_port_file() {
  local file=$1 pid=$2 name=$3 log=$4
  for _ in $(seq 600); do
    [ -s "$file" ] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "local-stack: $name exited before listening; see $log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "local-stack: $name did not listen within 120 s; see $log" >&2
  exit 1
}

pids=()
stop_stack() {
  for pid in "${pids[@]}"; do
    kill -CONT -- "-$pid" 2>/dev/null || true
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap stop_stack EXIT INT TERM

export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export SFN_LOCK_TABLE="${SFN_LOCK_TABLE:-sfn-locks}"

# The server binds a port of the system's choosing and writes it to a file.
port_file=$(mktemp "$logs/dynamodb-port.XXXXXX")
rm -f "$port_file"
setsid "$venv/bin/python" "$root/tests/support/dynamodb_server.py" "$port_file" \
  >"$logs/dynamodb.log" 2>&1 &
export SFN_LOCK_DYNAMODB_PID=$!
pids+=("$SFN_LOCK_DYNAMODB_PID")
wait_for_port_file "$port_file" "$SFN_LOCK_DYNAMODB_PID" "DynamoDB (moto)" "$logs/dynamodb.log"
dynamodb_port=$(cat "$port_file")
rm -f "$port_file"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port"
# The sweep re-queues early events on the same moto; the S3 and SSM stores live there too.
export AWS_ENDPOINT_URL_SQS="$AWS_ENDPOINT_URL_DYNAMODB"
export AWS_ENDPOINT_URL_S3="$AWS_ENDPOINT_URL_DYNAMODB" AWS_ENDPOINT_URL_SSM="$AWS_ENDPOINT_URL_DYNAMODB"
export SFN_LOCK_BUCKET="${SFN_LOCK_BUCKET:-sfn-lock-test}"
export SFN_LOCK_STORE_URL="${SFN_LOCK_STORE_URL:-dynamodb://$SFN_LOCK_TABLE}"

# Step Functions: the queue's task tokens (SendTaskSuccess, ...) are served by
# sfn_endpoint.py, which passes everything else (DescribeExecution, ...) to moto.
port_file=$(mktemp "$logs/sfn-port.XXXXXX")
rm -f "$port_file"
setsid "$venv/bin/python" "$root/tests/support/sfn_endpoint.py" "$port_file" "$AWS_ENDPOINT_URL_DYNAMODB" \
  >"$logs/sfn.log" 2>&1 &
sfn_pid=$!
pids+=("$sfn_pid")
wait_for_port_file "$port_file" "$sfn_pid" "Step Functions endpoint" "$logs/sfn.log"
export AWS_ENDPOINT_URL_SFN="http://127.0.0.1:$(cat "$port_file")"
export SFN_LOCK_SFN_ENDPOINT="$AWS_ENDPOINT_URL_SFN"
rm -f "$port_file"
"$venv/bin/python" "$root/tests/support/create_table.py" "$SFN_LOCK_TABLE" >/dev/null
SFN_LOCK_CLEANUP_QUEUE_URL=$("$venv/bin/python" -c 'import boto3; print(boto3.client("sqs").create_queue(QueueName="sfn-lock-cleanup")["QueueUrl"])')
"$venv/bin/python" -c 'import boto3, sys; boto3.client("s3").create_bucket(Bucket=sys.argv[1])' "$SFN_LOCK_BUCKET"
export SFN_LOCK_CLEANUP_QUEUE_URL

# Build first, so the first invoke does not wait on a compile. The features
# `make test`'s cargo test uses (sfn-lock's test-util, crates/sfn-lock/Cargo.toml),
# here and for watch's `cargo run`: one build of every dependency, not two.
cargo build --quiet --workspace --bins --features sfn-lock/test-util --manifest-path "$root/Cargo.toml"

lambda_port=$(free_port)
export SFN_LOCK_LAMBDA_URL="http://127.0.0.1:$lambda_port"
export SFN_LOCK_LAMBDA_LOG="$logs/lambda.log"
(
  cd "$root"
  # The sweep serves the state machines tests/common/sfn.rs creates on moto.
  machines="arn:aws:states:$AWS_REGION:123456789012:stateMachine"
  LOCK_STORE_URL="$SFN_LOCK_STORE_URL" AWS_LAMBDA_LOG_FORMAT=JSON \
    SWEPT_STATE_MACHINE_ARNS="$machines:sfn-lock-locked,$machines:sfn-lock-attached,$machines:sfn-lock-skip-if-running,$machines:sfn-lock-queued" \
    ATTACHED_STATE_MACHINE_ARN="$machines:sfn-lock-attached" \
    TARGET_STATE_MACHINE_ARN="$machines:sfn-lock-target" \
    SWEEP_GRACE_SECONDS=600 CLEANUP_QUEUE_URL="$SFN_LOCK_CLEANUP_QUEUE_URL" \
    exec setsid "$venv/bin/cargo-lambda" lambda watch --ignore-changes --concurrency 8 --features sfn-lock/test-util \
    --invoke-address 127.0.0.1 --invoke-port "$lambda_port"
) >"$logs/lambda.log" 2>&1 &
lambda_pid=$!
pids+=("$lambda_pid")
wait_for_port "$lambda_port" "cargo lambda watch" "$logs/lambda.log"
# cargo lambda watch takes its port as given: had another process bound it
# first, watch would have exited, and the listener found would not be it.
if ! kill -0 "$lambda_pid" 2>/dev/null; then
  echo "local-stack: cargo lambda watch exited (port $lambda_port taken?); see $logs/lambda.log" >&2
  exit 1
fi

echo "local-stack: DynamoDB at $AWS_ENDPOINT_URL_DYNAMODB, Step Functions at $AWS_ENDPOINT_URL_SFN, Lambda at $SFN_LOCK_LAMBDA_URL, locks in $SFN_LOCK_STORE_URL (logs in $logs)" >&2
"$@"
