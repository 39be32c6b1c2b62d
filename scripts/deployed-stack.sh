#!/usr/bin/env bash
# Runs a command with ministack (a local AWS, tests/requirements-deploy-tier.txt)
# up, then takes it down: the deployed tier's emulator, into which
# tests/deployed/deploy.py packages and deploys template.yaml unmodified.
#
#   scripts/deployed-stack.sh COMMAND [ARGS...]
#
# ministack listens on a free 127.0.0.1 port, in its own process group (the
# function processes it starts are its children: stopping the group stops
# them), with a private TMPDIR and data directories. AWS_ENDPOINT_URL is
# exported into its own environment too: the Lambda functions run as its
# child processes and inherit it, so every SDK call of the binaries goes back
# to the emulator.
# COMMAND sees:
#   AWS_ENDPOINT_URL            the emulator (every service), plus fake
#                               credentials and AWS_REGION
#   SFN_LOCK_DEPLOYED_LOGS      the run's directory: ministack.log (the
#                               emulator and the functions' output), package/
#                               (kept a day; the emulator's data is removed on
#                               exit unless SFN_LOCK_DEPLOYED_KEEP=1)
#   SFN_LOCK_MINISTACK_PID      the emulator's pid (its process group's id)
#   SFN_LOCK_IAM_CALLS          with SFN_LOCK_DEPLOYED_AUTH=true: the JSON
#                               lines of the functions' IAM decisions
# Needs `make tools` first (.venv-ministack).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-ministack"
if [ ! -x "$venv/bin/ministack" ]; then
  echo "deployed-stack: $venv lacks ministack; run 'make tools' first" >&2
  exit 1
fi

mkdir -p "$root/target/deployed-stack"
find "$root/target/deployed-stack" -mindepth 1 -maxdepth 1 -type d -name 'run.*' -mmin +1440 \
  -exec rm -rf {} + 2>/dev/null || true
logs=$(mktemp -d "$root/target/deployed-stack/run.XXXXXX")
mkdir -p "$logs/tmp" "$logs/s3" "$logs/state"

export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
# Nothing from the developer's own AWS configuration.
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_SESSION_TOKEN

# SFN_LOCK_DEPLOYED_AUTH=true: ministack's IAM evaluation on (AUTH=true), so
# each function runs under a session of its own execution role and every call
# the binaries make is checked against the template's policies; started
# through tests/deployed/iam_recorder.py, which writes each decision for a
# role to $logs/iam-calls.jsonl (ministack logs none). The `test` key above
# stays the account root: the tests and the deploy are not limited.
# With IAM on, TLS too (USE_SSL): the template's LockBucketPolicy denies every
# request without aws:SecureTransport, which ministack then evaluates for the
# functions' roles. A certificate of this run's own for 127.0.0.1, trusted
# through SSL_CERT_FILE (the binaries' rustls-native-certs, Python's ssl) and
# AWS_CA_BUNDLE (boto3); the function processes inherit both.
launch=("$venv/bin/ministack")
scheme=http
if [ "${SFN_LOCK_DEPLOYED_AUTH:-}" = true ]; then
  export SFN_LOCK_IAM_CALLS="$logs/iam-calls.jsonl"
  launch=("$venv/bin/python" "$root/tests/deployed/iam_recorder.py")
  scheme=https
  mkdir -p "$logs/tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE \
    -keyout "$logs/tls/key.pem" -out "$logs/tls/cert.pem" 2>/dev/null
  export USE_SSL=1 MINISTACK_SSL_CERT="$logs/tls/cert.pem" MINISTACK_SSL_KEY="$logs/tls/key.pem"
  export SSL_CERT_FILE="$logs/tls/cert.pem" AWS_CA_BUNDLE="$logs/tls/cert.pem"
fi

ministack_pid=
stop_stack() {
  if [ -n "$ministack_pid" ]; then
    kill -CONT -- "-$ministack_pid" 2>/dev/null || true
    kill -TERM -- "-$ministack_pid" 2>/dev/null || true
    # The group's stragglers (a function process that ignores TERM) after 5 s.
    for _ in $(seq 50); do
      kill -0 -- "-$ministack_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$ministack_pid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  # The emulator's data (the function zips in its S3, each function's
  # unpacked code) is 150 MB a run: gone with the run; the log and the
  # packaged template stay a day. SFN_LOCK_DEPLOYED_KEEP=1 keeps it all.
  if [ "${SFN_LOCK_DEPLOYED_KEEP:-}" != 1 ]; then
    rm -rf "$logs/tmp" "$logs/s3" "$logs/state"
  fi
}
trap stop_stack EXIT INT TERM

# ministack takes its port as given (GATEWAY_PORT) and refuses a taken one
# (it probes first and exits): on a lost race, pick another and try again.
for attempt in 1 2 3; do
  port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export AWS_ENDPOINT_URL="$scheme://127.0.0.1:$port"
  # BIND_HOST: 127.0.0.1 only (its default is every interface). MINISTACK_HOST:
  # the host in the URLs it hands out (queue URLs, ...); "localhost" may
  # resolve to ::1, where nothing listens. LAMBDA_EXECUTOR=local: functions
  # run as host processes (no Docker here). S3_DATA_DIR, STATE_DIR and TMPDIR:
  # this run's own, so two runs never share files.
  GATEWAY_PORT=$port BIND_HOST=127.0.0.1 MINISTACK_HOST=127.0.0.1 \
    LAMBDA_EXECUTOR=local TMPDIR="$logs/tmp" S3_DATA_DIR="$logs/s3" STATE_DIR="$logs/state" \
    setsid "${launch[@]}" >"$logs/ministack.log" 2>&1 &
  ministack_pid=$!
  if "$venv/bin/python" - "$AWS_ENDPOINT_URL" "$ministack_pid" "$logs/ministack.log" <<'PY'
import os, sys, time, urllib.request
url, pid, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(3)
    # Its own readiness route, not just a listening socket.
    try:
        with urllib.request.urlopen(f"{url}/_ministack/health", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"deployed-stack: ministack did not answer on {url} within 120 s; see {log}")
PY
  then
    break
  else
    status=$?
    if [ "$status" -ne 3 ] || [ "$attempt" -eq 3 ]; then
      echo "deployed-stack: ministack did not start; see $logs/ministack.log" >&2
      tail -20 "$logs/ministack.log" >&2 || true
      exit 1
    fi
    wait "$ministack_pid" 2>/dev/null || true
    ministack_pid=
  fi
done

export SFN_LOCK_DEPLOYED_LOGS="$logs" SFN_LOCK_MINISTACK_PID="$ministack_pid"
echo "deployed-stack: ministack at $AWS_ENDPOINT_URL (logs in $logs)" >&2
"$@"
