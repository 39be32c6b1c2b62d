#!/usr/bin/env python3
"""scripts/pictures.py draws what a definition says, and scripts/render.py's
drift check catches a definition changed without `make render`.

Why: the pictures in docs/pictures are only as good as the generator; a Catch
it dropped or an edge it drew to the wrong state would be committed and kept
equal to itself by the drift check. So a tiny definition with a Parallel (two
branches), a Catch with two errors, a Retry and a Choice is drawn here and each
piece is looked for; and a tiny template is rendered, then its definition has a
state renamed, and the check must name both generated files.

Usage: pictures_test.py   (unittest; .venv-lint's Python: render.py reads templates with cfn-lint)
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import pictures  # noqa: E402
import render  # noqa: E402

SAMPLE = {
    "StartAt": "Work",
    "States": {
        "Work": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "Call", "States": {"Call": {
                    "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "TimeoutSeconds": 60,
                    "Parameters": {"FunctionName": "arn:aws:lambda:us-east-1:123456789012:function:f"},
                    "Retry": [{"ErrorEquals": ["Lambda.TooManyRequestsException"], "MaxAttempts": 3}],
                    "End": True}}},
                {"StartAt": "end", "States": {"end": {"Type": "Pass", "End": True}}},
            ],
            "Catch": [{"ErrorEquals": ["Boom", "Bang"], "Next": "Failed"}],
            "Next": "Is It Fine",
        },
        "Is It Fine": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.ok", "BooleanEquals": True, "Next": "Done"}],
            "Default": "Failed",
        },
        "Done": {"Type": "Succeed"},
        "Failed": {"Type": "Fail", "Error": "Broken"},
    },
}

TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Parameters:
  Seconds:
    Type: Number
    Default: 42
Resources:
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
      DefinitionUri: machine.asl.json
      DefinitionSubstitutions:
        Partition: !Ref AWS::Partition
        Seconds: !Ref Seconds
"""
ASL = """{"StartAt": "Pause", "States": {
  "Pause": {"Type": "Wait", "Seconds": ${Seconds}, "Next": "Call"},
  "Call": {"Type": "Task", "Resource": "arn:${Partition}:states:::lambda:invoke",
           "Parameters": {"FunctionName": "f"}, "End": true}}}
"""


class Picture(unittest.TestCase):
    def setUp(self) -> None:
        self.page = pictures.markdown("sample.asl.json", SAMPLE)
        self.graph = self.page.split("```mermaid\n", 1)[1].split("```", 1)[0]

    def test_a_parallel_is_a_subgraph_with_a_subgraph_per_branch(self) -> None:
        self.assertIn('subgraph s_Work ["Work (Parallel)"]', self.graph)
        self.assertIn('subgraph s_Work_b1 ["branch 1"]', self.graph)
        self.assertIn('subgraph s_Work_b2 ["branch 2"]', self.graph)
        self.assertIn("s_Work_b1_from_start --> s_Work_b1_s_Call", self.graph)
        self.assertIn("s_Work_b1_s_Call --> s_Work_b1_to_end", self.graph)

    def test_the_catch_is_a_dotted_edge_named_by_its_errors_and_listed(self) -> None:
        self.assertIn('s_Work -.->|"catch Boom, Bang"| s_Failed', self.graph)
        self.assertIn("| Work | Catch | Boom, Bang | → Failed |", self.page)

    def test_next_choice_and_default_edges(self) -> None:
        self.assertIn("from_start --> s_Work", self.graph)
        self.assertIn("s_Work --> s_Is_It_Fine", self.graph)
        self.assertIn('s_Is_It_Fine -->|"$.ok == True"| s_Done', self.graph)
        self.assertIn('s_Is_It_Fine -->|"Default"| s_Failed', self.graph)

    def test_a_task_shows_its_integration_timeout_and_retry(self) -> None:
        self.assertIn('s_Work_b1_s_Call["Call<br/>lambda:invoke<br/>timeout 60 s<br/>↻ Lambda.TooManyRequestsException ×3"]',
                      self.graph)
        self.assertIn("| Call | Retry | Lambda.TooManyRequestsException | 3 attempts, 1 s × 2 |", self.page)

    def test_succeed_and_fail_are_styled(self) -> None:
        self.assertIn("class s_Done succeed", self.graph)
        self.assertIn("class s_Failed fail", self.graph)

    def test_no_node_is_named_by_a_mermaid_keyword(self) -> None:
        # A state named "end" (branch 2) must not become the id `end`, which closes a subgraph.
        ids = re.findall(r"^\s*([A-Za-z0-9_]+)[\[({]", self.graph, re.M)
        self.assertNotIn("end", ids)
        self.assertIn("s_Work_b2_s_end", ids)

    def test_a_long_error_list_is_shortened_on_the_edge_only(self) -> None:
        errors = ["A", "B", "C", "D", "E"]
        self.assertEqual(pictures.errors_label(errors), "A, B +3")


class Drift(unittest.TestCase):
    def test_a_renamed_state_fails_the_check_naming_both_files(self) -> None:
        with tempfile.TemporaryDirectory(prefix="pictures-test-") as scratch:
            root = Path(scratch)
            (root / "template.yaml").write_text(TEMPLATE)
            (root / "machine.asl.json").write_text(ASL)
            rendered, drawn = root / "rendered", root / "pictures"
            render.write(render.generate(root / "template.yaml"), rendered, drawn)
            definition = json.loads((rendered / "machine.asl.json").read_text())
            self.assertEqual(definition["States"]["Pause"]["Seconds"], 42)
            self.assertEqual(definition["States"]["Call"]["Resource"], "arn:aws:states:::lambda:invoke")
            (drawn / "sequences.md").write_text("# drawn by hand\n")  # not generated: never stale
            self.assertEqual(render.check(root / "template.yaml", rendered, drawn), [])

            (root / "machine.asl.json").write_text(ASL.replace('"Pause"', '"Pause Briefly"'))
            problems = render.check(root / "template.yaml", rendered, drawn)
            self.assertEqual(len(problems), 2, problems)
            self.assertIn(f"{rendered / 'machine.asl.json'} differs", problems[0])
            self.assertIn(f"{drawn / 'machine.md'} differs", problems[1])
            self.assertIn("Pause Briefly", problems[1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
