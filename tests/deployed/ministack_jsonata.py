"""A JSONata Parallel state as AWS runs it, applied in the deployed tier's
ministack process (iam_recorder.py imports this module before ministack
serves; nothing is written into the installed package).

ministack 1.5.33 runs JSONata in Task, Pass, Choice, Wait, Map and Fail states,
but its Parallel reads only the JSONPath fields (InputPath, Parameters,
ResultSelector, ResultPath, OutputPath): a JSONata Parallel's `Arguments` is
ignored (every branch gets the state's input), its `Output` too (the state's
output is always the array of the branches' outputs) and its `Assign` never
runs. AWS, "Transforming data with JSONata in Step Functions": a Parallel
state takes Arguments (the branches' input), Output (default: the array of
the branches' results, `$states.result`) and Assign, like a Task.
statemachine/jsonata/*.asl.json need both: Run Workload Under Lock's Arguments
adds sfnLock to the workload's input (PassLockToWorkload), and its Output
`$states.result[0]` makes the branch's output the state's. Without this
module every JSONata locked execution would end with [output] instead of
output, which tests/deployed/test_jsonata.py would report as a wrong output.

Here: for a JSONata Parallel only, the branches run on the Arguments'
value, then Output and Assign are evaluated with `$states.input` = the
state's input and `$states.result` = the branches' outputs, as ministack
already does for a JSONata Map. An error in Arguments or Output is
States.QueryEvaluationError inside the attempt, so the state's Retry and Catch
see it, as on AWS. JSONPath Parallel states are left to ministack.

test_ministack_jsonata.py shows each case in process; test_jsonata.py shows
it deployed (the outputs of the JSONata executions, the workload's input
with sfnLock).
"""

from __future__ import annotations

from ministack.services import stepfunctions as sfn

JSONATA_FIELDS = ("Arguments", "Output", "Assign")
_run_parallel_branches = sfn._run_parallel_branches


def run_parallel_branches(state_def, raw_input, execution, ctx):
    if sfn._state_query_language(state_def, ctx) != "JSONata":
        return _run_parallel_branches(state_def, raw_input, execution, ctx)
    effective = sfn._apply_jsonata_arguments(state_def, raw_input, ctx)
    # ministack's own run, without the JSONata fields: its output is the
    # array of the branches' outputs (no ResultSelector/ResultPath/OutputPath).
    bare = {k: v for k, v in state_def.items() if k not in JSONATA_FIELDS}
    results, transition = _run_parallel_branches(bare, effective, execution, ctx)
    output = sfn._apply_jsonata_output(state_def, raw_input, ctx, result=results, default=results)
    sfn._apply_state_assign(state_def, raw_input, ctx, result=results)
    return output, transition


def apply() -> None:
    """_execute_parallel looks _run_parallel_branches up in its module at each
    call: replacing the module attribute reaches every execution."""
    sfn._run_parallel_branches = run_parallel_branches
