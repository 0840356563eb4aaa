# The one device call of the 2026-12-02 evening session (one H200): the compiled schedules with
# virtual ranks and on aliased device ids (--alias 2, 8), the P0 self-checks (new: reduce),
# mercury-mgpu selfcheck --alias 2, NCCL reduce in two processes, the baselines' element bound.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-evening-call.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/s
( OUT=$OUT/s MERCURY_GPU_PARTS=schedules,aliased MERCURY_BENCH_ONLY=P0 timeout 330 bash scripts/gpu.sh --remote > $OUT/schedules.txt 2>&1; echo "schedules+aliased rc=$?" )
( OUT=$OUT/b MERCURY_GPU_PARTS=bench MERCURY_BENCH_ONLY=P0 MERCURY_SDPA_CASES=none timeout 90 bash scripts/gpu.sh --remote > $OUT/p0.txt 2>&1; echo "P0 rc=$?"; grep -iE 'reduce|fail|pass' $OUT/p0.txt | tail -8 )
( timeout 120 .carry/mercury-mgpu selfcheck --alias 2 --transport both --device-kernels-ptx .carry/device_kernels.ptx > $OUT/selfcheck.txt 2>&1; echo "selfcheck --alias 2 rc=$?"; grep -iE 'reduce|FAIL|rows ok|passed' $OUT/selfcheck.txt | tail -8 )
( timeout 160 bash docs/perf-runs/2026-12-02-nccl-reduce-2proc.sh > $OUT/nccl-reduce.txt 2>&1; echo "nccl reduce rc=$?"; cat $OUT/nccl-reduce.txt | tail -14 )
python3 - <<'PY'
import sys; sys.path.insert(0, "scripts/baselines")
import torch, _common as C
ref = torch.randn(4096, 64, dtype=torch.float64)
got = ref.clone(); got[17] = 0.0  # one row of 4096 left at zero
d = got - ref; c = C.element_weight(2e-2)
rel, mx, eok, ok = C.check_stats(float((d*d).sum()), float((ref*ref).sum()), float(d.abs().max()), C.element_excess(d, ref, c), ref.numel(), 2e-2)
print(f"python element bound: one zero row -> rel {rel:.2e} elements ok {eok} ok {ok} (want False False)")
d2 = (ref * (1 + 1e-3)) - ref
rel, mx, eok, ok = C.check_stats(float((d2*d2).sum()), float((ref*ref).sum()), float(d2.abs().max()), C.element_excess(d2, ref, c), ref.numel(), 2e-2)
print(f"python element bound: 1e-3 everywhere -> rel {rel:.2e} elements ok {eok} ok {ok} (want True True)")
PY
echo; tail -70 $OUT/schedules.txt
