"""The skip-if-running schedule starts runs on time, or not at all.

EventBridge Scheduler retries a start that failed (a throttled or failed
StartExecution) for up to 24 hours and 185 attempts by default. For a job that
skips while its previous run holds the lock, a start hours late is a surprise
run at the wrong time, so the schedule must bound its retries
(RetryPolicy.MaximumEventAgeInSeconds at most MAX_EVENT_AGE_SECONDS), and it
must hand the run its scheduled time (the context attribute
<aws.scheduler.scheduled-time> in the input), which a workload uses as its
idempotency key: a start retried after the first landed (its answer lost)
starts a second execution of the same scheduled time.

Rules
    schedule-retry      RetryPolicy with MaximumEventAgeInSeconds <= MAX_EVENT_AGE_SECONDS
                        and MaximumRetryAttempts set
    schedule-input      Input is a JSON object with scheduledTime = <aws.scheduler.scheduled-time>
    schedule-target     the target is SkipIfRunningStateMachine, through a role that may
                        only states:StartExecution that state machine
    schedule-group      the schedule is in a schedule group of its own (Scheduler's metrics,
                        InvocationDroppedCount among them, are per group: in the
                        account's default group they would mix with other schedules)

The reconciler's schedule (ReconcilerSchedule, parameter ReconcileSchedule) invokes
the sweep function with the reconciler's fixed input; a run missed is caught by the
next, so its retries end within one default period.
    reconcile-target    the target is ReleaseExecutionLocksFunction, through a role that may
                        only lambda:InvokeFunction that function, assumed by
                        scheduler.amazonaws.com of this account only
    reconcile-input     Input is exactly {"sfnLockReconcile": {}} (the reconciler's RECONCILE_KEY)
    reconcile-retry     RetryPolicy with MaximumEventAgeInSeconds <= RECONCILE_MAX_EVENT_AGE_SECONDS
                        and MaximumRetryAttempts set
    reconcile-switch    the schedule, its group and role hang on HasReconcileSchedule, which
                        is ReconcileSchedule not empty (empty: off); the default is rate(5 minutes)
    reconcile-group     a schedule group of its own

Usage: schedule.py template.yaml | schedule.py --self-test
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Callable

from cfn_template import load

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE, ROLE, TARGET = "SkipIfRunningSchedule", "SkipIfRunningScheduleRole", "SkipIfRunningStateMachine"
GROUP = "SkipIfRunningScheduleGroup"
MAX_EVENT_AGE_SECONDS = 3600
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
RECONCILER, RECONCILER_ROLE, RECONCILER_GROUP = "ReconcilerSchedule", "ReconcilerScheduleRole", "ReconcilerScheduleGroup"
SWEEP_FUNCTION = "ReleaseExecutionLocksFunction"
RECONCILE_PARAMETER, RECONCILE_CONDITION = "ReconcileSchedule", "HasReconcileSchedule"
RECONCILE_INPUT = {"sfnLockReconcile": {}}
RECONCILE_MAX_EVENT_AGE_SECONDS = 300


def reconciler_problems(template: dict[str, Any]) -> list[str]:
    resources = template.get("Resources", {})
    schedule = resources.get(RECONCILER)
    if schedule is None:
        return [f"reconcile-target: no {RECONCILER} resource"]
    found = []
    target = schedule.get("Properties", {}).get("Target", {})
    if target.get("Arn") != {"Fn::GetAtt": [SWEEP_FUNCTION, "Arn"]}:
        found.append(f"reconcile-target: the target is {target.get('Arn')!r}, not {SWEEP_FUNCTION}")
    if target.get("RoleArn") != {"Fn::GetAtt": [RECONCILER_ROLE, "Arn"]}:
        found.append(f"reconcile-target: the role is {target.get('RoleArn')!r}, not {RECONCILER_ROLE}")
    role = resources.get(RECONCILER_ROLE, {}).get("Properties", {})
    statements = [statement for policy in role.get("Policies", [])
                  for statement in policy.get("PolicyDocument", {}).get("Statement", [])]
    allowed = [(st.get("Effect"), st.get("Action"), st.get("Resource")) for st in statements]
    if allowed != [("Allow", "lambda:InvokeFunction", {"Fn::GetAtt": [SWEEP_FUNCTION, "Arn"]})]:
        found.append(f"reconcile-target: {RECONCILER_ROLE} allows {allowed}, not only lambda:InvokeFunction "
                     f"on {SWEEP_FUNCTION}")
    if role.get("ManagedPolicyArns"):
        found.append(f"reconcile-target: {RECONCILER_ROLE} has managed policies")
    trust = role.get("AssumeRolePolicyDocument", {}).get("Statement", [])
    if [(st.get("Principal"), st.get("Condition")) for st in trust] != [
            ({"Service": "scheduler.amazonaws.com"}, {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}})]:
        found.append(f"reconcile-target: {RECONCILER_ROLE} is not assumed by scheduler.amazonaws.com of this "
                     "account only")
    try:
        body = json.loads(target.get("Input", ""))
    except (TypeError, json.JSONDecodeError):
        body = None
    if body != RECONCILE_INPUT:
        found.append(f"reconcile-input: Input {target.get('Input')!r} is not {json.dumps(RECONCILE_INPUT)}")
    retry = target.get("RetryPolicy", {})
    age = retry.get("MaximumEventAgeInSeconds")
    if not isinstance(age, int) or not 60 <= age <= RECONCILE_MAX_EVENT_AGE_SECONDS:
        found.append(f"reconcile-retry: MaximumEventAgeInSeconds is {age!r}, not 60..{RECONCILE_MAX_EVENT_AGE_SECONDS}")
    if not isinstance(retry.get("MaximumRetryAttempts"), int):
        found.append("reconcile-retry: MaximumRetryAttempts is not set (Scheduler's default is 185)")
    if schedule.get("Properties", {}).get("ScheduleExpression") != {"Ref": RECONCILE_PARAMETER}:
        found.append(f"reconcile-switch: ScheduleExpression is not !Ref {RECONCILE_PARAMETER}")
    parameter = template.get("Parameters", {}).get(RECONCILE_PARAMETER, {})
    if parameter.get("Default") != "rate(5 minutes)":
        found.append(f"reconcile-switch: {RECONCILE_PARAMETER}'s default is {parameter.get('Default')!r}, "
                     "not rate(5 minutes)")
    condition = template.get("Conditions", {}).get(RECONCILE_CONDITION)
    if condition != {"Fn::Not": [{"Fn::Equals": [{"Ref": RECONCILE_PARAMETER}, ""]}]}:
        found.append(f"reconcile-switch: {RECONCILE_CONDITION} is {condition!r}, not {RECONCILE_PARAMETER} not empty")
    for name in (RECONCILER, RECONCILER_ROLE, RECONCILER_GROUP):
        if resources.get(name, {}).get("Condition") != RECONCILE_CONDITION:
            found.append(f"reconcile-switch: {name} does not hang on {RECONCILE_CONDITION}")
    group = schedule.get("Properties", {}).get("GroupName")
    if group != {"Ref": RECONCILER_GROUP} or resources.get(RECONCILER_GROUP, {}).get("Type") != \
            "AWS::Scheduler::ScheduleGroup":
        found.append(f"reconcile-group: GroupName is {group!r}, not !Ref {RECONCILER_GROUP}")
    return found


def problems(template: dict[str, Any]) -> list[str]:
    resources = template.get("Resources", {})
    schedule = resources.get(SCHEDULE)
    if schedule is None:
        return [f"no {SCHEDULE} resource"]
    target = schedule.get("Properties", {}).get("Target", {})
    found = []

    retry = target.get("RetryPolicy", {})
    age = retry.get("MaximumEventAgeInSeconds")
    if not isinstance(age, int) or not 60 <= age <= MAX_EVENT_AGE_SECONDS:
        found.append(f"schedule-retry: MaximumEventAgeInSeconds is {age!r}: a failed start may be retried "
                     f"up to 24 hours late unless it is 60..{MAX_EVENT_AGE_SECONDS}")
    if not isinstance(retry.get("MaximumRetryAttempts"), int):
        found.append("schedule-retry: MaximumRetryAttempts is not set (Scheduler's default is 185)")

    try:
        body = json.loads(target.get("Input", ""))
    except (TypeError, json.JSONDecodeError):
        body = None
    if not isinstance(body, dict) or body.get("scheduledTime") != SCHEDULED_TIME:
        found.append(f"schedule-input: Input {target.get('Input')!r} is not a JSON object with "
                     f"scheduledTime = {SCHEDULED_TIME}")

    if target.get("Arn") != {"Ref": TARGET}:
        found.append(f"schedule-target: the target is {target.get('Arn')!r}, not {TARGET}")
    if target.get("RoleArn") != {"Fn::GetAtt": [ROLE, "Arn"]}:
        found.append(f"schedule-target: the role is {target.get('RoleArn')!r}, not {ROLE}")
    group = schedule.get("Properties", {}).get("GroupName")
    if group != {"Ref": GROUP} or resources.get(GROUP, {}).get("Type") != "AWS::Scheduler::ScheduleGroup":
        found.append(f"schedule-group: GroupName is {group!r}, not !Ref {GROUP} (an AWS::Scheduler::ScheduleGroup)")
    statements = [statement
                  for policy in resources.get(ROLE, {}).get("Properties", {}).get("Policies", [])
                  for statement in policy.get("PolicyDocument", {}).get("Statement", [])]
    allowed = [(statement.get("Action"), statement.get("Resource")) for statement in statements]
    if allowed != [("states:StartExecution", {"Ref": TARGET})]:
        found.append(f"schedule-target: {ROLE} allows {allowed}, not only states:StartExecution on {TARGET}")
    return found + reconciler_problems(template)


def self_test(template: dict[str, Any]) -> int:
    def target(change: Callable[[dict], None]) -> Callable[[dict], None]:
        return lambda t: change(t["Resources"][SCHEDULE]["Properties"]["Target"])

    def reconciler(change: Callable[[dict], None]) -> Callable[[dict], None]:
        return lambda t: change(t["Resources"][RECONCILER]["Properties"]["Target"])

    def add_statement(t: dict) -> None:
        t["Resources"][ROLE]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
            {"Effect": "Allow", "Action": "states:StopExecution", "Resource": {"Ref": TARGET}})

    cases = [
        ("no retry policy", target(lambda t: t.pop("RetryPolicy", None))),
        ("a day of retries", target(lambda t: t["RetryPolicy"].update(MaximumEventAgeInSeconds=86400))),
        ("no retry attempts bound", target(lambda t: t["RetryPolicy"].pop("MaximumRetryAttempts"))),
        ("an empty input", target(lambda t: t.update(Input="{}"))),
        ("an input that is not JSON", target(lambda t: t.update(Input=SCHEDULED_TIME))),
        ("another target", target(lambda t: t.update(Arn={"Ref": "LockedWorkflowStateMachine"}))),
        ("a wider role", add_statement),
        ("the default group", lambda t: t["Resources"][SCHEDULE]["Properties"].pop("GroupName")),
        ("the reconciler invoking another function", reconciler(lambda t: t.update(
            Arn={"Fn::GetAtt": ["AcquireLockFunction", "Arn"]}))),
        ("the reconciler's input a sweep event", reconciler(lambda t: t.update(Input='{"Records": []}'))),
        ("the reconciler retried for a day", reconciler(lambda t: t["RetryPolicy"].update(
            MaximumEventAgeInSeconds=86400))),
        ("the reconciler's role invoking every function", lambda t: t["Resources"][RECONCILER_ROLE]["Properties"][
            "Policies"][0]["PolicyDocument"]["Statement"][0].update(Resource="*")),
        ("the reconciler's role assumable by any service", lambda t: t["Resources"][RECONCILER_ROLE]["Properties"][
            "AssumeRolePolicyDocument"]["Statement"][0].update(Principal={"Service": "lambda.amazonaws.com"})),
        ("the reconciler always on", lambda t: t["Resources"][RECONCILER].pop("Condition")),
        ("the reconciler off by default", lambda t: t["Parameters"][RECONCILE_PARAMETER].update(Default="")),
    ]
    failures = 0
    if problems(template):
        print(f"FAIL the shipped template is rejected: {problems(template)}")
        failures += 1
    for label, change in cases:
        broken = copy.deepcopy(template)
        change(broken)
        found = problems(broken)
        print(f"{'ok  ' if found else 'FAIL'} schedule rejects {label}: {found[:1] or 'accepted'}")
        failures += not found
    print(f"schedule self-test: {len(cases) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test(load(ROOT / "template.yaml"))
    if len(argv) != 1:
        print(__doc__)
        return 2
    found = problems(load(Path(argv[0])))
    for problem in found:
        print(f"schedule: {problem}")
    print(f"schedule: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
