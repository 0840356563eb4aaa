#!/usr/bin/env bash
# NCCL's bf16 reduce-scatter and all-reduce of GEMM partial sums, run for the first time: two
# processes (one rank each, --launcher env --transport nccl) on the one GPU of `nvidia-h200`,
# kept apart by NCCL_HOSTID and joined by NCCL's socket transport over loopback (NCCL refuses
# two ranks of one communicator on one GPU otherwise; docs/multi-gpu.md). Every run is checked
# against the single-device patch in both processes. .carry/mercury-run-before is 7617bee (the
# all-reduce widened to f32 on the wire), .carry/mercury-run widens nothing: bf16 into bf16.
# The socket is a slow link (about 2 GB/s), so the times show bytes, not NVLink speed.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-nccl-bf16-2proc.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=${TMPDIR:-/tmp}/nccl-bf16; mkdir -p "$w"
sed 's/shape \[8\]/shape [2]/; s/@m = 8192/@m = 4096/' examples/gemm_rs.mlir > "$w/gemm_rs_2.mlir"
sed 's/bf16 out sharding \[S(0), R\]/bf16 out sharding [R, R]/' "$w/gemm_rs_2.mlir" > "$w/gemm_ar_2.mlir"
sed 's/factor=8/factor=2/' examples/schedules/megatron_rs.sched > "$w/megatron_2.sched"
sed 's/factor=8/factor=2/g' examples/schedules/shift_reduce.sched > "$w/shift_reduce_2.sched"
cases=(
  "megatron-rs gemm_rs_2.mlir megatron_2.sched"
  "megatron-ar gemm_ar_2.mlir megatron_2.sched"
  "shift-reduce-rs gemm_rs_2.mlir shift_reduce_2.sched"
)
printf 'rep\tcase\twho\tschedule ms\tsingle ms\trc0 rc1\tcheck (process 0)\n'
for rep in 1 2; do
  for c in "${cases[@]}"; do
    read -r name op sched <<< "$c"
    for who in before after; do
      b=.carry/mercury-run; [[ $who != after ]] && b=.carry/mercury-run-$who
      rm -f "$w/id"
      pids=()
      for r in 0 1; do
        env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE="$w/id" \
          NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
          timeout 240 "$b" --backend cuda --launcher env --transport nccl --check --bench \
          --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
          "$w/$op" --schedule "$w/$sched" > "$w/$name-$who-r$r.log" 2>&1 &
        pids+=($!)
      done
      wait "${pids[0]}"; rc0=$?; wait "${pids[1]}"; rc1=$?
      l="$w/$name-$who-r0.log"
      printf '%s\t%s\t%s\t%s\t%s\t%s %s\t%s\n' "$rep" "$name" "$who" \
        "$(grep '| schedule,' "$l" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep '| schedule,' "$l" | awk -F'|' '{print $5}' | xargs)" "$rc0" "$rc1" \
        "$(grep -m1 'check @C' "$l" | grep -o 'relative error.*')"
      if [[ $rc0 != 0 || $rc1 != 0 ]]; then tail -4 "$l"; tail -4 "$w/$name-$who-r1.log"; fi
    done
  done
done
grep -h -m3 'comm-plan\|@C:' "$w"/megatron-ar-after-r0.log "$w"/megatron-rs-after-r0.log
