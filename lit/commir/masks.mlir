// Attention masks beyond causal: run-time document boundaries (`commir.documents`, flash-attn's
// cu_seqlens), sliding windows and their alignment print to a fixed point, verify, and are
// accepted by upstream mlir-opt through the IRDL definition; the refusals are in
// Inputs/masks-invalid.mlir. The small examples run on the CPU executor against the
// single-device plan, with fresh document boundaries drawn by --check.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir > /dev/null
// RUN: %mercury-opt --split-input-file --verify-diagnostics %S/Inputs/masks-invalid.mlir

// CHECK: commir.documents @Dq positions 24
// CHECK: commir.documents @Dk positions 40
// CHECK: commir.patch "attention" (%{{.*}}, %{{.*}}, %{{.*}}) {causal = true, documents = [@Dq, @Dk], lower_right = true, window = [8, -1]}
// CHECK: commir.patch "attention_bwd" (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {documents = @D, window = [4, 4]}

commir.mesh @mesh shape [2] names ["gpu"]

commir.kernel @cross on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 24 spatial
  commir.axis @j = 40 managed
  commir.buffer @Q : [@h, @i, 8] f32 in sharding [R, S(0), R]
  commir.buffer @K : [@h, @j, 8] f32 in sharding [R, S(0), R]
  commir.buffer @V : [@h, @j, 8] f32 in sharding [R, S(0), R]
  commir.buffer @O : [@h, @i, 8] f32 out sharding [R, S(0), R]
  commir.documents @Dq positions 24
  commir.documents @Dk positions 40
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true, documents = [@Dq, @Dk], lower_right = true, window = [8, -1]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@h, @i] : !commir.tile<f32>, !commir.tile<f32>
}

commir.kernel @bwd on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 32 spatial
  commir.axis @j = 32 managed
  commir.buffer @Q : [@h, @i, 8] f32 in sharding [R, S(0), R]
  commir.buffer @K : [@h, @j, 8] f32 in sharding [R, S(0), R]
  commir.buffer @V : [@h, @j, 8] f32 in sharding [R, S(0), R]
  commir.buffer @O : [@h, @i, 8] f32 in sharding [R, S(0), R]
  commir.buffer @dO : [@h, @i, 8] f32 in sharding [R, S(0), R]
  commir.buffer @L : [@h, @i] f32 in sharding [R, S(0)]
  commir.buffer @dQ : [@h, @i, 8] f32 out sharding [R, S(0), R]
  commir.buffer @dK : [@h, @j, 8] f32 out sharding [R, S(0), R]
  commir.buffer @dV : [@h, @j, 8] f32 out sharding [R, S(0), R]
  commir.documents @D positions 32
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %o = commir.load @O[@h, @i] : !commir.tile<f32>
  %do = commir.load @dO[@h, @i] : !commir.tile<f32>
  %l = commir.load @L[@h, @i] : !commir.tile<f32>
  %dq, %dk, %dv = commir.patch "attention_bwd" (%q, %k, %v, %o, %do, %l) {documents = @D, window = [4, 4]} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>)
  commir.reduce add %dq into @dQ[@h, @i] : !commir.tile<f32>
  commir.reduce add %dk into @dK[@h, @j] : !commir.tile<f32>
  commir.reduce add %dv into @dV[@h, @j] : !commir.tile<f32>
}

// The CPU executor runs both with fresh document boundaries, unscheduled and as a ring.
// REQUIRES: mercury-run
// RUN: %mercury-run %s --kernel cross --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %s --kernel cross --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %s --kernel bwd --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %repo/examples/small/attention_documents.mlir --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %repo/examples/small/attention_window.mlir --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %repo/examples/small/attention_window.mlir --shift-shard --backend cpu 2>&1 | FileCheck %s --check-prefix=WINDOW
// RUN: %mercury-run %repo/examples/small/attention_window_two_sided.mlir --shift-shard --backend cpu --check | FileCheck %s --check-prefix=EXEC
// RUN: %mercury-run %repo/examples/small/attention_window_two_sided.mlir --shift-shard --backend cpu 2>&1 | FileCheck %s --check-prefix=TWOSIDED
// RUN: %mercury-run %repo/examples/small/attention_documents.mlir --shift-shard --backend cpu --seed 7 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: %mercury-run %repo/examples/small/attention_documents.mlir --shift-shard=balance=false --backend cpu --seed 2 --balance-documents --check 2>&1 | FileCheck %s --check-prefix=BALANCED
// RUN: sed 's/S(0)/S(zigzag(0, 2))/g' %repo/examples/small/attention_documents.mlir > %t.chunks.mlir
// RUN: %mercury-run %t.chunks.mlir --shift-shard --backend cpu --seed 2 --balance-documents --check 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not %mercury-run %s --kernel cross --shift-shard --backend cpu --balance-documents 2>&1 | FileCheck %s --check-prefix=NOBALANCE
// EXEC: check @{{.*}}: relative error {{.*}} ok

// --balance-documents reorders the batch's documents before the run (mercury_plan::balance):
// the balancer's count and the plan's agree, and the check holds on the reordered batch.
// BALANCED: documents @docs reordered for 8 ranks (--balance-documents): busiest rank 1.893x -> {{1\.[01][0-9]+}}x the mean
// BALANCED: attention work of this batch: busiest rank {{1\.[01][0-9]}}x the mean
// BALANCED: check @O: relative error {{.*}} ok
// The same batch on shards declared zigzag over chunks of 2 (8 rounds): the balancer's layout
// is the plan's, and the reordered batch comes within a few percent of the mean.
// CHUNKS: documents @docs reordered for 8 ranks (--balance-documents): busiest rank 1.128x -> {{1\.0[0-4][0-9]*}}x the mean
// CHUNKS: attention work of this batch: busiest rank {{1\.0[0-4]}}x the mean
// CHUNKS: check @O: relative error {{.*}} ok
// NOBALANCE: mercury-run: error: --balance-documents: the plan's attention has separate query and key documents (cross-attention)

// A causal window of 16 inside 32-position shards: shift-shard keeps the positions contiguous
// and starts each rank's ring at its predecessor's piece; no block of the rank reads the rest,
// so one neighbour exchange of K and V is all that is sent (56 KiB each; the dense ring of
// examples/small/attention.mlir sends 448 KiB each), rank 0 receiving nothing.
// WINDOW: @K: ring p2p, 7 ops in 1 stages, 56.0 KiB sent in total
// WINDOW: @V: ring p2p, 7 ops in 1 stages, 56.0 KiB sent in total
// WINDOW: masked attention work: busiest rank

// A two-sided window (12 back, 20 ahead) inside the shards: the ring starts at the
// predecessor's piece and the pieces after the successor's are read by no block: two
// neighbour exchanges (2 stages, 112 KiB each of K and V; the full ring sends 448 KiB).
// TWOSIDED: @K: ring p2p, 14 ops in 2 stages, 112.0 KiB sent in total
// TWOSIDED: @V: ring p2p, 14 ops in 2 stages, 112.0 KiB sent in total

// The documents' work is known per batch: the band's, then this batch's.
// BATCH: masked attention work (band only: the documents are known at run time)
// BATCH: // documents @docs: {{[0-9]+}} in this batch, the longest {{[0-9]+}} of 256 positions
// BATCH: attention work of this batch: busiest rank {{[0-9.]+}}x the mean
