#!/usr/bin/env bash
# Installs what building and testing Mercury-rs needs, and only what is missing:
#   - LLVM/MLIR 22 from apt (lit, FileCheck and mlir-opt for the tests; the MLIR libraries that
#     lowering/ links through melior), plus a C/C++ toolchain and python3 for lit (and python3-venv
#     for the Python package's tests: scripts/test_python.sh);
#   - rustfmt and clippy (rustup components); rustup itself if there is no cargo at all.
# Safe to run again: with everything present it installs nothing. Installing needs root (or
# sudo). Tested on Debian 12; on a distribution without llvm-22 packages it adds apt.llvm.org.
set -euo pipefail

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libclang-22-dev libpolly-22-dev
  libzstd-dev libz3-dev libxml2-dev zlib1g-dev build-essential python3 python3-venv
)

say() { printf '== setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

add_llvm_apt_repo() {
  # shellcheck disable=SC1091
  . /etc/os-release
  local codename="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
  say "no llvm-22 packages in the configured apt sources: adding apt.llvm.org ($codename)"
  as_root apt-get install -y --no-install-recommends ca-certificates curl gnupg
  curl -fsSL https://apt.llvm.org/llvm-snapshot.gpg.key | as_root gpg --dearmor --yes -o /usr/share/keyrings/apt.llvm.org.gpg
  echo "deb [signed-by=/usr/share/keyrings/apt.llvm.org.gpg] http://apt.llvm.org/$codename/ llvm-toolchain-$codename-22 main" |
    as_root tee /etc/apt/sources.list.d/llvm-22.list >/dev/null
  as_root apt-get update
}

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
  done
elif ! command -v llvm-config-22 >/dev/null 2>&1; then
  die "no dpkg/apt here and no llvm-config-22 on PATH: install LLVM/MLIR 22 (${packages[*]}) by hand"
fi

if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get"
  say "installing: ${missing[*]}"
  as_root apt-get update
  if ! apt-cache show llvm-22-dev >/dev/null 2>&1; then
    add_llvm_apt_repo
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  say "LLVM/MLIR 22 packages: all present"
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  command -v curl >/dev/null 2>&1 || as_root apt-get install -y --no-install-recommends ca-certificates curl
  say "no cargo: installing the Rust toolchain with rustup (stable, minimal + rustfmt + clippy)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt -c clippy
  export PATH="$HOME/.cargo/bin:$PATH"
  say "add \$HOME/.cargo/bin to your PATH (or: . \"\$HOME/.cargo/env\")"
fi
for component in rustfmt clippy; do
  tool=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
  if ! cargo "$tool" --version >/dev/null 2>&1; then
    command -v rustup >/dev/null 2>&1 || die "cargo $tool is missing and there is no rustup to add $component"
    say "adding the $component component"
    rustup component add "$component"
  fi
done

# Fail here, with a clear message, rather than deep inside the build or the tests.
for tool in llvm-config-22 lit-22 FileCheck-22 not-22 mlir-opt-22; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH after installing LLVM 22"
done
prefix="$(llvm-config-22 --prefix)"
[ -f "$prefix/lib/libMLIR.so" ] || [ -f "$prefix/lib/libMLIRIR.a" ] || die "no MLIR libraries under $prefix/lib (libmlir-22-dev)"

say "versions:"
echo "  $(cargo --version)"
echo "  $(rustc --version)"
echo "  LLVM $(llvm-config-22 --version) at $prefix"
echo "  $(lit-22 --version 2>&1 | head -1)"
echo "  $(FileCheck-22 --version | grep -i 'llvm version' | head -1 | sed 's/^ *//')"
echo "  mlir-opt: $(mlir-opt-22 --version | grep -i 'version' | head -1 | sed 's/^ *//')"
