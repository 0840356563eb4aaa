#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy (warnings are errors) and all tests of the
# workspace -- unit tests, integration and snapshot tests (test/), and the lit suite (lit/,
# run by tools/mercury-opt/tests/lit.rs against the freshly built binaries).
# Installs missing tools first (scripts/setup.sh). Under CI=true a missing tool fails the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# .ci/run has just done this (and printed the versions); skip the second round.
[ "${MERCURY_SETUP_DONE:-}" = 1 ] || bash scripts/setup.sh

step() { printf '\n== %s\n' "$*"; }
step "cargo fmt --all -- --check"
cargo fmt --all -- --check
step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# Every binary first: lit (tools/mercury-opt/tests/lit.rs) runs mercury-run and mercury-tune
# from target/debug, and `cargo test` alone builds a binary only for its own package's tests.
step "cargo build --workspace --bins"
cargo build --workspace --bins
step "cargo test --workspace"
cargo test --workspace
# The Python package (python/): pip install ./python into a kept virtual environment with torch,
# then ruff and pytest (scripts/test_python.sh).
step "python: pip install ./python, ruff, pytest"
bash scripts/test_python.sh
step "all checks passed"
