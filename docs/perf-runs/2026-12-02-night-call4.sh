#!/usr/bin/env bash
# Last device call of the 2026-12-02 night session (one H200): the compiled schedules at 8
# virtual ranks, --alias 2 and --alias 8 after the evening's lowering changes (with the new
# shift-reduce-halves-rs), then the profile-guided search on virtual ranks (the tune part's
# 8- and 2-virtual-rank cases, with the new GEMM reduce-scatter cases).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-night-call4.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/s" "$OUT/t"
( OUT=$OUT/s MERCURY_GPU_PARTS=schedules,aliased timeout 280 bash scripts/gpu.sh --remote > "$OUT/schedules.txt" 2>&1; echo "schedules+aliased rc=$?" )
( OUT=$OUT/t MERCURY_GPU_PARTS=tune MERCURY_GPU_CASES=virtual timeout 290 bash scripts/gpu.sh --remote > "$OUT/tune.txt" 2>&1; echo "tune rc=$?" )
grep -c '| ok |' "$OUT/schedules.txt"; grep '^| ' "$OUT/schedules.txt" | grep -v '| ok |' | grep -v -- '---' | head
grep -E '^\| (shift-reduce|megatron|chunked)' "$OUT/schedules.txt"
echo; tail -12 "$OUT/tune.txt"
