"""Packages template.yaml as `sam package` does and deploys it, unmodified,
through CloudFormation (the deployed tier's emulator, scripts/deployed-stack.sh).

What `sam build && sam package` does, and nothing for the emulator's sake:
- takes each function whose Metadata has BuildMethod rust-cargolambda (its
  BuildProperties.Binary) from the workspace's debug build, zips it as
  `bootstrap` and uploads the zip; the function's CodeUri becomes the
  `s3://bucket/key` string `sam package` writes. Debug, not `sam build`'s
  release build: the same code, and `make test` has compiled it already
  (scripts/local-stack.sh runs the same cargo command), where a release build
  is a second compile of eight minutes on two cores (tests/deployed/README.md);
- uploads each local DefinitionUri file; DefinitionUri becomes the
  {Bucket, Key} object `sam package` writes for AWS::Serverless::StateMachine;
- writes the packaged template to a copy (template.yaml stays as it is),
  uploads it and deploys it by TemplateURL (it is over CloudFormation's
  51,200-byte TemplateBody limit, as on AWS) through a change set, as
  `sam deploy` does: CreateChangeSet, ExecuteChangeSet, CREATE_COMPLETE.

Keys are the MD5 of the uploaded bytes under a prefix, as `sam package` names
them. The binaries are x86_64 (the host's) whatever Architectures says: the
emulator runs `bootstrap` as a host process and does not enforce the
architecture (LOCAL-STACK notes).

Usable as a module (package(), deploy()) and as a command:
  python tests/deployed/deploy.py STACK_NAME [Key=Value ...]
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
ARTIFACT_BUCKET = "sfn-lock-artifacts"
PREFIX = "sfn-lock"
# What samconfig.toml's deploy section passes.
CAPABILITIES = ["CAPABILITY_IAM"]


# ------------------------------------------------------------ template I/O
class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short intrinsic tags (!Ref, !Sub, ...),
    turned into their long JSON forms as CloudFormation itself reads them."""


def _tag(name):
    def construct(loader, node):
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if name == "Ref":
            return {"Ref": value}
        if name == "Condition":
            return {"Condition": value}
        if name == "GetAtt" and isinstance(value, str):
            resource, _, attribute = value.partition(".")
            return {"Fn::GetAtt": [resource, attribute]}
        return {f"Fn::{name}": value}

    return construct


for _name in ("Ref", "Condition", "GetAtt", "Sub", "If", "Equals", "Not", "And", "Or",
              "Join", "Select", "Split", "FindInMap", "Base64", "Cidr", "GetAZs",
              "ImportValue", "Transform", "ToJsonString", "Length"):
    _CfnLoader.add_constructor(f"!{_name}", _tag(_name))


def load_template(path: Path = TEMPLATE) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_CfnLoader)


# ---------------------------------------------------------------- building
# The command scripts/local-stack.sh runs before the Rust suites, so that in
# `make test` it finds every binary fresh and compiles nothing (the same
# packages and features); run alone, it builds what is missing or stale.
# With sfn-lock's test-util feature, as every cargo command of `make test`
# (crates/sfn-lock/Cargo.toml says why).
CARGO_BUILD = ["cargo", "build", "--quiet", "--workspace", "--bins", "--features", "sfn-lock/test-util"]


def build_functions(template: dict) -> dict[str, Path]:
    """The debug binary of every rust-cargolambda function, built (or found
    fresh) by one cargo command; returns resource -> binary."""
    binaries = {}
    for name, resource in template["Resources"].items():
        meta = resource.get("Metadata") or {}
        if resource["Type"] == "AWS::Serverless::Function" and meta.get("BuildMethod") == "rust-cargolambda":
            binaries[name] = meta["BuildProperties"]["Binary"]
    subprocess.run(CARGO_BUILD, cwd=ROOT, check=True)
    debug = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug"
    out = {}
    for name, binary in binaries.items():
        if not (debug / binary).is_file():
            raise RuntimeError(f"{' '.join(CARGO_BUILD)} wrote no {debug / binary}")
        out[name] = debug / binary
    return out


def zip_bootstrap(binary: Path) -> bytes:
    """A deterministic zip (fixed timestamp) holding the binary as
    `bootstrap`, mode 0755. Compression level 1: a 52 MB debug binary zips in
    0.4 s (16 MB) where the default level takes 1.4 s for 14 MB."""
    buf = io.BytesIO()
    info = zipfile.ZipInfo("bootstrap", date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (0o100755 << 16)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(info, binary.read_bytes(), compresslevel=1)
    return buf.getvalue()


# --------------------------------------------------------------- packaging
@dataclass
class Packaged:
    template_url: str
    template: dict
    uploads: dict[str, str] = field(default_factory=dict)


def _upload(s3, body: bytes, suffix: str = "") -> str:
    key = f"{PREFIX}/{hashlib.md5(body).hexdigest()}{suffix}"
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key=key, Body=body)
    return key


def package(session: boto3.Session | None = None, out_dir: Path | None = None) -> Packaged:
    """`sam build` + `sam package` into the artifact bucket; returns the
    packaged template's URL. template.yaml is read, never written."""
    session = session or boto3.Session()
    s3 = session.client("s3")
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if ARTIFACT_BUCKET not in existing:
        s3.create_bucket(Bucket=ARTIFACT_BUCKET)

    template = load_template()
    packaged = Packaged(template_url="", template=template)
    for name, binary in build_functions(template).items():
        key = _upload(s3, zip_bootstrap(binary))
        template["Resources"][name]["Properties"]["CodeUri"] = f"s3://{ARTIFACT_BUCKET}/{key}"
        packaged.uploads[name] = key
    for name, resource in template["Resources"].items():
        props = resource.get("Properties") or {}
        if resource["Type"] == "AWS::Serverless::StateMachine" and isinstance(props.get("DefinitionUri"), str):
            key = _upload(s3, (ROOT / props["DefinitionUri"]).read_bytes())
            props["DefinitionUri"] = {"Bucket": ARTIFACT_BUCKET, "Key": key}
            packaged.uploads[name] = key

    body = json.dumps(template, indent=1).encode()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "packaged-template.json").write_bytes(body)
    key = _upload(s3, body, ".template")
    endpoint = s3.meta.endpoint_url.rstrip("/")
    packaged.template_url = f"{endpoint}/{ARTIFACT_BUCKET}/{key}"
    return packaged


# -------------------------------------------------------------- deploying
class DeployFailed(Exception):
    pass


def _wait(describe, done, failed, what, timeout=300, pause=0.25):
    deadline = time.monotonic() + timeout
    while True:
        status, detail = describe()
        if status in done:
            return status
        if status in failed or time.monotonic() > deadline:
            raise DeployFailed(f"{what}: {status} {detail}")
        time.sleep(pause)


def deploy(stack_name: str, template_url: str, parameters: dict[str, str] | None = None,
           session: boto3.Session | None = None) -> dict[str, str]:
    """CreateChangeSet (CREATE) by TemplateURL, ExecuteChangeSet, wait for
    CREATE_COMPLETE; returns the stack's outputs."""
    cfn = (session or boto3.Session()).client("cloudformation")
    params = [{"ParameterKey": k, "ParameterValue": v} for k, v in (parameters or {}).items()]
    change_set = cfn.create_change_set(
        StackName=stack_name, ChangeSetName=f"{stack_name}-create", ChangeSetType="CREATE",
        TemplateURL=template_url, Parameters=params, Capabilities=CAPABILITIES)["Id"]

    def describe_change_set():
        cs = cfn.describe_change_set(ChangeSetName=change_set, StackName=stack_name)
        return cs["Status"], cs.get("StatusReason", "")

    _wait(describe_change_set, {"CREATE_COMPLETE"}, {"FAILED"}, f"change set of {stack_name}")
    cfn.execute_change_set(ChangeSetName=change_set, StackName=stack_name)

    def describe_stack():
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        return stack["StackStatus"], stack.get("StackStatusReason", "")

    try:
        _wait(describe_stack, {"CREATE_COMPLETE"},
              {"CREATE_FAILED", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED"},
              f"stack {stack_name}")
    except DeployFailed as e:
        events = cfn.describe_stack_events(StackName=stack_name)["StackEvents"]
        reasons = [f"{ev['LogicalResourceId']} {ev['ResourceStatus']}: {ev.get('ResourceStatusReason', '')}"
                   for ev in events if ev["ResourceStatus"].endswith("FAILED")]
        raise DeployFailed(f"{e}\n" + "\n".join(reasons)) from None
    return outputs(stack_name, session)


def outputs(stack_name: str, session: boto3.Session | None = None) -> dict[str, str]:
    cfn = (session or boto3.Session()).client("cloudformation")
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    stack_name, params = argv[1], dict(a.split("=", 1) for a in argv[2:])
    start = time.monotonic()
    packaged = package(out_dir=Path(os.environ.get("SFN_LOCK_DEPLOYED_LOGS", ROOT / "target")) / "package")
    packaged_at = time.monotonic()
    outs = deploy(stack_name, packaged.template_url, params)
    print(json.dumps(outs, indent=1))
    print(f"package {packaged_at - start:.1f} s, deploy {time.monotonic() - packaged_at:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
