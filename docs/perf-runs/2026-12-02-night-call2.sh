#!/usr/bin/env bash
# Second device call of the 2026-12-02 night session (one H200), after the lowering's two
# changes (combines beside later tiles; a tile every member owns a part of is one
# reduce-scatter): (1) the compiled schedules, virtual and aliased (with the new case
# chunked-rs-cols: C column-sharded, a reduce-scatter per row tile along the columns);
# (2) before (ccacf4e: 8 reduces per tile after the last tile) vs after on that case;
# (3) the same over NCCL in two processes on the one GPU (socket): the strided chunks of a
# row tile through ncclReduceScatter, checked in both processes.
# run(kind="nvidia-h200", carry=[".carry"], command="bash docs/perf-runs/2026-12-02-night-call2.sh")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[[ -e $d/libcudnn.so.9 ]] && export MERCURY_CUDNN_LIB=$d/libcudnn.so.9
w=${TMPDIR:-/tmp}/call2; mkdir -p "$w" "$OUT/s"
( OUT=$OUT/s MERCURY_GPU_PARTS=schedules,aliased MERCURY_BENCH_ONLY=P0 timeout 330 bash scripts/gpu.sh --remote > "$OUT/schedules.txt" 2>&1; echo "schedules+aliased rc=$?" )
sed 's/out sharding \[S(0), R\]/out sharding [R, S(0)]/' examples/gemm_rs.mlir > "$w/cols8.mlir"
sed 's/shape \[8\]/shape [2]/; s/@m = 8192/@m = 4096/' "$w/cols8.mlir" > "$w/cols2.mlir"
sed 's/axis=k factor=8/axis=k factor=2/; s/axis=m factor=8/axis=m factor=4/' examples/schedules/chunked_rs.sched > "$w/chunked_2_m4.sched"
sed 's/factor=8/factor=2/' examples/schedules/megatron_rs.sched > "$w/megatron_2.sched"
echo; printf 'rep\tcase\tplace\twho\tschedule ms\tsingle ms\trc\tcheck\n'
for rep in 1 2 3; do
  for place in virtual alias2 alias8; do
    case $place in virtual) pl=(--virtual);; alias2) pl=(--alias 2);; alias8) pl=(--alias 8);; esac
    for who in before after; do
      b=.carry/mercury-run; [[ $who != after ]] && b=.carry/mercury-run-$who
      r=$($b --backend cuda "${pl[@]}" --check --bench --iters 20 --warmup 5 \
        --device-kernels .carry/device_kernels.ptx "$w/cols8.mlir" --schedule examples/schedules/chunked_rs.sched 2>&1); rc=$?
      printf '%s\t%s\t%s\t%s\t%s\t%s\trc=%s\t%s\n' "$rep" chunked-rs-cols "$place" "$who" \
        "$(grep '^| schedule,' <<< "$r" | awk -F'|' '{print $3}' | xargs)" \
        "$(grep '^| single-device' <<< "$r" | awk -F'|' '{print $3}' | xargs)" "$rc" \
        "$(grep -m1 'check @. vs' <<< "$r" | grep -o 'relative error.*')"
      [[ $rc == 0 ]] || tail -5 <<< "$r"
      [[ $rep == 1 && $place == virtual ]] && grep -h -m1 '@C:' <<< "$r"
    done
  done
done
echo; echo "NCCL, two processes on one GPU (socket), C column-sharded, 4096 x 8192 x 8192, 2 ranks:"
printf 'case\tschedule ms\trc0 rc1\tcheck (process 0)\tcheck (process 1)\n'
for c in "megatron-cols megatron_2.sched" "chunked-cols-m4 chunked_2_m4.sched"; do
  read -r name sched <<< "$c"
  rm -f "$w/id"; pids=()
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE="$w/id" \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
      timeout 150 .carry/mercury-run --backend cuda --launcher env --transport nccl --check --bench \
      --iters 10 --warmup 3 --device-kernels .carry/device_kernels.ptx \
      "$w/cols2.mlir" --schedule "$w/$sched" > "$w/$name-r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?; wait "${pids[1]}"; rc1=$?
  printf '%s\t%s\t%s %s\t%s\t%s\n' "$name" \
    "$(grep '| schedule,' "$w/$name-r0.log" | awk -F'|' '{print $3}' | xargs)" "$rc0" "$rc1" \
    "$(grep -m1 'check @C' "$w/$name-r0.log" | grep -o 'relative error [^ ]*')" \
    "$(grep -m1 'check @C' "$w/$name-r1.log" | grep -o 'relative error [^ ]*')"
  if [[ $rc0 != 0 || $rc1 != 0 ]]; then tail -4 "$w/$name-r0.log"; tail -4 "$w/$name-r1.log"; fi
  grep -h -m1 '@C:' "$w/$name-r0.log" || true
done
echo; tail -60 "$OUT/schedules.txt"
