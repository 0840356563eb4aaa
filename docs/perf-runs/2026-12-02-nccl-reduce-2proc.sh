#!/usr/bin/env bash
# NCCL's reduce to one rank (Collective::Reduce -> ncclReduce), run for the first time: the
# chunked GEMM reduce-scatter (K split over 2 ranks, M tiled, each tile's partial sums reduced
# to its owner) in two processes (one rank each, --launcher env --transport nccl) on the one
# GPU of `nvidia-h200`, kept apart by NCCL_HOSTID and joined by NCCL's socket transport over
# loopback, as in 2026-12-02-nccl-bf16-2proc.sh. Every run is checked against the
# single-device patch in both processes. Megatron's reduce-scatter runs beside it: the same
# bytes. The socket is a slow link (about 2 GB/s): the times show bytes, not NVLink speed.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-nccl-reduce-2proc.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=${TMPDIR:-/tmp}/nccl-reduce; mkdir -p "$w"
sed 's/shape \[8\]/shape [2]/; s/@m = 8192/@m = 4096/' examples/gemm_rs.mlir > "$w/gemm_rs_2.mlir"
sed 's/factor=8/factor=2/' examples/schedules/megatron_rs.sched > "$w/megatron_2.sched"
# M in 2 tiles (one per owner) and in 4 (two per owner).
sed 's/axis=k factor=8/axis=k factor=2/; s/axis=m factor=8/axis=m factor=2/' examples/schedules/chunked_rs.sched > "$w/chunked_2.sched"
sed 's/axis=k factor=8/axis=k factor=2/; s/axis=m factor=8/axis=m factor=4/' examples/schedules/chunked_rs.sched > "$w/chunked_4.sched"
cases=(
  "megatron-rs megatron_2.sched"
  "chunked-rs-m2 chunked_2.sched"
  "chunked-rs-m4 chunked_4.sched"
)
printf 'case\tschedule ms\tsingle ms\trc0 rc1\tcheck (process 0)\tcheck (process 1)\n'
for c in "${cases[@]}"; do
  read -r name sched <<< "$c"
  rm -f "$w/id"
  pids=()
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE="$w/id" \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
      timeout 150 .carry/mercury-run --backend cuda --launcher env --transport nccl --check --bench \
      --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
      "$w/gemm_rs_2.mlir" --schedule "$w/$sched" > "$w/$name-r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?; wait "${pids[1]}"; rc1=$?
  l="$w/$name-r0.log"
  printf '%s\t%s\t%s\t%s %s\t%s\t%s\n' "$name" \
    "$(grep '| schedule,' "$l" | awk -F'|' '{print $3}' | xargs)" \
    "$(grep '| schedule,' "$l" | awk -F'|' '{print $5}' | xargs)" "$rc0" "$rc1" \
    "$(grep -m1 'check @C' "$l" | grep -o 'relative error [^ ]*')" \
    "$(grep -m1 'check @C' "$w/$name-r1.log" | grep -o 'relative error [^ ]*')"
  if [[ $rc0 != 0 || $rc1 != 0 ]]; then tail -4 "$l"; tail -4 "$w/$name-r1.log"; fi
  grep -h -m2 '@C:' "$l" || true
done
