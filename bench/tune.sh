#!/usr/bin/env bash
# The tuning comparison behind the recommendations in bench/README.md: builds
# variants of the three functions and measures them side by side with the
# current release build, in one run (so their ratios share the same noise).
#
#   bench/tune.sh [bench.py options]      e.g. --cold-runs 7 --warm-runs 3
#
# Variants (each in its own target dir or under its own binary names, so the
# workspace's target/release is never overwritten):
#   ours            target/release as the workspace's Cargo.toml builds it
#   opt-s           the same with CARGO_PROFILE_RELEASE_OPT_LEVEL=s
#   roots-env       ours, run with SSL_CERT_FILE holding only the Amazon roots
#                   (emulates trusting only them, without a rebuild)
#   roots           bench/tuning/amazon-roots-and-lean-config.patch applied to a
#                   copy of crates/: an HTTPS client trusting the Amazon roots only
#   lean            the same patch with its `lean` feature: also an SDK config
#                   read from the environment instead of aws-config's chains
#   opt-s+lean      both: the lean patch built with opt-level "s"
#   log             two more runs of ours: AWS_LAMBDA_LOG_LEVEL=WARN (no
#                   per-invoke INFO line) and plain-text instead of JSON logs
# Set TUNE_VARIANTS to choose; default "opt-s roots lean opt-s+lean". A profile
# variant rebuilds every dependency once: about 15-20 minutes on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
variants=${TUNE_VARIANTS:-"opt-s roots lean opt-s+lean"}
say() { echo "tune: $*" >&2; }

say "base build (bench/run.sh's, release)"
cargo build --quiet --release --workspace --bins
cp Cargo.lock bench/rust/Cargo.lock
CARGO_TARGET_DIR="$root/target" cargo build --quiet --release --manifest-path bench/rust/Cargo.toml --bins

args=(--variant "ours=$root/target/release")
functions=(acquire-lock release-lock release-execution-locks)

for variant in $variants; do
  case "$variant" in
    opt-s | opt-z)
      level=${variant#opt-}
      say "building $variant (opt-level=\"$level\") in target/bench-tune/$variant"
      CARGO_TARGET_DIR="$root/target/bench-tune/$variant" CARGO_PROFILE_RELEASE_OPT_LEVEL=$level \
        cargo build --quiet --release --workspace --bins
      args+=(--variant "$variant=$root/target/bench-tune/$variant/release")
      ;;
    log)
      args+=(--variant "log-warn=$root/target/release" --variant-env "log-warn:AWS_LAMBDA_LOG_LEVEL=WARN"
        --variant "log-text=$root/target/release" --variant-env "log-text:AWS_LAMBDA_LOG_FORMAT=Text")
      ;;
    roots | lean | opt-s+lean)
      src="$root/target/bench-tune/src-$variant"
      target="$root/target"
      profile_env=()
      if [ "$variant" = opt-s+lean ]; then
        # Reuses the opt-s variant's compiled dependencies.
        target="$root/target/bench-tune/opt-s"
        profile_env=(CARGO_PROFILE_RELEASE_OPT_LEVEL=s)
      fi
      bin_suffix=${variant//+/-}
      say "building $variant from a patched copy of crates/ in $src"
      # Staged afresh, then copied over only where the content changed, so an
      # unchanged copy keeps its mtimes and cargo does not rebuild it.
      stage="$src.stage"
      rm -rf "$stage"
      mkdir -p "$stage" "$src"
      cp -r Cargo.toml Cargo.lock crates "$stage/"
      rm -rf "$stage"/crates/*/tests
      (cd "$stage" && patch -s -p1 <"$root/bench/tuning/amazon-roots-and-lean-config.patch")
      features=()
      for fn in "${functions[@]}"; do
        # Own binary names, so the shared target dir keeps the real ones.
        printf '\n[features]\nlean = ["sfn-lock/lean"]\n\n[[bin]]\nname = "%s-%s"\npath = "src/main.rs"\n' \
          "$fn" "$bin_suffix" >>"$stage/crates/$fn/Cargo.toml"
        [ "$variant" != roots ] && features+=("$fn/lean")
      done
      (cd "$stage" && find . -type f) | while read -r file; do
        if ! cmp -s "$stage/$file" "$src/$file"; then
          mkdir -p "$(dirname "$src/$file")"
          cp "$stage/$file" "$src/$file"
        fi
      done
      rm -rf "$stage"
      feature_flag=()
      [ ${#features[@]} -gt 0 ] && feature_flag=(--features "$(IFS=,; echo "${features[*]}")")
      (cd "$src" && env "${profile_env[@]}" CARGO_TARGET_DIR="$target" cargo build --quiet --release --workspace --bins "${feature_flag[@]}")
      mkdir -p "$root/target/bench-tune/$bin_suffix-bin"
      for fn in "${functions[@]}"; do
        ln -sf "$target/release/$fn-$bin_suffix" "$root/target/bench-tune/$bin_suffix-bin/$fn"
      done
      variant_dir="$root/target/bench-tune/$bin_suffix-bin"
      args+=(--variant "$variant=$variant_dir")
      ;;
    *) say "unknown variant $variant"; exit 2 ;;
  esac
done

# roots-env: no build, the base binaries with a trust store of five roots.
roots="$root/target/bench-tune/amazon-roots.pem"
mkdir -p "$root/target/bench-tune/empty-cert-dir"
cat /etc/ssl/certs/Amazon_Root_CA_[1-4].pem \
  "/etc/ssl/certs/Starfield_Services_Root_Certificate_Authority_-_G2.pem" >"$roots"
args+=(--variant "roots-env=$root/target/release"
  --variant-env "roots-env:SSL_CERT_FILE=$roots"
  --variant-env "roots-env:SSL_CERT_DIR=$root/target/bench-tune/empty-cert-dir")

exec "$root/.venv/bin/python" "$root/bench/bench.py" "${args[@]}" \
  --no-python --null-function "$root/target/release/null-function" --bare-call "$root/target/release/bare-call" \
  --bench-python "$root/.venv-bench/bin/python" --work-dir "$root/target/bench" "$@"
