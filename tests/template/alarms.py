"""The template's alarms, metric filters and dashboard against the metrics the code emits.

The lock functions write CloudWatch EMF lines: each metric with its unit, each
record to the dimension sets [["LockName"], []], in the namespace METRICS_NAMESPACE.
The facts come from contract/code-facts.json (section "metrics", and "environment"
for the variables each function reads), which a Rust unit test keeps equal to the
code's METRICS list and namespace rule (crates/sfn-lock/src/lambda/contract_facts.rs); so a
metric renamed in the code and not in the template (or the reverse) fails here. It holds:

namespace     the three lock functions have the same METRICS_NAMESPACE, it names the
              stack (${AWS::StackName}: two stacks' dimensionless metrics must not
              merge), and with the longest stack name (128) it keeps the code's
              rule (the facts' namespace_rule: length, characters, reserved prefix);
              each function's METRICS_LOCK_NAME_DIMENSION follows the
              MetricsPerLockName parameter (on/off); the code reads both variables.
filters       every state machine whose definition has the Succeed state
              Succeed And Leave Lock To Cleanup logs at Level ALL (which logs each
              state entered) to a log group with a metric filter, deployed whenever
              that group is, that counts {$.type = "SucceedStateEntered" &&
              $.details.name = "<that state>"} as 1 of LeftLockToCleanup (Count) in
              the functions' namespace; no such metric is a name the code emits.
alarms        each alarm exists only with the Alarms condition; one watches each of
              SweepReleases, HeldByOther, LeftLockToCleanup, AcquireErrors and the
              cleanup dead-letter queue. In the functions' namespace: a metric the
              code emits (or a filter's), without dimensions (the set every record
              also goes to), Unit (if any) the code's, Sum over 60 or 300 s, > 0,
              missing data not breaching. In AWS/SQS: ApproximateNumberOfMessagesVisible
              of CleanupDeadLetterQueue (its QueueName), Maximum. No other namespace.
              With AlarmTopicArn set, AlarmActions and OKActions are exactly that
              topic; with it empty, no actions.
dashboard     DashboardBody is JSON (after !Sub); every metric of a metric widget is
              in the functions' namespace (one the code or a filter emits, with no
              dimension or LockName) or AWS/SQS of the dead-letter queue; percentile
              statistics only on Milliseconds metrics; region ${AWS::Region}; it
              shows WaitTime p50 and p99, Contended, Granted, Released, HeldByOther,
              SweepReleases and QueueLength.

Usage: alarms.py template.yaml | alarms.py --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, as_text, intrinsic, load, specialize  # noqa: E402
import code_facts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ("AcquireLockFunction", "ReleaseLockFunction", "ReleaseExecutionLocksFunction")
NAMESPACE_ENV = "METRICS_NAMESPACE"
DIMENSION_ENV = "METRICS_LOCK_NAME_DIMENSION"
DIMENSION_SWITCH = {"Fn::If": ["PerLockNameMetrics", "on", "off"]}
ALARMS_CONDITION, TOPIC_CONDITION, TOPIC_PARAMETER = "HasAlarms", "HasAlarmTopic", "AlarmTopicArn"
LEFT_STATE = "Succeed And Leave Lock To Cleanup"
FILTER_METRIC = "LeftLockToCleanup"
DLQ = "CleanupDeadLetterQueue"
DLQ_METRIC = ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
# What issue 14 asks the alarms to watch (the dead-letter queue besides).
ALARMED = ("SweepReleases", "HeldByOther", FILTER_METRIC, "AcquireErrors")
# What the dashboard must show: (metric, statistic or None for any).
DASHBOARD = (("WaitTime", "p50"), ("WaitTime", "p99"), ("Contended", None), ("Granted", None),
             ("Released", None), ("HeldByOther", None), ("SweepReleases", None), ("QueueLength", None))
LONGEST_STACK_NAME = "s" + "-" * 127
SAMPLE_TOPIC = "arn:aws:sns:us-east-1:123456789012:locks"

Problem = tuple[str, str]  # (rule, message)


# -- the code -----------------------------------------------------------------------------
def code_metrics(facts: dict) -> tuple[dict[str, str], str]:
    """{metric name: unit} the code emits, and its lock-name dimension."""
    metrics = dict(code_facts.get(facts, "metrics", "units"))
    if not metrics:
        raise TemplateError(f"{code_facts.FACTS} lists no metric")
    return metrics, code_facts.get(facts, "metrics", "lock_name_dimension")


def valid_namespace(text: str, facts: dict) -> bool:
    """The code's namespace rule, as the facts give it."""
    rule = code_facts.get(facts, "metrics", "namespace_rule")
    return (1 <= len(text) <= rule["max_length"] and all(c in rule["allowed_characters"] for c in text)
            and not text.startswith(rule["reserved_prefix"]))


# -- reading the template -----------------------------------------------------------------
def _text(value: Any) -> str:
    return as_text(value)


def _resources(template: dict, kind: str) -> dict[str, dict]:
    return {name: resource for name, resource in (template.get("Resources", {}) or {}).items()
            if (resource or {}).get("Type") == kind}


def _properties(resource: dict) -> dict:
    return (resource or {}).get("Properties", {}) or {}


# The binary each function runs, as the facts name it.
BINARIES = {"AcquireLockFunction": "acquire-lock", "ReleaseLockFunction": "release-lock",
            "ReleaseExecutionLocksFunction": "release-execution-locks"}


def namespace_problems(template: dict, facts: dict) -> tuple[list[Problem], str | None]:
    found: list[Problem] = []
    if code_facts.get(facts, "metrics", "namespace_env") != NAMESPACE_ENV:
        found.append(("namespace", f"the code reads its namespace from "
                                   f"{code_facts.get(facts, 'metrics', 'namespace_env')}, not {NAMESPACE_ENV}"))
    for function, binary in BINARIES.items():
        read = code_facts.get(facts, "environment", binary)
        for variable in (NAMESPACE_ENV, DIMENSION_ENV):
            if variable not in read:
                found.append(("namespace", f"{function} sets {variable}, which its code never reads "
                                           f"({code_facts.FACTS} environment.{binary})"))
    names = {}
    for function in FUNCTIONS:
        resource = (template.get("Resources", {}) or {}).get(function)
        variables = ((_properties(resource).get("Environment", {}) or {}).get("Variables", {}) or {})
        if NAMESPACE_ENV not in variables:
            found.append(("namespace", f"{function} has no {NAMESPACE_ENV}: its metrics go to the default "
                                       "namespace, shared by every stack"))
            continue
        names[function] = _text(variables[NAMESPACE_ENV])
        # Per-key locks need the LockName dimension off (a custom metric per
        # name and metric): every function follows the MetricsPerLockName switch.
        if variables.get(DIMENSION_ENV) != DIMENSION_SWITCH:
            found.append(("namespace", f"{function}'s {DIMENSION_ENV} is {variables.get(DIMENSION_ENV)!r}, not "
                                       f"{DIMENSION_SWITCH!r}: MetricsPerLockName would not turn it off"))
    if len(set(names.values())) > 1:
        found.append(("namespace", f"the lock functions' {NAMESPACE_ENV} differ: {names}"))
        return found, None
    if not names:
        return found, None
    namespace = next(iter(names.values()))
    if "${AWS::StackName}" not in namespace:
        found.append(("namespace", f"{NAMESPACE_ENV} {namespace!r} does not name the stack (${{AWS::StackName}}): "
                                   "two stacks' dimensionless metrics, and alarms, would merge"))
    sample = namespace.replace("${AWS::StackName}", LONGEST_STACK_NAME)
    if "${" in sample or not valid_namespace(sample, facts):
        found.append(("namespace", f"{NAMESPACE_ENV} {namespace!r} ({sample!r} deployed) breaks the code's "
                                   "namespace rule: every function would refuse its configuration"))
    return found, namespace


def _state_machine_states(resource: dict) -> dict:
    uri = _properties(resource).get("DefinitionUri")
    if not isinstance(uri, str):
        return {}
    text = re.sub(r"\$\{[A-Za-z0-9_]+\}", "0", (ROOT / uri).read_text())  # unquoted numbers
    return json.loads(text).get("States", {})


def filter_problems(template: dict, namespace: str | None, emitted: dict[str, str]) -> tuple[list[Problem], set[str]]:
    """The metric filters that count entries into LEFT_STATE; the metric names filters make."""
    found: list[Problem] = []
    resources = template.get("Resources", {}) or {}
    filters = _resources(template, "AWS::Logs::MetricFilter")
    made: set[str] = set()
    for name, resource in filters.items():
        for transformation in _properties(resource).get("MetricTransformations", []) or []:
            metric = str(transformation.get("MetricName"))
            made.add(metric)
            if metric in emitted:
                found.append(("filters", f"{name} makes {metric}, a name the code emits too ({code_facts.FACTS}): two "
                                         "sources in one metric"))
    for machine, resource in _resources(template, "AWS::Serverless::StateMachine").items():
        state = _state_machine_states(resource).get(LEFT_STATE)
        if not state or state.get("Type") != "Succeed":
            continue
        logging_ = _properties(resource).get("Logging", {}) or {}
        if logging_.get("Level") != "ALL":
            found.append(("filters", f"{machine} logs at Level {logging_.get('Level')!r}, not ALL: its state "
                                     f"entered events, and so entries into {LEFT_STATE}, are not logged"))
        groups = [((destination or {}).get("CloudWatchLogsLogGroup", {}) or {}).get("LogGroupArn")
                  for destination in logging_.get("Destinations", []) or []]
        group = next((g["Fn::GetAtt"][0] if isinstance(g["Fn::GetAtt"], list) else g["Fn::GetAtt"].split(".")[0]
                      for g in groups if intrinsic(g) and intrinsic(g)[0] == "Fn::GetAtt"), None)
        if group is None:
            found.append(("filters", f"{machine} logs to no log group of the template"))
            continue
        counting = []
        for name, metric_filter in filters.items():
            properties = _properties(metric_filter)
            if properties.get("LogGroupName") != {"Ref": group}:
                continue
            pattern = re.sub(r"\s+", " ", str(properties.get("FilterPattern", "")))
            if ('$.type = "SucceedStateEntered"' not in pattern or f'$.details.name = "{LEFT_STATE}"' not in pattern
                    or "||" in pattern):
                continue
            for transformation in properties.get("MetricTransformations", []) or []:
                if (transformation.get("MetricName") == FILTER_METRIC and str(transformation.get("MetricValue")) == "1"
                        and transformation.get("Unit", "Count") == "Count"
                        and namespace is not None and _text(transformation.get("MetricNamespace")) == namespace):
                    counting.append(name)
                    if metric_filter.get("Condition") != (resources.get(group) or {}).get("Condition"):
                        found.append(("filters", f"{name} has Condition {metric_filter.get('Condition')!r}, its log "
                                                 f"group {group} {(resources.get(group) or {}).get('Condition')!r}: "
                                                 "deployed without it, or it without the filter"))
        if not counting:
            found.append(("filters", f"no metric filter on {group} ({machine}'s log group) counts entries into "
                                     f"{LEFT_STATE} as 1 of {FILTER_METRIC} (Count) in the functions' namespace "
                                     f"{namespace!r}"))
    return found, made


def _deployed_actions(template: dict, name: str, topic: str) -> dict[str, Any]:
    parameters = {TOPIC_PARAMETER: topic}
    deployed = specialize({"Conditions": template.get("Conditions", {}),
                           "Resources": {name: copy.deepcopy(template["Resources"][name])}}, parameters)
    properties = _properties(deployed["Resources"][name])
    return {key: properties.get(key) for key in ("AlarmActions", "OKActions", "ActionsEnabled")}


def alarm_problems(template: dict, namespace: str | None, emitted: dict[str, str], made: set[str]) -> list[Problem]:
    found: list[Problem] = []
    watched: set[str] = set()
    for name, resource in _resources(template, "AWS::CloudWatch::Alarm").items():
        properties = _properties(resource)
        if resource.get("Condition") != ALARMS_CONDITION:
            found.append(("alarms", f"{name} has Condition {resource.get('Condition')!r}, not {ALARMS_CONDITION}: "
                                    "Alarms false would not remove it"))
        if "Metrics" in properties or "ExtendedStatistic" in properties:
            found.append(("alarms", f"{name} uses metric math or a percentile: this check knows single-metric "
                                    "Sum/Maximum alarms only"))
            continue
        alarm_namespace, metric = _text(properties.get("Namespace")), properties.get("MetricName")
        dimensions = properties.get("Dimensions", []) or []
        if namespace is not None and alarm_namespace == namespace:
            if metric not in emitted and metric not in made:
                found.append(("alarms", f"{name} watches {metric!r}, not one the code emits ({code_facts.FACTS}: "
                                        f"{sorted(emitted)}) nor a metric filter's ({sorted(made)})"))
            if dimensions:
                found.append(("alarms", f"{name} has dimensions {dimensions}: the alarms watch the dimensionless "
                                        "metric (every lock of the stack)"))
            unit = properties.get("Unit")
            expected_unit = emitted.get(metric, "Count")
            if unit is not None and unit != expected_unit:
                found.append(("alarms", f"{name}'s Unit is {unit!r}, but {metric} is emitted in {expected_unit}: the "
                                        "alarm would find no data"))
            if properties.get("Statistic") != "Sum":
                found.append(("alarms", f"{name}'s Statistic is {properties.get('Statistic')!r}, not Sum"))
            watched.add(str(metric))
        elif alarm_namespace == DLQ_METRIC[0]:
            if metric != DLQ_METRIC[1] or dimensions != [{"Name": "QueueName",
                                                          "Value": {"Fn::GetAtt": [DLQ, "QueueName"]}}]:
                found.append(("alarms", f"{name} watches {alarm_namespace} {metric} {dimensions}, not "
                                        f"{DLQ_METRIC[1]} of {DLQ} (QueueName)"))
            else:
                watched.add(DLQ)
            if properties.get("Statistic") != "Maximum":
                found.append(("alarms", f"{name}'s Statistic is {properties.get('Statistic')!r}, not Maximum"))
        else:
            found.append(("alarms", f"{name} watches namespace {alarm_namespace!r}, neither the functions' "
                                    f"{namespace!r} nor {DLQ_METRIC[0]}"))
            continue
        if properties.get("Period") not in (60, 300):
            found.append(("alarms", f"{name}'s Period is {properties.get('Period')!r}, not 60 or 300"))
        if (properties.get("ComparisonOperator"), properties.get("Threshold")) != ("GreaterThanThreshold", 0):
            found.append(("alarms", f"{name} is {properties.get('ComparisonOperator')} "
                                    f"{properties.get('Threshold')!r}, not GreaterThanThreshold 0: the first "
                                    "occurrence must alarm"))
        if properties.get("TreatMissingData") != "notBreaching":
            found.append(("alarms", f"{name}'s TreatMissingData is {properties.get('TreatMissingData')!r}, not "
                                    "notBreaching (nothing is emitted while nothing happens)"))
        try:
            given = _deployed_actions(template, name, SAMPLE_TOPIC)
            empty = _deployed_actions(template, name, "")
        except TemplateError as error:
            found.append(("alarms", f"{name}: {error}"))
            continue
        for key in ("AlarmActions", "OKActions"):
            if given[key] != [{"Ref": TOPIC_PARAMETER}]:
                found.append(("alarms", f"{name}'s {key} with {TOPIC_PARAMETER} given are {given[key]!r}, not "
                                        f"[!Ref {TOPIC_PARAMETER}]"))
            if empty[key] not in (None, []):
                found.append(("alarms", f"{name}'s {key} with {TOPIC_PARAMETER} empty are {empty[key]!r}, not none"))
        if str(given["ActionsEnabled"]).lower() == "false":
            found.append(("alarms", f"{name} has ActionsEnabled false"))
    for metric in ALARMED + (DLQ,):
        if metric not in watched:
            found.append(("alarms", f"no alarm watches {metric}"))
    return found


def _dashboard_metrics(widget_metrics: list) -> list[tuple[str, str, list[str], dict]]:
    """(namespace, name, dimension names and values, options) of each entry of a widget's
    metrics array; '.' repeats the previous entry's value at that place."""
    rows, previous = [], []
    for entry in widget_metrics:
        options = entry[-1] if entry and isinstance(entry[-1], dict) else {}
        plain = [item for item in entry if not isinstance(item, dict)]
        plain = [previous[i] if item == "." and i < len(previous) else item for i, item in enumerate(plain)]
        previous = plain
        if "expression" in options or len(plain) < 2:
            rows.append(("", "", [], options))
            continue
        rows.append((str(plain[0]), str(plain[1]), [str(item) for item in plain[2:]], options))
    return rows


def dashboard_problems(template: dict, namespace: str | None, emitted: dict[str, str], made: set[str],
                       lock_name: str) -> list[Problem]:
    dashboards = _resources(template, "AWS::CloudWatch::Dashboard")
    if not dashboards:
        return [("dashboard", "no AWS::CloudWatch::Dashboard")]
    found: list[Problem] = []
    shown: set[tuple[str, str | None]] = set()
    for name, resource in dashboards.items():
        body = _properties(resource).get("DashboardBody")
        fn = intrinsic(body)
        text = fn[1] if fn and fn[0] == "Fn::Sub" and isinstance(fn[1], str) else body
        if not isinstance(text, str):
            found.append(("dashboard", f"{name}'s DashboardBody is no !Sub text"))
            continue
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            found.append(("dashboard", f"{name}'s DashboardBody is not JSON: {error}"))
            continue
        for widget in parsed.get("widgets", []):
            if widget.get("type") != "metric":
                continue
            properties = widget.get("properties", {})
            title = properties.get("title", "?")
            if properties.get("region") != "${AWS::Region}":
                found.append(("dashboard", f"widget {title!r}: region {properties.get('region')!r}, not "
                                           "${AWS::Region}"))
            for ns, metric, dims, options in _dashboard_metrics(properties.get("metrics", [])):
                stat = options.get("stat", properties.get("stat"))
                if not ns:
                    found.append(("dashboard", f"widget {title!r}: an expression or incomplete metric, which this "
                                               "check cannot hold to the code"))
                elif namespace is not None and ns == namespace:
                    if metric not in emitted and metric not in made:
                        found.append(("dashboard", f"widget {title!r} shows {metric!r}, not one the code emits "
                                                   f"({code_facts.FACTS}: {sorted(emitted)}) nor a metric filter's"))
                    if dims and dims[0] != lock_name:
                        found.append(("dashboard", f"widget {title!r}: {metric} by {dims[0]!r}, a dimension the "
                                                   f"code does not emit (only {lock_name} or none)"))
                    if isinstance(stat, str) and re.fullmatch(r"p\d+(\.\d+)?", stat) and emitted.get(metric) != \
                            "Milliseconds":
                        found.append(("dashboard", f"widget {title!r}: {stat} of {metric}, a "
                                                   f"{emitted.get(metric, 'Count')} metric"))
                    if not dims:
                        shown.add((metric, stat))
                        shown.add((metric, None))
                elif (ns, metric) == DLQ_METRIC:
                    if dims != ["QueueName", f"${{{DLQ}.QueueName}}"]:
                        found.append(("dashboard", f"widget {title!r}: {metric} of {dims}, not of {DLQ}"))
                else:
                    found.append(("dashboard", f"widget {title!r} shows {ns} {metric}: neither the functions' "
                                               f"namespace {namespace!r} nor the dead-letter queue's depth"))
    for metric, stat in DASHBOARD:
        if (metric, stat) not in shown:
            found.append(("dashboard", f"the dashboard does not show {metric}{' ' + stat if stat else ''} "
                                       "(without dimensions)"))
    return found


def problems(template: dict, facts: dict) -> list[Problem]:
    try:
        emitted, lock_name = code_metrics(facts)
        found, namespace = namespace_problems(template, facts)
    except (TemplateError, code_facts.FactsError) as error:
        return [("code", str(error))]
    filters, made = filter_problems(template, namespace, emitted)
    found += filters
    found += alarm_problems(template, namespace, emitted, made)
    found += dashboard_problems(template, namespace, emitted, made, lock_name)
    return found


# -- self-test --------------------------------------------------------------------------
def _resource(template: dict, name: str) -> dict:
    return template["Resources"][name]


def _props(name: str, change: Callable[[dict], Any]) -> Callable[[dict], None]:
    return lambda template: change(_resource(template, name)["Properties"])


def _dashboard_text(change: Callable[[str], str]) -> Callable[[dict], None]:
    def apply(template: dict) -> None:
        properties = _resource(template, "MonitoringDashboard")["Properties"]
        before = properties["DashboardBody"]["Fn::Sub"]
        after = change(before)
        if after == before:
            raise AssertionError("self-test: the dashboard change changed nothing; update the case")
        properties["DashboardBody"]["Fn::Sub"] = after
    return apply


def _env(function: str, value: Any) -> Callable[[dict], None]:
    return _props(function, lambda p: p["Environment"]["Variables"].update({NAMESPACE_ENV: value}))


def _units(change: Callable[[dict], Any]) -> Callable[[dict], None]:
    return lambda facts: change(facts["metrics"]["units"])


def self_test(template: dict, shipped_facts: dict) -> int:
    failures = 0
    shipped = problems(template, shipped_facts)
    print(f"{'ok  ' if not shipped else 'FAIL'} the shipped template: {shipped or 'no problem'}")
    failures += bool(shipped)

    def every_namespace(value: str) -> Callable[[dict], None]:
        def apply(template: dict) -> None:
            for function in FUNCTIONS:
                _env(function, value)(template)
            for resource in template["Resources"].values():
                properties = resource.get("Properties", {})
                if resource["Type"] == "AWS::CloudWatch::Alarm" and properties.get("Namespace") != "AWS/SQS":
                    properties["Namespace"] = value
                if resource["Type"] == "AWS::Logs::MetricFilter":
                    properties["MetricTransformations"][0]["MetricNamespace"] = value
            _dashboard_text(lambda t: t.replace('"sfn-lock/${AWS::StackName}"', json.dumps(value)))(template)
        return apply

    # (label, change to the template, change to the code's facts, rule, words of the message)
    cases: list[tuple[str, Callable[[dict], None] | None, Callable[[dict], None] | None, str, tuple[str, ...]]] = [
        ("an alarm on a misspelled metric", _props("SweepReleasesAlarm", lambda p: p.update(MetricName="SweepRelease")),
         None, "alarms", ("SweepReleasesAlarm", "'SweepRelease'", "not one the code emits")),
        ("the code renaming HeldByOther", None, _units(lambda u: u.update(HeldByOthers=u.pop("HeldByOther"))),
         "alarms", ("HeldByOtherAlarm", "'HeldByOther'", "not one the code emits")),
        ("the code dropping a metric from METRICS", None, _units(lambda u: u.pop("AcquireErrors")),
         "alarms", ("AcquireErrorsAlarm", "not one the code emits")),
        ("a dashboard widget on a metric the code does not emit",
         _dashboard_text(lambda t: t.replace('"WaitTimeouts", {', '"WaitTimeout", {')), None,
         "dashboard", ("'Contention", "'WaitTimeout'", "not one the code emits")),
        ("a dashboard dimension the code does not emit",
         _dashboard_text(lambda t: t.replace('"Granted", {', '"Granted", "FunctionName", "x", {')), None,
         "dashboard", ("Granted by 'FunctionName'",)),
        ("a dashboard p99 of a Count metric",
         _dashboard_text(lambda t: t.replace('"QueueLength", {"stat": "Maximum"', '"QueueLength", {"stat": "p99"')),
         None, "dashboard", ("p99 of QueueLength", "Count")),
        ("the dashboard without WaitTime p99",
         _dashboard_text(lambda t: t.replace('{"stat": "p99", "label": "p99"}', '{"stat": "p90", "label": "p90"}')),
         None, "dashboard", ("WaitTime p99",)),
        ("the dashboard in a fixed Region",
         _dashboard_text(lambda t: t.replace('"region": "${AWS::Region}", "period": 300, "stat": "Sum",\n',
                                             '"region": "us-east-1", "period": 300, "stat": "Sum",\n', 1)),
         None, "dashboard", ("us-east-1",)),
        ("the dashboard on another queue",
         _dashboard_text(lambda t: t.replace("${CleanupDeadLetterQueue.QueueName}", "${CleanupQueue.QueueName}")),
         None, "dashboard", ("CleanupQueue.QueueName",)),
        ("an alarm in another namespace", _props("AcquireErrorsAlarm", lambda p: p.update(Namespace="sfn-lock")),
         None, "alarms", ("AcquireErrorsAlarm", "'sfn-lock'", "neither")),
        ("the DLQ alarm on the cleanup queue", _props("CleanupDeadLetterQueueAlarm", lambda p: p["Dimensions"][0].update(
            Value={"Fn::GetAtt": ["CleanupQueue", "QueueName"]})), None, "alarms", ("CleanupDeadLetterQueueAlarm",
                                                                                  "not ApproximateNumberOfMessagesVisible")),
        ("no alarm on the dead-letter queue", lambda t: t["Resources"].pop("CleanupDeadLetterQueueAlarm"), None,
         "alarms", ("no alarm watches CleanupDeadLetterQueue",)),
        ("no alarm on HeldByOther", lambda t: t["Resources"].pop("HeldByOtherAlarm"), None,
         "alarms", ("no alarm watches HeldByOther",)),
        ("an alarm without the topic when one is given", _props("HeldByOtherAlarm", lambda p: p.pop("AlarmActions")),
         None, "alarms", ("HeldByOtherAlarm's AlarmActions with AlarmTopicArn given",)),
        ("an alarm always notifying the topic", _props("SweepReleasesAlarm", lambda p: p.update(
            OKActions=[{"Ref": TOPIC_PARAMETER}])), None, "alarms", ("SweepReleasesAlarm's OKActions with AlarmTopicArn empty",)),
        ("an alarm Alarms=false keeps", lambda t: _resource(t, "AcquireErrorsAlarm").pop("Condition"), None,
         "alarms", ("AcquireErrorsAlarm has Condition None",)),
        ("an alarm per lock name", _props("HeldByOtherAlarm", lambda p: p.update(
            Dimensions=[{"Name": "LockName", "Value": "etl"}])), None, "alarms", ("HeldByOtherAlarm has dimensions",)),
        ("an alarm in the wrong unit", _props("SweepReleasesAlarm", lambda p: p.update(Unit="Milliseconds")), None,
         "alarms", ("SweepReleasesAlarm's Unit", "Count")),
        ("an alarm on the average", _props("AcquireErrorsAlarm", lambda p: p.update(Statistic="Average")), None,
         "alarms", ("AcquireErrorsAlarm's Statistic",)),
        ("an alarm at the second occurrence", _props("HeldByOtherAlarm", lambda p: p.update(Threshold=1)), None,
         "alarms", ("HeldByOtherAlarm is GreaterThanThreshold 1",)),
        ("an alarm breaching on silence", _props("SweepReleasesAlarm", lambda p: p.update(TreatMissingData="breaching")),
         None, "alarms", ("SweepReleasesAlarm's TreatMissingData",)),
        ("one function in another namespace", _env("ReleaseLockFunction", {"Fn::Sub": "sfn-lock/${AWS::StackName}/x"}),
         None, "namespace", ("differ",)),
        ("one function without a namespace", _props("AcquireLockFunction", lambda p: p["Environment"]["Variables"].pop(
            NAMESPACE_ENV)), None, "namespace", ("AcquireLockFunction has no",)),
        ("one namespace for every stack", every_namespace("sfn-lock"), None, "namespace", ("does not name the stack",)),
        ("the LockName dimension always on", _props("ReleaseLockFunction", lambda p: p["Environment"]["Variables"]
                                                   .update({DIMENSION_ENV: "on"})),
         None, "namespace", ("ReleaseLockFunction's METRICS_LOCK_NAME_DIMENSION",)),
        ("a namespace under AWS/", every_namespace("AWS/${AWS::StackName}"), None, "namespace", ("namespace rule",)),
        ("no filter on the queued workflow's log group",
         lambda t: t["Resources"].pop("QueuedWorkflowLeftLockToCleanupFilter"), None,
         "filters", ("QueuedWorkflowLogGroup", "QueuedWorkflowStateMachine")),
        ("a filter on another state's name", _props("SkipIfRunningLeftLockToCleanupFilter", lambda p: p.update(
            FilterPattern='{ $.type = "SucceedStateEntered" && $.details.name = "Skipped" }')), None,
         "filters", ("SkipIfRunningLogGroup",)),
        ("a filter on the wrong log group", _props("LockedWorkflowLeftLockToCleanupFilter", lambda p: p.update(
            LogGroupName={"Ref": "SkipIfRunningLogGroup"})), None, "filters", ("LockedWorkflowLogGroup",)),
        ("a filter in another namespace", _props("AttachedWorkflowLeftLockToCleanupFilter", lambda p:
                                                  p["MetricTransformations"][0].update(MetricNamespace="sfn-lock")),
         None, "filters", ("AttachedWorkflowLogGroup",)),
        ("a filter without its log group's condition",
         lambda t: _resource(t, "AttachedWorkflowLeftLockToCleanupFilter").pop("Condition"), None,
         "filters", ("AttachedWorkflowLeftLockToCleanupFilter has Condition None",)),
        ("a state machine logging errors only", _props("LockedWorkflowStateMachine", lambda p: p["Logging"].update(
            Level="ERROR")), None, "filters", ("LockedWorkflowStateMachine logs at Level 'ERROR'",)),
        ("a filter metric the code emits too", None,
         _units(lambda u: u.update(LeftLockToCleanup="Count")), "filters", ("a name the code emits too",)),
        ("the code emitting WaitTime in Count", None, _units(lambda u: u.update(WaitTime="Count")),
         "dashboard", ("p99 of WaitTime", "Count")),
        ("the code no longer reading METRICS_NAMESPACE in release-lock", None,
         lambda f: f["environment"]["release-lock"].remove(NAMESPACE_ENV), "namespace",
         ("ReleaseLockFunction sets METRICS_NAMESPACE, which its code never reads",)),
        ("the code's namespace rule at 100 characters", None,
         lambda f: f["metrics"]["namespace_rule"].update(max_length=100), "namespace", ("namespace rule",)),
        ("the code reading the namespace from another variable", None,
         lambda f: f["metrics"].update(namespace_env="CLOUDWATCH_NAMESPACE"), "namespace", ("CLOUDWATCH_NAMESPACE",)),
    ]
    for label, change, code_change, rule, words in cases:
        broken = copy.deepcopy(template)
        facts = copy.deepcopy(shipped_facts)
        try:
            if change is not None:
                change(broken)
            if code_change is not None:
                code_change(facts)
                if facts == shipped_facts:
                    raise AssertionError("self-test: the facts change changed nothing; update the case")
            found = [p for p in problems(broken, facts) if p not in shipped]
        except (AssertionError, KeyError, IndexError, TemplateError) as error:
            failures += 1
            print(f"FAIL {rule} reports {label}: {error!r}")
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        failures += not hits
        print(f"{'ok  ' if hits else 'FAIL'} {rule} reports {label}: {hits[0] if hits else found}")
    print(f"alarms self-test: {len(cases) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def main() -> int:
    args = sys.argv[1:]
    try:
        facts = code_facts.load()
    except code_facts.FactsError as error:
        print(f"alarms: {error}")
        return 1
    if args == ["--self-test"]:
        return self_test(load(ROOT / "template.yaml"), facts)
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    found = problems(load(Path(args[0])), facts)
    for rule, message in found:
        print(f"alarms: {rule}: {message}")
    emitted, _ = code_metrics(facts)
    print(f"alarms: {len(emitted)} metrics in {code_facts.FACTS}: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
