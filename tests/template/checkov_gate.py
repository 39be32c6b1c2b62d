#!/usr/bin/env python3
"""Judge checkov's JSON report (stdin) on template.yaml.

Why Python: it is the gate over checkov's own report (checkov exits 0 on a skip
without a reason and on a file it did not parse), not a rule of its own.

Fails when checkov found a failed check or a parsing error, when it scanned no
resource at all (it skips, with only a warning, a file it does not take for a
CloudFormation template), or when a check is skipped without a comment: every
skip must be justified next to its resource, in the resource's Metadata:

    Metadata:
      checkov:
        skip:
          - id: CKV_AWS_116
            comment: why this check does not apply here
"""

from __future__ import annotations

import json
import sys

NO_COMMENT = "No comment provided"  # what checkov records for a skip without one


def main() -> int:
    raw = sys.stdin.read()
    try:
        report = json.loads(raw)
    except json.JSONDecodeError:
        print(f"checkov_gate: checkov printed no JSON report:\n{raw[:2000]}")
        return 1
    reports = report if isinstance(report, list) else [report]
    problems: list[str] = []
    scanned = 0
    for entry in reports:
        results = entry.get("results", {})
        summary = entry.get("summary", {})
        scanned += summary.get("resource_count", 0)
        for failed in results.get("failed_checks", []):
            problems.append(
                f"FAILED {failed['check_id']} ({failed.get('check_name', '')}) on {failed['resource']}"
                f" [{failed.get('file_path', '')}:{failed.get('file_line_range', '')}]"
            )
        for error in results.get("parsing_errors", []):
            problems.append(f"parsing error: {error}")
        for skipped in results.get("skipped_checks", []):
            comment = (skipped.get("check_result", {}) or {}).get("suppress_comment", "").strip()
            if not comment or comment == NO_COMMENT:
                problems.append(f"skip of {skipped['check_id']} on {skipped['resource']} has no comment")
            else:
                print(f"  skipped {skipped['check_id']} on {skipped['resource']}: {comment[:100]}")
    if scanned == 0:
        problems.append("checkov scanned no resource (not recognised as a CloudFormation template?)")
    for problem in problems:
        print(f"checkov: {problem}")
    passed = sum(len(e.get("results", {}).get("passed_checks", [])) for e in reports)
    print(f"checkov_gate: {scanned} resources, {passed} checks passed, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
