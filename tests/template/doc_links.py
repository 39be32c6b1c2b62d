"""The documentation's links and names resolve.

1. Every relative Markdown link in README.md, docs/**/*.md, CONTRIBUTING.md,
   DESIGN.md, CHANGELOG.md, bench/README.md and tests/deployed/README.md
   names a file or folder that exists, and its #anchor a heading of that file
   (GitHub's slugs: lowercased, punctuation but - and _ dropped, spaces to -,
   -1, -2 ... for repeats) or an explicit <a name/id>. Links in code blocks
   and code spans are text, not links.
2. The README's shell blocks name only what exists: each Name= after
   --parameter-overrides, and in `make deploy PARAMS="Name=... ..."`, is a
   template parameter; each output read with
   `out NAME` (or OutputKey=='NAME') is a template output; each `sfn-lock SUB
   --flag` is a subcommand whose --help shows that flag, asked of the built
   binary (target/debug/sfn-lock: build it with `cargo build -p
   sfn-lock-cli`; missing, this check fails and says so).
3. Template names in prose: a code span in README.md, docs/*.md,
   CHANGELOG.md or CONTRIBUTING.md shaped like a parameter or output
   (FooSeconds, FooArn, LockStore, ...) is one of template.yaml's Parameters
   or Outputs (removed names only where removals are told: CHANGELOG.md,
   docs/upgrading.md); and docs/deploy.md's parameter table lists exactly the
   template's parameters.

Usage: doc_links.py [ROOT] | doc_links.py --self-test
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cfn_template  # noqa: E402

DOC_GLOBS = [
    "README.md",
    "docs/**/*.md",
    "CONTRIBUTING.md",
    "DESIGN.md",
    "CHANGELOG.md",
    "bench/README.md",
    "tests/deployed/README.md",
    "cdk/README.md",
]
PROSE_GLOBS = ["README.md", "docs/*.md", "CHANGELOG.md", "CONTRIBUTING.md"]
# Names the template had and no longer has: told only where removals are.
REMOVED = {"ExecutionTimeoutSeconds"}
REMOVALS_TOLD_IN = {"CHANGELOG.md", "docs/upgrading.md"}
# Shaped like a template name but something else (an ASL field).
NOT_TEMPLATE_NAMES = {"TimeoutSeconds", "HeartbeatSeconds", "MaxDelaySeconds", "IntervalSeconds", "DelaySeconds"}
TEMPLATE_NAME = re.compile(
    r"^[A-Z][A-Za-z0-9]*(Seconds|Arn|Arns|Days|Schedule|Expression|Timezone|LockLimit|LockStore|LockName|Url|TopicArn)$"
)
CLI = Path("target/debug/sfn-lock")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
HTML_HREF = re.compile(r"<(?:a|img)\s[^>]*(?:href|src)=\"([^\"]+)\"", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        marker = FENCE.match(line)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif marker.group(1) == fence:
                fence = None
            continue
        if fence is None:
            out.append((number, line))
    return out


def code_blocks(text: str, languages: tuple[str, ...] = ("sh", "bash", "shell", "")) -> list[str]:
    blocks, current, language = [], None, None
    for line in text.split("\n"):
        marker = re.match(r"^\s*```\s*([A-Za-z]*)", line)
        if marker and current is None:
            current, language = [], marker.group(1)
        elif line.strip().startswith("```") and current is not None:
            if language in languages:
                blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def without_code_spans(line: str) -> str:
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def heading_text(raw: str) -> str:
    """A heading as GitHub renders its text: code spans and links unwrapped."""
    text = CODE_SPAN.sub(lambda m: m.group(2), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "").replace("~~", "")


def slug(text: str) -> str:
    """GitHub's anchor for a heading's text (before the -N of repeats)."""
    out = []
    for char in heading_text(text).strip().lower():
        category = unicodedata.category(char)
        if char in "-_" or category[0] in "LN" or category == "Mn":
            out.append(char)
        elif char == " ":
            out.append("-")
    return "".join(out)


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    for _, line in prose_lines(text):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in prose_lines(text):
        plain = without_code_spans(line)
        out += [(number, target) for target in INLINE_LINK.findall(plain)]
        out += [(number, target) for target in HTML_HREF.findall(plain)]
        definition = REFERENCE_DEF.match(plain)
        if definition:
            out.append((number, definition.group(1)))
    return out


def doc_files(root: Path) -> list[Path]:
    files: set[Path] = set()
    for pattern in DOC_GLOBS:
        files.update(path for path in root.glob(pattern) if path.is_file())
    return sorted(files)


def check_links(root: Path) -> list[str]:
    problems = []
    cache: dict[Path, set[str]] = {}
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        for number, target in links(text):
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # absolute: http(s), mailto, ...
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not resolved.exists():
                problems.append(f"{where}:{number}: link to {target}: no file {file_part}")
                continue
            if not anchor or resolved.is_dir() or resolved.suffix != ".md":
                continue
            if resolved not in cache:
                cache[resolved] = anchors(resolved.read_text(encoding="utf-8"))
            if anchor not in cache[resolved]:
                near = sorted(a for a in cache[resolved] if anchor.split("-")[0] in a)[:5]
                problems.append(
                    f"{where}:{number}: link to {target}: no heading with anchor #{anchor} in "
                    f"{resolved.relative_to(root.resolve()) if resolved.is_relative_to(root.resolve()) else resolved}"
                    + (f" (anchors like it: {', '.join(near)})" if near else "")
                )
    return problems


def template_names(root: Path) -> tuple[set[str], set[str]]:
    template = cfn_template.load(root / "template.yaml")
    return set(template.get("Parameters", {})), set(template.get("Outputs", {}))


def shell_commands(block: str) -> list[tuple[str, list[str]]]:
    """The block's commands, continuation lines joined: each as its text and its
    words (comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.split("\n"):
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            tokens = line.split("#", 1)[0].split()
        if tokens:
            out.append((line, tokens))
    return out


def cli_help(root: Path, sub: str | None) -> str:
    binary = root / CLI
    args = [str(binary)] + ([sub] if sub else []) + ["--help"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise LookupError(f"`sfn-lock {sub} --help` exits {result.returncode}: {result.stderr.strip()[:200]}")
    return result.stdout


def check_readme_commands(root: Path) -> list[str]:
    problems = []
    parameters, outputs = template_names(root)
    readme = (root / "README.md").read_text(encoding="utf-8")
    blocks = code_blocks(readme)
    if not (root / CLI).is_file():
        return [
            f"README: {CLI} is missing, so its sfn-lock commands cannot be checked: "
            "build it with `cargo build -p sfn-lock-cli` (make test builds it before the template checks)"
        ]
    helps: dict[str | None, str] = {}
    counted = {"parameter": 0, "output": 0, "sfn-lock": 0}
    for block in blocks:
        for command, tokens in shell_commands(block):
            overrides = []
            if "--parameter-overrides" in tokens:
                for token in tokens[tokens.index("--parameter-overrides") + 1 :]:
                    if token.startswith("-"):
                        break
                    overrides.append(token)
            if tokens[:2] == ["make", "deploy"]:
                # make deploy PARAMS="A=1 B=2": one word, which sam deploy splits.
                for token in tokens[2:]:
                    if token.startswith("PARAMS="):
                        overrides += shlex.split(token[len("PARAMS="):])
            for token in overrides:
                name = token.split("=", 1)[0]
                counted["parameter"] += 1
                if name not in parameters:
                    problems.append(f"README: --parameter-overrides {name}=...: template.yaml has no parameter {name}")
            for name in re.findall(r"\$\(out (\w+)\)|OutputKey=='(\w+)'", command):
                name = next(n for n in name if n)
                counted["output"] += 1
                if name not in outputs:
                    problems.append(f"README: output {name}: template.yaml has no output {name}")
            if tokens and tokens[0] == "sfn-lock":
                counted["sfn-lock"] += 1
                problems += check_cli_call(root, tokens[1:], helps)
            if tokens[:2] == ["cargo", "install"] and "--path" in tokens:
                path = tokens[tokens.index("--path") + 1]
                if not (root / path / "Cargo.toml").is_file():
                    problems.append(f"README: cargo install --path {path}: no crate there")
    for what, count in counted.items():
        if count == 0:
            problems.append(f"README: no {what} named in its shell blocks: the quick start has lost it, or this check its way to read it")
    return problems


def check_cli_call(root: Path, args: list[str], helps: dict[str | None, str]) -> list[str]:
    problems = []
    if None not in helps:
        helps[None] = cli_help(root, None)
    subcommands = set(re.findall(r"^\s{2}([a-z][a-z-]*)\s{2,}", helps[None].split("Options:")[0], re.M))
    sub = None
    flags: list[str] = []
    for arg in args:
        if arg == "--" or arg.startswith(">"):
            break
        if arg.startswith("-"):
            flags.append(arg.split("=", 1)[0])
        elif sub is None:
            sub = arg
    if sub is None or sub not in subcommands:
        return [f"README: `sfn-lock {' '.join(args)}`: no subcommand {sub!r} (sfn-lock has {', '.join(sorted(subcommands))})"]
    if sub not in helps:
        helps[sub] = cli_help(root, sub)
    for flag in flags:
        if not re.search(rf"(^|[\s,\[]){re.escape(flag)}([\s,=\]<]|$)", helps[sub], re.M):
            problems.append(f"README: `sfn-lock {sub} {flag}`: `sfn-lock {sub} --help` shows no {flag}")
    return problems


def check_template_names(root: Path) -> list[str]:
    problems = []
    parameters, outputs = template_names(root)
    known = parameters | outputs
    files: set[Path] = set()
    for pattern in PROSE_GLOBS:
        files.update(p for p in root.glob(pattern) if p.is_file())
    for path in sorted(files):
        where = str(path.relative_to(root))
        for number, line in prose_lines(path.read_text(encoding="utf-8")):
            for _, span in CODE_SPAN.findall(line):
                name = span.strip()
                if not TEMPLATE_NAME.match(name) or name in known or name in NOT_TEMPLATE_NAMES:
                    continue
                if name in REMOVED and where in REMOVALS_TOLD_IN:
                    continue
                problems.append(f"{where}:{number}: `{name}` is neither a parameter nor an output of template.yaml")
    deploy = (root / "docs/deploy.md").read_text(encoding="utf-8")
    section = deploy.split("## Parameters", 1)[-1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([A-Za-z0-9]+)` \|", section, re.M))
    for name in sorted(parameters - listed):
        problems.append(f"docs/deploy.md: the parameter table lacks {name}")
    for name in sorted(listed - parameters):
        problems.append(f"docs/deploy.md: the parameter table lists {name}, which template.yaml does not have")
    return problems


def run(root: Path) -> list[str]:
    problems = check_links(root)
    problems += check_template_names(root)
    try:
        problems += check_readme_commands(root)
    except (LookupError, OSError, subprocess.SubprocessError) as error:
        problems.append(f"README: running {CLI}: {error}")
    return problems


def self_test() -> int:
    failures = []

    def expect(label: str, condition: bool) -> None:
        if not condition:
            failures.append(label)

    expect("slug of a code span heading", slug("Wrap its definition: `sfn-lock wrap`") == "wrap-its-definition-sfn-lock-wrap")
    expect("slug keeps - and _", slug("`--store` and snake_case") == "--store-and-snake_case")
    expect("slug of an apostrophe", slug("The workload's lock: fencing token and renewal") == "the-workloads-lock-fencing-token-and-renewal")
    expect("slug of parentheses", slug("Errors (public API)") == "errors-public-api")
    expect("slug of unicode", slug("Café déjà") == "café-déjà")
    expect("repeats get -1", {"a", "a-1"} <= anchors("# A\n## A\n"))
    expect("headings in code are none", "b" not in anchors("```\n# B\n```\n"))
    expect("links in code spans are none", links("`[x](nowhere.md)`") == [])
    expect("links in code blocks are none", links("```\n[x](nowhere.md)\n```\n") == [])
    expect("a link in prose is one", links("see [x](a.md#b) now") == [(1, "a.md#b")])
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "docs").mkdir()
        (root / "README.md").write_text(
            "# Top\n\n## Quick start: go\n\n[ok](docs/a.md#the-part) [ok](#top) [web](https://example.com/x)\n"
            "[broken file](docs/missing.md)\n[broken anchor](docs/a.md#no-such-part)\n"
        )
        (root / "docs/a.md").write_text("# A\n\n## The part\n\n[back](../README.md#quick-start-go)\n")
        found = check_links(root)
        expect("a missing file is found", any("docs/missing.md" in p and "README.md:6" in p for p in found))
        expect("a missing anchor is found", any("#no-such-part" in p and "README.md:7" in p for p in found))
        expect("only those two", len(found) == 2)
    if failures:
        for label in failures:
            print(f"doc links self-test FAILED: {label}")
        return 1
    print("doc links self-test: ok")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1]) if sys.argv[1:] else Path(".")
    problems = run(root.resolve())
    for problem in problems:
        print(problem)
    files = len(doc_files(root.resolve()))
    print(f"doc links: {len(problems)} problem(s) in {files} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
