#!/usr/bin/env python3
"""`make render`: each state machine definition with the stack's defaults
substituted, as JSON that Workflow Studio (or `aws stepfunctions
validate-state-machine-definition`) opens, and its state graph as Mermaid.

Why: statemachine/*.asl.json carry numeric placeholders (`"limit": ${LockLimit}`)
that only the SAM template's DefinitionSubstitutions fill in, so the files as
shipped are not JSON. This fills them in as a deploy with every parameter at
its Default would:
- each Fn::If decided by the defaults' Conditions (cfn_template.specialize),
  so the queued workflow's TimeoutSeconds is MaxWaitSeconds (3600), not the
  1 of its MaxWaitSeconds = 0 branch, and ResultPath is null;
- the functions' and state machines' ARNs as asl_substitutions.Values makes
  them for its check: us-east-1, account 123456789012, stack sfn-lock,
  partition aws;
- TargetStateMachineArn, empty by default (no attach wrapper), as an example
  target, so that the attach wrapper is rendered too.

The output is committed (docs/rendered/, docs/pictures/): a reader on the code
host copies a definition into Workflow Studio, or reads its picture, without
installing anything. `render.py --check` (tests/template/check.sh, step
"rendered drift") regenerates both into a temporary folder and fails on any
difference, so a definition or a default changed without `make render` fails
the template checks.

The JSONata flavours (statemachine/jsonata/) are rendered with the same
substitutions into docs/rendered/jsonata/; they get no picture (their states
and transitions are their JSONPath twins', tests/template/asl_flavours.py).

Usage: render.py                 write docs/rendered/*.asl.json (and jsonata/), docs/pictures/*.md
       render.py --out DIR       write DIR/rendered, DIR/pictures instead
       render.py --check [TEMPLATE]  compare a fresh render (of TEMPLATE, default
                                 template.yaml) with the committed files
Runs with .venv-lint's Python (cfn-lint reads the template).
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "template"))
sys.path.insert(0, str(ROOT / "scripts"))
from asl_substitutions import PLACEHOLDER, SAMPLE_ARNS, Problem, Values  # noqa: E402
from cfn_template import TemplateError, intrinsic, load, specialize  # noqa: E402
import pictures  # noqa: E402

RENDERED = ROOT / "docs" / "rendered"
PICTURES = ROOT / "docs" / "pictures"
# Parameters whose empty default leaves a state machine out: the example value
# that puts it in (the same sample ARN asl_substitutions validates with).
EXAMPLES = {"TargetStateMachineArn": SAMPLE_ARNS["states"]}
REGENERATE = "make render (or .venv-lint/bin/python scripts/render.py)"


def defaults(template: dict[str, Any]) -> dict[str, str]:
    parameters = {name: str(spec.get("Default", "")) for name, spec in (template.get("Parameters") or {}).items()}
    parameters.update({name: value for name, value in EXAMPLES.items() if name in parameters})
    return parameters


def render_all(template_path: Path) -> dict[str, str]:
    """{file name: rendered JSON text} for every AWS::Serverless::StateMachine."""
    template = load(template_path)
    parameters = defaults(template)
    deployed = specialize(template, parameters)
    values = Values(deployed, "Default")
    # Values reads a parameter's Default: give it the example values too.
    for name, value in EXAMPLES.items():
        if name in values.parameters:
            values.parameters[name] = {**values.parameters[name], "Default": value}
    rendered: dict[str, str] = {}
    for name, resource in (deployed.get("Resources") or {}).items():
        if resource.get("Type") != "AWS::Serverless::StateMachine":
            continue
        properties = resource.get("Properties") or {}
        uri = properties["DefinitionUri"]
        text = (template_path.parent / uri).read_text()
        substitutions: dict[str, str] = {}
        for key, expression in (properties.get("DefinitionSubstitutions") or {}).items():
            fn = intrinsic(expression)
            choices = values.resolve(expression)
            # Only AWS::Partition resolves to more than one value (its first is aws);
            # an Fn::If the defaults did not decide would be a guess.
            if len(choices) > 1 and fn != ("Ref", "AWS::Partition"):
                raise Problem(f"{name}: {key} has {len(choices)} values with the defaults: {choices}")
            substitutions[key] = choices[0]
        missing = set(PLACEHOLDER.findall(text)) - set(substitutions)
        if missing:
            raise Problem(f"{name}: {uri} uses {sorted(missing)}, not in DefinitionSubstitutions")
        definition = json.loads(PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], text))
        rendered[Path(uri).name] = json.dumps(definition, indent=2, ensure_ascii=False) + "\n"
        # Its JSONata flavour takes the same substitutions (docs/modes.md, "JSONata flavour").
        flavour = (template_path.parent / uri).parent / "jsonata" / Path(uri).name
        if flavour.is_file():
            definition = json.loads(PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], flavour.read_text()))
            rendered[f"jsonata/{Path(uri).name}"] = json.dumps(definition, indent=2, ensure_ascii=False) + "\n"
    if not rendered:
        raise Problem(f"{template_path}: no AWS::Serverless::StateMachine with the defaults")
    return rendered


def generate(template_path: Path) -> dict[str, dict[str, str]]:
    """{"rendered": {name: text}, "pictures": {name: text}}."""
    rendered = render_all(template_path)
    drawn = {
        re.sub(r"\.asl\.json$", ".md", name): pictures.markdown(name, json.loads(text))
        for name, text in rendered.items()
        if "/" not in name  # a JSONata flavour draws as its JSONPath twin: no picture of its own
    }
    return {"rendered": rendered, "pictures": drawn}


def is_generated(path: Path) -> bool:
    """A file this script owns: every rendered definition, and the pictures that
    carry its header (sequences.md in docs/pictures is drawn by hand)."""
    if path.name.endswith(".asl.json"):
        return True
    return path.suffix == ".md" and path.read_text().startswith(pictures.HEADER_START)


def write(files: dict[str, dict[str, str]], rendered_dir: Path, pictures_dir: Path) -> None:
    for directory, generated in ((rendered_dir, files["rendered"]), (pictures_dir, files["pictures"])):
        directory.mkdir(parents=True, exist_ok=True)
        # A definition removed from the template takes its rendering and picture along.
        for stale in files_under(directory):
            if stale.relative_to(directory).as_posix() not in generated and is_generated(stale):
                stale.unlink()
        for name, text in generated.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(text)


def files_under(directory: Path) -> list[Path]:
    """Every file in `directory` and its subfolders (docs/rendered/jsonata/)."""
    return sorted(p for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else []


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check(template_path: Path, rendered_dir: Path = RENDERED, pictures_dir: Path = PICTURES) -> list[str]:
    """Problems: each committed file that differs from a fresh render, is missing, or is stale."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="render-check-") as scratch:
        fresh_rendered, fresh_pictures = Path(scratch, "rendered"), Path(scratch, "pictures")
        write(generate(template_path), fresh_rendered, fresh_pictures)
        for fresh_dir, committed_dir in ((fresh_rendered, rendered_dir), (fresh_pictures, pictures_dir)):
            names = {p.relative_to(fresh_dir).as_posix() for p in files_under(fresh_dir)}
            for name in sorted(names):
                committed = committed_dir / name
                if not committed.is_file():
                    problems.append(f"{shown(committed)} is missing")
                elif committed.read_text() != (fresh_dir / name).read_text():
                    diff = difflib.unified_diff(committed.read_text().splitlines(), (fresh_dir / name).read_text().splitlines(),
                                                "committed", "generated", lineterm="", n=0)
                    # The first lines of the difference say what changed; the command regenerates it all.
                    head = "\n".join("      " + line for line in list(diff)[:8])
                    problems.append(f"{shown(committed)} differs from what its definition and template.yaml generate\n{head}")
            for committed in files_under(committed_dir):
                if committed.relative_to(committed_dir).as_posix() not in names and is_generated(committed):
                    problems.append(f"{shown(committed)} is generated from no definition any more")
    return problems


def main(argv: list[str]) -> int:
    template_path = ROOT / "template.yaml"
    try:
        if argv[1:2] == ["--check"] and len(argv) <= 3:
            # A template elsewhere (a scratch copy with a changed definition) against the committed files.
            problems = check(Path(argv[2]) if len(argv) == 3 else template_path)
            for problem in problems:
                first, _, rest = problem.partition("\n")
                print(f"  {first}: regenerate with {REGENERATE} and commit the result" + (f"\n{rest}" if rest else ""))
            if problems:
                return 1
            print("  docs/rendered and docs/pictures match statemachine/ and template.yaml")
            return 0
        if argv[1:2] == ["--out"] and len(argv) == 3:
            out = Path(argv[2])
            rendered_dir, pictures_dir = out / "rendered", out / "pictures"
        elif len(argv) == 1:
            rendered_dir, pictures_dir = RENDERED, PICTURES
        else:
            print(__doc__, file=sys.stderr)
            return 2
        files = generate(template_path)
        write(files, rendered_dir, pictures_dir)
    except (Problem, TemplateError, json.JSONDecodeError) as error:
        print(f"render: {error}", file=sys.stderr)
        return 1
    for directory, generated in ((rendered_dir, files["rendered"]), (pictures_dir, files["pictures"])):
        for name in generated:
            print(f"wrote {directory / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
