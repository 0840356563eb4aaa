#!/usr/bin/env bash
# Builds the GPU benchmark here (x86-64, release, no CUDA needed) and stages it for the
# device machine:
#   .carry/mercury-gpu-bench         the binary (cudarc loads CUDA dynamically there)
#   .carry/device_kernels_sm90.ptx   mercury_lowering::device_kernels_ptx(&TargetOptions::default())
#   .carry/sdpa_baseline.py          the torch SDPA baseline script
#
# Then, with the device tool (one call; kind nvidia-h200, carry [".carry"]), the command used
# for docs/perf-gpu-draft.md (P0 executor self-checks, P2 attention vs SDPA, P3 ring; P1 GEMM
# is unchanged and skipped with --only):
#   export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH;
#   nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv;
#   (PYTHONUNBUFFERED=1 timeout 75 python3 .carry/sdpa_baseline.py --out $OUT/sdpa.json
#      > $OUT/sdpa.log 2>&1; echo "sdpa rc=$?"; grep "^sdpa" $OUT/sdpa.log);
#   timeout 150 .carry/mercury-gpu-bench --only P0,P2,P3
#     --device-kernels-ptx .carry/device_kernels_sm90.ptx --sdpa-json $OUT/sdpa.json
#     --json-out $OUT/bench.json > $OUT/bench.log 2>&1; echo "bench rc=$?";
#   grep -E "^  \((P3|kernel)" $OUT/bench.log; sed -n "/==== summary/,\$p" $OUT/bench.log
# (drop --only for P1 as well). The binary prints one summary table at the end (ratios vs
# cuBLAS, cuDNN/FA2 SDPA, and ring time over the single-device patch's time).
#
# Usage: scripts/gpu-bench.sh [--no-ptx]   (--no-ptx: skip the MLIR build; the bench then
# falls back to its NVRTC stand-in device kernels and says so in its report)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/work/target-gpu}"
mkdir -p "$root/.carry"

echo "== building mercury-gpu-bench (release) into $CARGO_TARGET_DIR"
(cd "$root" && cargo build --release -p mercury-runtime --features cuda --bin mercury-gpu-bench)
cp "$CARGO_TARGET_DIR/release/mercury-gpu-bench" "$root/.carry/"
cp "$root/scripts/sdpa_baseline.py" "$root/.carry/"

if [[ "${1:-}" != "--no-ptx" ]]; then
  echo "== generating the device-kernel PTX through mercury-lowering (links MLIR; slow)"
  gen="$(mktemp -d /tmp/mercury-dkptx.XXXXXX)"
  mkdir -p "$gen/src"
  cat > "$gen/Cargo.toml" <<TOML
[package]
name = "mercury-dkptx"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
mercury-lowering = { path = "$root/lowering/gpu" }
TOML
  cat > "$gen/src/main.rs" <<'RS'
fn main() {
    let opts = mercury_lowering::TargetOptions::default();
    match mercury_lowering::device_kernels_ptx(&opts) {
        Ok(ptx) => print!("{ptx}"),
        Err(e) => {
            eprintln!("device_kernels_ptx: {e}");
            std::process::exit(1);
        }
    }
}
RS
  # The MLIR prefixes normally come from the workspace's .cargo/config.toml.
  prefix="$(llvm-config-22 --prefix 2>/dev/null || echo /usr/lib/llvm-22)"
  export MLIR_SYS_220_PREFIX="$prefix" TABLEGEN_220_PREFIX="$prefix" LLVM_SYS_221_PREFIX="$prefix"
  (cd "$gen" && cargo run --release --quiet > "$root/.carry/device_kernels_sm90.ptx")
  grep -c "^\.visible \.entry\|^\.entry" "$root/.carry/device_kernels_sm90.ptx" | sed 's/^/   entries: /'
  rm -rf "$gen"
fi
ls -la "$root/.carry"
