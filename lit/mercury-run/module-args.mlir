// mercury-run --module: what it refuses (the runs are lit/schedules/llama3_layer.mlir and
// lit/mercury-opt/reshard-edges.mlir).
// REQUIRES: mercury-run
// RUN: not %mercury-run %repo/examples/small/llama3_layer.mlir --module 2>&1 | FileCheck %s --check-prefix=CUDA
// CUDA: error: --module runs a module of several kernels on the CPU executor (--backend cpu)
// RUN: not %mercury-run %repo/examples/small/llama3_layer.mlir --module --backend cpu --emit-plan %t.json 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: error: --module runs a plan per kernel; --emit-plan read one plan: drop it
// RUN: not %mercury-run %repo/examples/small/llama3_layer.mlir --module --kernel attention --backend cpu 2>&1 | FileCheck %s --check-prefix=KERNEL
// KERNEL: error: the argument '--module' cannot be used with '--kernel <KERNEL>'
// The Llama-3-8B and 70B layers parse, verify and lower (too large for the CPU executor).
// RUN: %mercury-run %repo/examples/llama3_layer.mlir --module --no-run --backend cpu --schedule %repo/examples/schedules/llama3_layer_cp.sched | FileCheck %s --check-prefix=BIG
// RUN: %mercury-run %repo/examples/llama3_layer_70b.mlir --module --no-run --backend cpu --schedule %repo/examples/schedules/llama3_layer_tp.sched | FileCheck %s --check-prefix=BIG
// BIG: kernel @attn_norm:
// BIG: kernel @attention:
// BIG: // comm-plan @attention: mesh [8], 8 ranks
// BIG: kernel @residual:
// BIG: // memory @residual:
// RUN: %mercury-opt %repo/examples/llama3_layer.mlir -o /dev/null
// RUN: %mercury-opt %repo/examples/llama3_layer_70b.mlir -o /dev/null
