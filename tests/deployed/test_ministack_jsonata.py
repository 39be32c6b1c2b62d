"""ministack_jsonata.py: a JSONata Parallel state's Arguments, Output and
Assign, as AWS documents them, on ministack's own Parallel (in process, on
a one-branch Parallel of Pass states; test_jsonata.py shows it deployed).
Seen without the patch: the Arguments, Assign and Catch cases fail (ministack
ignores the three fields); the default output and a JSONPath Parallel are
the same with and without it, as they must be."""

from __future__ import annotations

import pytest
from ministack.services import stepfunctions as sfn

import ministack_jsonata

# One branch that answers its input under "seen".
BRANCH = {"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "Output": "{% {'seen': $states.input} %}",
                                                 "End": True}}}


def run(state: dict, given, variables=None):
    ctx = {"QueryLanguage": "JSONata", "State": {"Name": "P"}, "variables": dict(variables or {}),
           "Execution": {"Id": "arn:aws:states:us-east-1:000000000000:execution:m:e"}}
    execution = {"events": [], "status": "RUNNING"}
    output, transition = sfn._execute_parallel({"Type": "Parallel", "Branches": [BRANCH], **state},
                                               given, execution, ctx)
    return output, transition, ctx["variables"]


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    monkeypatch.setattr(sfn, "_run_parallel_branches", ministack_jsonata.run_parallel_branches)


def test_arguments_are_the_branches_input_and_output_picks_from_the_result():
    output, transition, _ = run({"Arguments": "{% $merge([$states.input, {'lock': $lock}]) %}",
                                 "Output": "{% $states.result[0] %}", "Next": "After"},
                                {"a": 1}, {"lock": {"fencingToken": 7}})
    assert output == {"seen": {"a": 1, "lock": {"fencingToken": 7}}}
    assert transition == "After"


def test_without_output_the_state_output_is_the_array_of_branch_outputs():
    output, _, _ = run({"End": True}, {"a": 1})
    assert output == [{"seen": {"a": 1}}]


def test_assign_sees_the_input_and_the_result():
    _, _, variables = run({"Assign": {"first": "{% $states.result[0].seen.a %}", "was": "{% $states.input %}"},
                           "End": True}, {"a": 2})
    assert variables["first"] == 2 and variables["was"] == {"a": 2}


def test_an_expression_error_is_caught_by_the_states_catch():
    # $merge of a string: States.QueryEvaluationError, inside the attempt.
    output, transition, _ = run({"Arguments": "{% $merge([$states.input, {'x': 1}]) %}", "End": True,
                                 "Catch": [{"ErrorEquals": ["States.QueryEvaluationError"], "Next": "Caught"}]},
                                "not an object")
    assert transition == "Caught" and output["Error"] == "States.QueryEvaluationError", output


def test_a_jsonpath_parallel_is_left_to_ministack():
    ctx = {"QueryLanguage": "JSONPath", "State": {"Name": "P"}, "variables": {}, "Execution": {"Id": "x"}}
    branch = {"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": True}}}
    output, _ = sfn._execute_parallel({"Type": "Parallel", "Branches": [branch], "OutputPath": "$[0]", "End": True},
                                      {"a": 3}, {"events": [], "status": "RUNNING"}, ctx)
    assert output == {"a": 3}
