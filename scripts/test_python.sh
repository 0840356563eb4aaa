#!/usr/bin/env bash
# The Python package's checks (scripts/test.sh runs them): installs `mercury` (pip install
# ./python) into a virtual environment that has torch, pytest and ruff from PyPI, then runs
# `ruff check`, `ruff format --check` and pytest (python/tests: the CPU executor against torch
# in float64).
#
# The environment is kept between runs of the same machine (torch's Linux wheel pulls its CUDA
# libraries: ~5 GB, 1-2 minutes to install), keyed by the Python version and the package's
# requirements in python/pyproject.toml; a run with other requirements makes a new one and
# removes the old. $MERCURY_VENV names another place. Only the package is rebuilt each run,
# with the workspace's target directory and the dev profile (MATURIN_PEP517_ARGS): the crates
# `cargo build --workspace` compiled before are reused as they are (the package is a workspace
# member, so its dependencies' features are the workspace's; .cargo/config.toml gives cargo the
# PyO3 settings maturin uses, so pyo3 and the package's crate are not rebuilt either); the
# tests always run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "test_python: no $python on PATH" >&2; exit 1; }
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
requirements=$(grep -E '^(requires|dependencies|test) = ' python/pyproject.toml)
key=$(printf '%s\n%s\n' "$version" "$requirements" | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mercury-rs
venv=${MERCURY_VENV:-$cache/venv-$key}
export MATURIN_PEP517_ARGS=${MATURIN_PEP517_ARGS:---profile dev}

# pip runs maturin (the build backend) from the environment.
export PATH="$venv/bin:$PATH"
t0=$SECONDS
if [ -f "$venv/.complete" ]; then
  echo "python: environment $venv (kept from an earlier run)"
  "$venv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./python
else
  echo "python: making $venv (torch, pytest, ruff from PyPI)"
  if [ -z "${MERCURY_VENV:-}" ] && [ -d "$cache" ]; then
    find "$cache" -maxdepth 1 -name 'venv-*' ! -name "venv-$key" -exec rm -rf {} +
  fi
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "maturin>=1.7,<2"
  "$venv/bin/pip" install -q --no-build-isolation "./python[test]"
  touch "$venv/.complete"
fi
echo "python: package installed in $((SECONDS - t0)) s"
"$venv/bin/python" -c 'import mercury, torch; print("python: mercury", mercury.__version__, "torch", torch.__version__)'
"$venv/bin/ruff" check python
"$venv/bin/ruff" format --check python
# From python/: the installed package is imported, not the source folder.
(cd python && "$venv/bin/pytest" -q -p no:cacheprovider tests)
