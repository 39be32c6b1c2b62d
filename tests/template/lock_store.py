"""The lock store that template.yaml gives its functions, for every LockStore value.

Why Python, not a tool: each rule holds for every LockStore value on the template as that
value deploys it (conditions decided, !If branches taken: cfn_template.specialize), and
the URL must parse as the library's StoreUrl reads it; cfn-guard and cfn-lint see one undecided
template. The bucket's settings alone could be Guard rules; they stay beside the URL
they are tied to (the lifecycle prefix is the URL's).

The functions keep their locks where LOCK_STORE_URL says (the library's
StoreUrl): dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH. The template
chooses the store by its LockStore parameter, through the Conditions UseDynamoDbStore,
UseS3Store and UseSsmStore. For each value LockStore allows, this check takes the
template as CloudFormation deploys it with that value (cfn_template.specialize: the
resources under a false condition gone, each decided !If its branch) and holds:

parameter     LockStore is a String whose AllowedValues are exactly the stores below,
              with Default dynamodb (the store of stacks deployed before LockStore).
url           every lock function (acquire-lock, release-lock, release-execution-locks)
              has LOCK_STORE_URL, all three the same, and it is the store's URL as
              written below: the scheme of the chosen store, naming the store's own
              resource (the table, the bucket with the locks/ prefix, the stack's
              parameter path), in a form StoreUrl::parse accepts. LOCK_TABLE_NAME, the
              older setting, is !Ref LockTable with DynamoDB and absent otherwise
              (the code refuses two different stores). The LockStoreUrl output, if
              any, is the same URL.
resources     the store's resources exist, the other stores' do not (LockTable only
              with dynamodb, LockBucket and its policy only with s3, nothing for
              ssm); the queued workflow (QueuedWorkflowStateMachine and its log
              group) only with dynamodb, the one store with a queue; nothing left
              refers to a resource that is gone (specialize raises).
table         with dynamodb: kept on delete and replacement (DeletionPolicy and
              UpdateReplacePolicy Retain) and DeletionProtectionEnabled, so that
              neither a stack operation nor a direct DeleteTable drops every held
              lock and fencing counter.
bucket        with s3: kept on delete and replacement (Retain, as the table);
              versioning not enabled (every acquire and release overwrites a lock
              object); SSE-S3 (AES256: the functions have no kms: permissions);
              every public access block on; BucketOwnerEnforced; a bucket policy
              that denies every request without TLS (aws:SecureTransport false) on
              the bucket and its objects; a lifecycle rule that expires objects
              under the URL's prefix only after longer than the longest lease (a
              live lock object is never expired; DESIGN.md, "Fencing tokens"), no
              other rule expiring them sooner, and incomplete multipart uploads
              aborted.

Usage: lock_store.py template.yaml | lock_store.py --self-test
       lock_store.py --stores template.yaml   (LockStore's AllowedValues, one a line)
       lock_store.py --with-default STORE template.yaml   (the template's text with
           LockStore's Default set to STORE, for tools that deploy the defaults: checkov)
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, as_text, intrinsic, load, specialize  # noqa: E402
from parameter_orderings import ACQUIRE_MAX_LEASE_SECONDS  # noqa: E402

PARAMETER = "LockStore"
DEFAULT_STORE = "dynamodb"
FUNCTIONS = ("AcquireLockFunction", "ReleaseLockFunction", "ReleaseExecutionLocksFunction")
URL_ENV, TABLE_ENV = "LOCK_STORE_URL", "LOCK_TABLE_NAME"
BUCKET, BUCKET_POLICY, TABLE = "LockBucket", "LockBucketPolicy", "LockTable"
S3_PREFIX = "locks/"
# Per store: LOCK_STORE_URL as written (!Sub text), and the resources only it deploys.
STORES: dict[str, tuple[str, dict[str, str]]] = {
    "dynamodb": ("dynamodb://${LockTable}", {TABLE: "AWS::DynamoDB::Table"}),
    "s3": (f"s3://${{{BUCKET}}}/{S3_PREFIX}", {BUCKET: "AWS::S3::Bucket", BUCKET_POLICY: "AWS::S3::BucketPolicy"}),
    "ssm": ("ssm:///sfn-lock/${AWS::StackName}", {}),
}
# The one store with a queue: the queued workflow needs it.
QUEUE_STORE = "dynamodb"
QUEUE_RESOURCES = ("QueuedWorkflowStateMachine", "QueuedWorkflowLogGroup")
# What a deployment substitutes, to try the URL on StoreUrl::parse's rules.
SAMPLE = {"${LockTable}": "sfn-lock-LockTable-1ABC", "${LockBucket}": "sfn-lock-lockbucket-1abc",
          "${AWS::StackName}": "sfn-lock"}
DAY = 86_400

Problem = tuple[str, str]  # (rule, message)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _text(value: Any) -> str:
    """as_text, with the bucket's ARN spelt out as the bucket policy writes it."""
    return as_text(value).replace(f"${{{BUCKET}.Arn}}", f"arn:${{AWS::Partition}}:s3:::${{{BUCKET}}}")


def parse_url(url: str) -> tuple[str, str] | str:
    """(scheme, rest) if StoreUrl::parse accepts `url`, else why not (its rules, restated)."""
    scheme, separator, rest = url.strip().partition("://")
    if not separator:
        return "no SCHEME://"
    if scheme == "dynamodb":
        return (scheme, rest) if rest and "/" not in rest else "dynamodb:// must name a table, no path"
    if scheme == "s3":
        return (scheme, rest) if rest.split("/", 1)[0] else "s3:// must name a bucket"
    if scheme == "ssm":
        path = rest.rstrip("/")
        if not (path.startswith("/") and len(path) > 1 and "//" not in path
                and re.fullmatch(r"[A-Za-z0-9_./-]+", path)):
            return "ssm:///PATH: letters, digits and _.-/ after three slashes"
        if path[1:].lower().startswith(("aws", "ssm")):
            return "ssm:///PATH must not begin with aws or ssm"
        return scheme, path
    return f"unknown scheme {scheme!r}"


def _variables(template: dict, function: str) -> dict[str, Any]:
    resource = (template.get("Resources", {}) or {}).get(function, {}) or {}
    return (((resource.get("Properties", {}) or {}).get("Environment", {}) or {}).get("Variables", {}) or {})


def parameter_problems(template: dict) -> list[Problem]:
    parameter = (template.get("Parameters", {}) or {}).get(PARAMETER)
    if parameter is None:
        return [("parameter", f"no {PARAMETER} parameter")]
    found = []
    if parameter.get("Type") != "String":
        found.append(("parameter", f"{PARAMETER} is a {parameter.get('Type')}, not a String"))
    allowed = [str(value) for value in parameter.get("AllowedValues", [])]
    if sorted(allowed) != sorted(STORES):
        found.append(("parameter", f"{PARAMETER}'s AllowedValues are {allowed}, not the stores {sorted(STORES)}"))
    if parameter.get("Default") != DEFAULT_STORE:
        found.append(("parameter", f"{PARAMETER}'s Default is {parameter.get('Default')!r}, not {DEFAULT_STORE!r} "
                                   "(the store of stacks deployed before the parameter)"))
    return found


def url_problems(template: dict, store: str) -> list[Problem]:
    expected, _ = STORES[store]
    found: list[Problem] = []
    urls = {}
    for function in FUNCTIONS:
        variables = _variables(template, function)
        if URL_ENV not in variables:
            found.append(("url", f"{function} has no {URL_ENV}"))
            continue
        urls[function] = _text(variables[URL_ENV])
        if urls[function] != expected:
            found.append(("url", f"{function}'s {URL_ENV} is {urls[function]!r}, not {expected!r}"))
        table = variables.get(TABLE_ENV)
        if store == "dynamodb" and table not in (None, {"Ref": TABLE}):
            found.append(("url", f"{function}'s {TABLE_ENV} is {_text(table)!r}, not !Ref {TABLE}: another store "
                                 f"than its {URL_ENV}"))
        if store != "dynamodb" and table is not None:
            found.append(("url", f"{function} has {TABLE_ENV} {_text(table)!r} beside a {store} {URL_ENV}: "
                                 "the code refuses two stores"))
    if len(set(urls.values())) > 1:
        found.append(("url", f"the lock functions name different stores: {urls}"))
    for url in sorted(set(urls.values())):
        sample = url
        for placeholder, value in SAMPLE.items():
            sample = sample.replace(placeholder, value)
        parsed = parse_url(sample)
        if isinstance(parsed, str):
            found.append(("url", f"{URL_ENV} {url!r} ({sample!r} when deployed): StoreUrl::parse refuses it: {parsed}"))
        elif parsed[0] != store:
            found.append(("url", f"{URL_ENV} {url!r} is a {parsed[0]} store, not {store}"))
    output = ((template.get("Outputs", {}) or {}).get("LockStoreUrl", {}) or {}).get("Value")
    if output is not None and _text(output) != expected:
        found.append(("url", f"the LockStoreUrl output is {_text(output)!r}, not {expected!r}"))
    return found


def resource_problems(template: dict, store: str) -> list[Problem]:
    resources = template.get("Resources", {}) or {}
    found: list[Problem] = []
    for other, (_, owned) in STORES.items():
        for name, kind in owned.items():
            if other == store and (resources.get(name) or {}).get("Type") != kind:
                found.append(("resources", f"no {kind} {name}, which the {store} store needs"))
            if other != store and name in resources:
                found.append(("resources", f"{name} (the {other} store's) is deployed with the {store} store"))
    for name in QUEUE_RESOURCES:
        if store == QUEUE_STORE and name not in resources:
            found.append(("resources", f"no {name} with the {store} store"))
        if store != QUEUE_STORE and name in resources:
            found.append(("resources", f"{name} is deployed with the {store} store, which keeps no queue "
                                       "(an acquire with a taskToken fails there with InvalidLockRequest)"))
    return found


def _denies_plain_http(statement: dict) -> bool:
    condition = (statement.get("Condition", {}) or {}).get("Bool", {}) or {}
    actions = _as_list(statement.get("Action", []))
    return (statement.get("Effect") == "Deny" and statement.get("Principal") in ("*", {"AWS": "*"})
            and ("s3:*" in actions or "*" in actions)
            and str(condition.get("aws:SecureTransport")).lower() == "false")


def table_problems(template: dict) -> list[Problem]:
    table = (template.get("Resources", {}) or {}).get(TABLE)
    if table is None:
        return []  # resource_problems reports it
    found: list[Problem] = []
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if table.get(policy) != "Retain":
            found.append(("table", f"{TABLE}'s {policy} is {table.get(policy)!r}, not Retain: deleting or "
                                   "replacing the stack would drop every held lock and fencing counter"))
    protected = (table.get("Properties", {}) or {}).get("DeletionProtectionEnabled")
    if str(protected).lower() != "true":
        found.append(("table", f"{TABLE}'s DeletionProtectionEnabled is {protected!r}, not true: a DeleteTable "
                               "outside the stack would drop every held lock and fencing counter"))
    return found


def bucket_problems(template: dict) -> list[Problem]:
    resources = template.get("Resources", {}) or {}
    bucket = resources.get(BUCKET)
    if bucket is None:
        return []  # resource_problems reports it
    found: list[Problem] = []
    properties = bucket.get("Properties", {}) or {}
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if bucket.get(policy) != "Retain":
            found.append(("bucket", f"{BUCKET}'s {policy} is {bucket.get(policy)!r}, not Retain: deleting or "
                                    "replacing the stack would drop every held lock and fencing counter"))
    if ((properties.get("VersioningConfiguration", {}) or {}).get("Status")) == "Enabled":
        found.append(("bucket", f"{BUCKET} has versioning enabled: every acquire, renewal and release would keep "
                                "a noncurrent version"))
    rules = (properties.get("BucketEncryption", {}) or {}).get("ServerSideEncryptionConfiguration", []) or []
    algorithms = [((rule or {}).get("ServerSideEncryptionByDefault", {}) or {}).get("SSEAlgorithm") for rule in rules]
    if algorithms != ["AES256"]:
        found.append(("bucket", f"{BUCKET}'s default encryption is {algorithms}, not SSE-S3 ([\"AES256\"]): the "
                                "functions have no kms: permissions"))
    block = properties.get("PublicAccessBlockConfiguration", {}) or {}
    off = [key for key in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
           if str(block.get(key)).lower() != "true"]
    if off:
        found.append(("bucket", f"{BUCKET}'s public access block lacks {off}"))
    ownership = [(rule or {}).get("ObjectOwnership") for rule in
                 ((properties.get("OwnershipControls", {}) or {}).get("Rules", []) or [])]
    if ownership != ["BucketOwnerEnforced"]:
        found.append(("bucket", f"{BUCKET}'s object ownership is {ownership}, not BucketOwnerEnforced (ACLs off)"))
    # The bucket policy: deny every request without TLS, on the bucket and its objects.
    policies = [resource for resource in resources.values() if resource.get("Type") == "AWS::S3::BucketPolicy"
                and (resource.get("Properties", {}) or {}).get("Bucket") == {"Ref": BUCKET}]
    covered: set[str] = set()
    for policy in policies:
        for statement in _as_list(((policy.get("Properties", {}) or {}).get("PolicyDocument", {}) or {})
                                  .get("Statement", [])):
            if isinstance(statement, dict) and _denies_plain_http(statement):
                covered |= {_text(resource) for resource in _as_list(statement.get("Resource", []))}
    arn = f"arn:${{AWS::Partition}}:s3:::${{{BUCKET}}}"
    missing = [resource for resource in (arn, f"{arn}/*") if resource not in covered]
    if missing:
        found.append(("bucket", f"no bucket policy of {BUCKET} denies requests without TLS "
                                f"(aws:SecureTransport false) on {missing}"))
    # Lifecycle: lock objects expire only long after the longest lease.
    lifecycle = [rule for rule in ((properties.get("LifecycleConfiguration", {}) or {}).get("Rules", []) or [])
                 if isinstance(rule, dict) and rule.get("Status") == "Enabled"]

    def prefix(rule: dict) -> str:
        return str(rule.get("Prefix", "") or "")

    def overlaps(rule: dict) -> bool:  # the rule reaches some object under the lock prefix
        return S3_PREFIX.startswith(prefix(rule)) or prefix(rule).startswith(S3_PREFIX)

    expiring = [rule for rule in lifecycle if "ExpirationInDays" in rule or "ExpirationDate" in rule]
    if not any(S3_PREFIX.startswith(prefix(rule)) and not rule.get("TagFilters")
               and not any(key.startswith("ObjectSize") for key in rule) for rule in expiring):
        found.append(("bucket", f"no enabled lifecycle rule expires every object under {S3_PREFIX} (owner markers "
                                "the sweep never removed, locks no longer used would stay for ever)"))
    for rule in expiring:
        if not overlaps(rule):
            continue
        days = rule.get("ExpirationInDays")
        if "ExpirationDate" in rule or not isinstance(days, int) or days * DAY <= ACQUIRE_MAX_LEASE_SECONDS:
            found.append(("bucket", f"lifecycle rule {rule.get('Id', '?')} expires objects under {prefix(rule)!r} "
                                    f"after {days if days is not None else rule.get('ExpirationDate')!r} days: a lock "
                                    f"held for the longest lease ({ACQUIRE_MAX_LEASE_SECONDS // DAY} days) could "
                                    "lose its object while live"))
    if not any("AbortIncompleteMultipartUpload" in rule and overlaps(rule) for rule in lifecycle):
        found.append(("bucket", "no enabled lifecycle rule aborts incomplete multipart uploads"))
    return found


def problems(template: dict) -> list[Problem]:
    found = parameter_problems(template)
    stores = [str(value) for value in ((template.get("Parameters", {}) or {}).get(PARAMETER, {}) or {})
              .get("AllowedValues", [])]
    for store in stores:
        label = f"[{PARAMETER}={store}] "
        if store not in STORES:
            found.append(("parameter", f"{label}{PARAMETER} allows {store!r}, which is no store this check knows"))
            continue
        try:
            deployed = specialize(template, {PARAMETER: store})
        except TemplateError as error:
            found.append(("resources", f"{label}{error}"))
            continue
        store_found = url_problems(deployed, store) + resource_problems(deployed, store)
        if store == "s3":
            store_found += bucket_problems(deployed)
        if store == "dynamodb":
            store_found += table_problems(deployed)
        found += [(rule, label + message) for rule, message in store_found]
    return found


# -- self-test --------------------------------------------------------------------------
def _resources(template: dict) -> dict:
    return template["Resources"]


def load_text(text: str) -> dict:
    """The template text as plain data (cfn_template.load reads a file)."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "template.yaml"
        path.write_text(text)
        return load(path)


def _env(function: str, value: Any) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        _resources(template)[function]["Properties"]["Environment"]["Variables"][URL_ENV] = value
    return change


def _bucket(change: Callable[[dict], None]) -> Callable[[dict], None]:
    return lambda template: change(_resources(template)[BUCKET]["Properties"])


def _lifecycle_rule(template: dict) -> dict:
    rules = _resources(template)[BUCKET]["Properties"]["LifecycleConfiguration"]["Rules"]
    if len(rules) != 1:
        raise AssertionError("self-test: the bucket has not one lifecycle rule; update the cases")
    return rules[0]


def _url_if(s3: Any) -> dict:
    return {"Fn::If": ["UseDynamoDbStore", {"Fn::Sub": "dynamodb://${LockTable}"},
                       {"Fn::If": ["UseS3Store", s3, {"Fn::Sub": "ssm:///sfn-lock/${AWS::StackName}"}]}]}


def self_test(template: dict) -> int:
    failures = 0
    shipped = problems(template)
    print(f"{'ok  ' if not shipped else 'FAIL'} the shipped template: {shipped or 'no problem'}")
    failures += bool(shipped)

    def drop_condition(name: str) -> Callable[[dict], None]:
        return lambda t: _resources(t)[name].pop("Condition")

    cases: list[tuple[str, Callable[[dict], None], str, tuple[str, ...]]] = [
        ("release-lock's S3 prefix not locks/", _env("ReleaseLockFunction", _url_if({"Fn::Sub": "s3://${LockBucket}/"})),
         "url", ("LockStore=s3", "ReleaseLockFunction", "different stores")),
        ("the sweep's SSM path another stack's", _env("ReleaseExecutionLocksFunction", {"Fn::If": [
            "UseDynamoDbStore", {"Fn::Sub": "dynamodb://${LockTable}"}, {"Fn::If": [
                "UseS3Store", {"Fn::Sub": "s3://${LockBucket}/locks/"}, "ssm:///sfn-lock/other"]}]}),
         "url", ("LockStore=ssm", "ReleaseExecutionLocksFunction")),
        ("acquire-lock always on the table", _env("AcquireLockFunction", {"Fn::Sub": "dynamodb://${LockTable}"}),
         "resources", ("LockStore=s3", "AcquireLockFunction", "LockTable")),
        ("acquire-lock's URL without a scheme", _env("AcquireLockFunction", _url_if({"Fn::Sub": "${LockBucket}/locks/"})),
         "url", ("LockStore=s3", "refuses")),
        ("the SSM path under /aws", lambda t: [_env(f, {"Fn::If": ["UseDynamoDbStore", {"Fn::Sub": "dynamodb://${LockTable}"},
                                                                  {"Fn::If": ["UseS3Store", {"Fn::Sub": "s3://${LockBucket}/locks/"},
                                                                              {"Fn::Sub": "ssm:///aws/${AWS::StackName}"}]}]})(t)
                                               for f in FUNCTIONS],
         "url", ("LockStore=ssm", "aws or ssm")),
        ("LOCK_TABLE_NAME beside an S3 URL", lambda t: _resources(t)["ReleaseLockFunction"]["Properties"]["Environment"]
         ["Variables"].update({TABLE_ENV: "locks"}),
         "url", ("LockStore=s3", TABLE_ENV, "two stores")),
        ("the table in every store", drop_condition(TABLE), "resources", ("LockStore=ssm", "LockTable")),
        ("the queued workflow in every store", lambda t: (drop_condition("QueuedWorkflowStateMachine")(t),
                                                          drop_condition("QueuedWorkflowLogGroup")(t)),
         "resources", ("LockStore=s3", "QueuedWorkflowStateMachine", "no queue")),
        ("the bucket with the ssm store", lambda t: _resources(t)[BUCKET].update(Condition="UseSsmStore"),
         "resources", ("LockStore=s3", "LockBucket")),
        ("LockStore without ssm", lambda t: t["Parameters"][PARAMETER].update(AllowedValues=["dynamodb", "s3"]),
         "parameter", ("AllowedValues",)),
        ("LockStore defaulting to s3", lambda t: t["Parameters"][PARAMETER].update(Default="s3"),
         "parameter", ("Default",)),
        ("versioning on", _bucket(lambda p: p.update(VersioningConfiguration={"Status": "Enabled"})),
         "bucket", ("versioning",)),
        ("a KMS bucket", _bucket(lambda p: p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
                                 ["ServerSideEncryptionByDefault"].update(SSEAlgorithm="aws:kms")),
         "bucket", ("AES256",)),
        ("a public access block off", _bucket(lambda p: p["PublicAccessBlockConfiguration"].update(
            RestrictPublicBuckets=False)), "bucket", ("RestrictPublicBuckets",)),
        ("ACLs on", _bucket(lambda p: p.pop("OwnershipControls")), "bucket", ("BucketOwnerEnforced",)),
        ("the bucket deleted with the stack", lambda t: _resources(t)[BUCKET].pop("DeletionPolicy"),
         "bucket", ("DeletionPolicy",)),
        ("the table deleted with the stack", lambda t: _resources(t)[TABLE].pop("DeletionPolicy"),
         "table", ("LockStore=dynamodb", "DeletionPolicy")),
        ("the table replaced without a copy", lambda t: _resources(t)[TABLE].update(UpdateReplacePolicy="Delete"),
         "table", ("UpdateReplacePolicy",)),
        ("the table without deletion protection", lambda t: _resources(t)[TABLE]["Properties"].pop(
            "DeletionProtectionEnabled", None), "table", ("DeletionProtectionEnabled",)),
        ("lock objects expired after 300 days", lambda t: _lifecycle_rule(t).update(ExpirationInDays=300),
         "bucket", ("300 days", "longest lease")),
        ("lock objects never expired", lambda t: _lifecycle_rule(t).pop("ExpirationInDays"),
         "bucket", ("expires every object",)),
        ("the expiry on another prefix", lambda t: _lifecycle_rule(t).update(Prefix="old/"),
         "bucket", ("expires every object",)),
        ("a second rule expiring locks after a day", _bucket(lambda p: p["LifecycleConfiguration"]["Rules"].append(
            {"Id": "Soon", "Status": "Enabled", "ExpirationInDays": 1})), "bucket", ("Soon", "longest lease")),
        ("no multipart abort", lambda t: _lifecycle_rule(t).pop("AbortIncompleteMultipartUpload"),
         "bucket", ("multipart",)),
        ("no TLS-only bucket policy", lambda t: _resources(t)[BUCKET_POLICY]["Properties"]["PolicyDocument"]
         ["Statement"][0]["Condition"]["Bool"].update({"aws:SecureTransport": "true"}),
         "bucket", ("TLS",)),
        ("the TLS deny on the bucket only", lambda t: _resources(t)[BUCKET_POLICY]["Properties"]["PolicyDocument"]
         ["Statement"][0].update(Resource={"Fn::GetAtt": [BUCKET, "Arn"]}), "bucket", ("TLS", "/*")),
        ("the LockStoreUrl output another store's", lambda t: t["Outputs"]["LockStoreUrl"].update(
            Value={"Fn::Sub": "dynamodb://${LockTable}"}), "resources", ("LockStore=s3", "LockStoreUrl")),
    ]
    for label, change, rule, words in cases:
        broken = copy.deepcopy(template)
        try:
            change(broken)
            found = [p for p in problems(broken) if p not in shipped]
        except (AssertionError, KeyError, IndexError, TemplateError) as error:
            failures += 1
            print(f"FAIL {rule} reports {label}: {error!r}")
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        failures += not hits
        print(f"{'ok  ' if hits else 'FAIL'} {rule} reports {label}: {hits[0] if hits else found}")
    print(f"lock store self-test: {len(cases) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def with_default(text: str, store: str) -> str:
    """The template's text with LockStore's Default line set to `store`."""
    block = re.search(rf"(?m)^  {PARAMETER}:\n(?:(?:    .*)?\n)*", text)
    if block is None:
        raise TemplateError(f"no {PARAMETER} parameter block (two-space indented) in the template's text")
    body, count = re.subn(r"(?m)^    Default: .*$", f"    Default: {store}", block.group())
    if count != 1:
        raise TemplateError(f"{count} Default lines in the {PARAMETER} parameter block")
    return text[:block.start()] + body + text[block.end():]


def main() -> int:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--stores":
        for store in ((load(Path(args[1])).get("Parameters", {}) or {}).get(PARAMETER, {}) or {}).get(
                "AllowedValues", []):
            print(store)
        return 0
    if len(args) == 3 and args[0] == "--with-default":
        path, store = Path(args[2]), args[1]
        allowed = [str(v) for v in ((load(path).get("Parameters", {}) or {}).get(PARAMETER, {}) or {})
                   .get("AllowedValues", [])]
        if store not in allowed:
            print(f"lock store: {store!r} is not one of {PARAMETER}'s AllowedValues {allowed}", file=sys.stderr)
            return 2
        try:
            changed = with_default(path.read_text(), store)
        except TemplateError as error:
            print(f"lock store: {error}", file=sys.stderr)
            return 2
        if str((load_text(changed).get("Parameters", {}) or {}).get(PARAMETER, {}).get("Default")) != store:
            print(f"lock store: could not set {PARAMETER}'s Default to {store!r}", file=sys.stderr)
            return 2
        sys.stdout.write(changed)
        return 0
    if args == ["--self-test"]:
        return self_test(load(Path(__file__).resolve().parents[2] / "template.yaml"))
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    template = load(Path(args[0]))
    found = problems(template)
    for rule, message in found:
        print(f"lock store: {rule}: {message}")
    stores = ((template.get("Parameters", {}) or {}).get(PARAMETER, {}) or {}).get("AllowedValues", [])
    print(f"lock store: {PARAMETER} {', '.join(map(str, stores))}: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
