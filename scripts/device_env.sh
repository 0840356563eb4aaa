# Sourced (never run) on the GPU machine, by `scripts/gpu.sh --remote` and by the benchmark
# commands of scripts/bench/:
#   - NVLink multicast off, for this shell and every process it starts (NCCL, torch, NVSHMEM);
#   - CUDA's own library directories on LD_LIBRARY_PATH, where they exist;
#   - MERCURY_CUDNN_LIB: the cuDNN PyTorch uses (the nvidia-cudnn package in its venv), not the
#     older system copy the dynamic loader would find first (kernels/src/cuda/cudnn/loader.rs);
#     a value already set is kept;
#   - nccl_pair DIR NAME LIMIT CMD...: CMD as two processes (RANK 0 and 1 of WORLD_SIZE 2, both
#     LOCAL_RANK 0 unless CMD's own `env` says otherwise) joined by NCCL's socket transport over
#     loopback, each its own NCCL "host" (NCCL_HOSTID) so that both may use one GPU; output in
#     DIR/NAME-r0.log and DIR/NAME-r1.log, each process killed after LIMIT seconds. Returns 0
#     when both exit 0; both exit statuses are left in $pair_rc ("rc0 rc1").
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for _d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $_d ]] && export LD_LIBRARY_PATH="$_d:${LD_LIBRARY_PATH:-}"
done
if [[ -z "${MERCURY_CUDNN_LIB:-}" ]]; then
  _d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
  [[ -n "$_d" && -e "$_d/libcudnn.so.9" ]] && export MERCURY_CUDNN_LIB="$_d/libcudnn.so.9"
fi
unset _d

nccl_pair() {
  local dir=$1 name=$2 limit=$3; shift 3
  local pids=() r rc0 rc1
  rm -f "$dir/id.$name"
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MERCURY_NCCL_ID_FILE="$dir/id.$name" \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_HOSTID="mercury-node$r" \
      timeout "$limit" "$@" > "$dir/$name-r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}" && rc0=0 || rc0=$?
  wait "${pids[1]}" && rc1=0 || rc1=$?
  rm -f "$dir/id.$name"
  pair_rc="$rc0 $rc1"
  [[ $rc0 == 0 && $rc1 == 0 ]]
}
