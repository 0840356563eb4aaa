#!/usr/bin/env bash
# Shift-reduce in half blocks (examples/schedules/shift_reduce_halves.sched) against
# shift-reduce and Megatron, the GEMM reduce-scatter on 2 ranks (K split 2 ways, C row-sharded:
# the suite's gemm.rs cases), on one H200: 2 virtual ranks and 2 aliased device ids, alternated,
# 3 repetitions, every run checked against the single-device patch; then the same over NCCL in
# two processes on the one GPU (socket).
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-night-halves.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=${TMPDIR:-/tmp}/halves; mkdir -p "$w"
bash scripts/suite_cases.sh "$w" 2 > "$w/cases.tsv"
printf 'rep\tcase\tplace\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for id in gemm.rs.m4096.n8192.k8192 gemm.rs.m8192.n8192.k8192 gemm.rs.m16384.n8192.k8192 gemm.rs.llama70b.m8192; do
    for v in "" .halves .megatron; do
      sched=$(awk -F'\t' -v id="$id$v" '$1 == id { print $6 }' "$w/cases.tsv")
      for place in virtual alias2; do
        [[ $place == virtual ]] && pl=(--virtual) || pl=(--alias 2)
        r=$(.carry/mercury-run --backend cuda "${pl[@]}" --check --bench --iters 20 --warmup 5 \
          --device-kernels .carry/device_kernels.ptx "$w/$id.mlir" --schedule "$sched" 2>&1); rc=$?
        printf '%s\t%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" "$id$v" "$place" \
          "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
          "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" \
          "$(grep -m1 'check @. vs' <<< "$r" | grep -o 'relative error [^ ]*')"
        [[ $rc == 0 ]] || tail -5 <<< "$r"
      done
    done
  done
done
echo; echo "NCCL, two processes on one GPU (socket), gemm.rs.m4096.n8192.k8192:"
printf 'case\tschedule ms\trc0 rc1\tcheck (process 0)\tcheck (process 1)\n'
for v in "" .halves; do
  id=gemm.rs.m4096.n8192.k8192; sched=$(awk -F'\t' -v id="$id$v" '$1 == id { print $6 }' "$w/cases.tsv")
  rm -f "$w/id"; pids=()
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE="$w/id" \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
      timeout 150 .carry/mercury-run --backend cuda --launcher env --transport nccl --check --bench \
      --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
      "$w/$id.mlir" --schedule "$sched" > "$w/nccl$v-r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?; wait "${pids[1]}"; rc1=$?
  printf '%s\t%s\t%s %s\t%s\t%s\n' "$id$v" \
    "$(grep '| schedule,' "$w/nccl$v-r0.log" | awk -F'|' '{print $3}' | xargs)" "$rc0" "$rc1" \
    "$(grep -m1 'check @C' "$w/nccl$v-r0.log" | grep -o 'relative error [^ ]*')" \
    "$(grep -m1 'check @C' "$w/nccl$v-r1.log" | grep -o 'relative error [^ ]*')"
  if [[ $rc0 != 0 || $rc1 != 0 ]]; then tail -4 "$w/nccl$v-r0.log"; tail -4 "$w/nccl$v-r1.log"; fi
done
