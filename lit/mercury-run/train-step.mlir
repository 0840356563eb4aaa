// mercury-run --backward: a training step, the forward then its backward on the CPU executor,
// checked against the single-device step (no GPU needed).
// REQUIRES: mercury-run
// RUN: %mercury-run %repo/examples/small/attention_train.mlir --backward attention_bwd --shift-shard --backend cpu --check --seed 5 | FileCheck %s
// CHECK: forward @attention:
// CHECK: backward @attention_bwd:
// CHECK: step: the backward reads @O, @LSE where the forward leaves them
// CHECK: check of the forward @attention:
// CHECK-DAG: check @O: relative error {{.*}} ok
// CHECK-DAG: check @LSE: relative error {{.*}} ok
// CHECK: check of the backward @attention_bwd:
// CHECK-DAG: check @dQ: every rank holds its shard as declared ('sharding [R, R, S(zigzag(0)), R]')  ok
// CHECK-DAG: check @dQ: relative error {{.*}} ok
// CHECK-DAG: check @dK: relative error {{.*}} ok
// CHECK-DAG: check @dV: relative error {{.*}} ok
// CHECK-DAG: check @dV in its dtypes: {{.*}} ok
//
// The backward reading the log-sum-exp elsewhere than the forward leaves it is refused.
// RUN: not %mercury-run %S/Inputs/train-lse-moved.mlir --backward attention_bwd --backend cpu 2>&1 | FileCheck %s --check-prefix=MOVED
// MOVED: train-lse-moved.mlir:{{[0-9]+}}:3: error: the backward reads '@LSE' in 'sharding [R, R, S(0)]' but the forward '@attention' leaves it in 'sharding [R, R, S(zigzag(0))]': declare them alike, so that nothing moves between the kernels
// MOVED: note: '@LSE' of the forward '@attention'
//
// A training step needs its forward.
// RUN: not %mercury-run %repo/examples/small/attention_bwd.mlir --backward attention_bwd --backend cpu 2>&1 | FileCheck %s --check-prefix=PAIR
// PAIR: error: the input has several kernels (@attention_bwd, @attention_bwd_gqa, @attention_bwd_gqa_kv4, @attention_bwd_mla); name the forward with --kernel NAME
// On the GPU too (scripts/gpu.sh runs it; --no-run here: the plans, no device needed).
// RUN: %mercury-run %repo/examples/small/attention_train.mlir --backward attention_bwd --shift-shard --backend cuda --no-run | FileCheck %s --check-prefix=CUDA
// CUDA: forward @attention:
// CUDA: backward @attention_bwd:
// CUDA: step: the backward reads @O, @LSE where the forward leaves them
// RUN: not %mercury-run %repo/examples/small/attention_bwd.mlir --kernel attention_bwd_gqa --backward attention_bwd --backend cpu 2>&1 | FileCheck %s --check-prefix=NOOUT
// NOOUT: attention_bwd.mlir:{{[0-9]+}}:3: error: '@K' is [1, 4, 256, 16] f32 here and [1, 2, 256, 16] f32 in the forward '@attention_bwd_gqa'
// NOOUT: note: '@K' of the forward '@attention_bwd_gqa'
//
// --schedule schedules both kernels: a backward script fails on the forward, and the message
// says how to give the backward its own.
// RUN: not %mercury-run %repo/examples/small/attention_train.mlir --backward attention_bwd --schedule %repo/examples/schedules/zigzag_ring_bwd.sched --backend cpu 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: attention_train.mlir:{{[0-9]+}}:1: error: reshard: '@dO' is not a buffer
// BOTH: zigzag_ring_bwd.sched:{{[0-9]+}}:1: note: in pass 'reshard{buffer=dO
// BOTH: note: --schedule '{{.*}}zigzag_ring_bwd.sched' schedules both kernels of the training step (here @attention); give the backward its own script with --backward-schedule
