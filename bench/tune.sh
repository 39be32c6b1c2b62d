#!/usr/bin/env bash
# The tuning comparison behind the recommendations in bench/README.md: builds
# variants of the three functions and measures them side by side with the
# current release build, in one run (so their ratios share the same noise).
#
#   bench/tune.sh [bench.py options]      e.g. --cold-runs 7 --warm-runs 3
#
# Variants (each in its own target dir, so the workspace's target/release is
# never overwritten):
#   ours            target/release as the workspace's Cargo.toml builds it
#   opt-s           the same with CARGO_PROFILE_RELEASE_OPT_LEVEL=s (the profile has "z")
#   unwind          the same with CARGO_PROFILE_RELEASE_PANIC=unwind (the profile aborts)
#   system-store    ours, run with SSL_CERT_FILE and SSL_CERT_DIR naming the
#                   system store: what the SDK's default client read at init
#   amazon-roots    ours, run with SSL_CERT_FILE holding only the five Amazon
#                   Trust Services roots: what a smaller built-in set would save
#   log             two more runs of ours: AWS_LAMBDA_LOG_LEVEL=WARN and METRICS=off
#                   (nothing written per invoke) and plain-text instead of JSON logs
# Set TUNE_VARIANTS to choose; default "system-store amazon-roots log". A
# profile variant rebuilds every dependency once: 10-20 minutes on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
variants=${TUNE_VARIANTS:-"system-store amazon-roots log"}
say() { echo "tune: $*" >&2; }

say "base build (bench/run.sh's, release)"
cargo build --quiet --release --workspace --bins
cp Cargo.lock bench/rust/Cargo.lock
CARGO_TARGET_DIR="$root/target" cargo build --quiet --release --manifest-path bench/rust/Cargo.toml --bins

args=(--variant "ours=$root/target/release")

roots="$root/target/bench-tune/amazon-roots.pem"
for variant in $variants; do
  case "$variant" in
    opt-s | opt-z | unwind)
      profile_env=(CARGO_PROFILE_RELEASE_OPT_LEVEL=${variant#opt-})
      [ "$variant" = unwind ] && profile_env=(CARGO_PROFILE_RELEASE_PANIC=unwind)
      say "building $variant (${profile_env[*]}) in target/bench-tune/$variant"
      env CARGO_TARGET_DIR="$root/target/bench-tune/$variant" "${profile_env[@]}" \
        cargo build --quiet --release --workspace --bins
      args+=(--variant "$variant=$root/target/bench-tune/$variant/release")
      ;;
    system-store)
      args+=(--variant "system-store=$root/target/release"
        --variant-env "system-store:SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"
        --variant-env "system-store:SSL_CERT_DIR=/etc/ssl/certs")
      ;;
    amazon-roots)
      mkdir -p "$(dirname "$roots")"
      cat /etc/ssl/certs/Amazon_Root_CA_[1-4].pem \
        "/etc/ssl/certs/Starfield_Services_Root_Certificate_Authority_-_G2.pem" >"$roots"
      args+=(--variant "amazon-roots=$root/target/release" --variant-env "amazon-roots:SSL_CERT_FILE=$roots")
      ;;
    log)
      args+=(--variant "log-warn=$root/target/release" --variant-env "log-warn:AWS_LAMBDA_LOG_LEVEL=WARN"
        --variant-env "log-warn:METRICS=off"
        --variant "log-text=$root/target/release" --variant-env "log-text:AWS_LAMBDA_LOG_FORMAT=Text")
      ;;
    *) say "unknown variant $variant"; exit 2 ;;
  esac
done

exec "$root/.venv/bin/python" "$root/bench/bench.py" "${args[@]}" \
  --no-python --null-function "$root/target/release/null-function" --bare-call "$root/target/release/bare-call" \
  --bench-python "$root/.venv-bench/bin/python" --work-dir "$root/target/bench" "$@"
