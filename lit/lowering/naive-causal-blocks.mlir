// A naive causal attention whose key axis alone is split into blocks: the query rows before
// the second key block see none of its keys, and the naive softmax of such a row is NaN. The
// lowering refuses it with a located error (found by mercury-fuzz); tiling both sequence axes
// alike lowers, fully masked blocks skipped.
// RUN: not %mercury-opt --pass-pipeline='builtin.module(tile{axis=j factor=2})' --emit=plan %s 2>&1 | FileCheck %s --check-prefix=KEYS
// RUN: %mercury-opt --pass-pipeline='builtin.module(tile{axis=i factor=2},tile{axis=j factor=2})' --emit=plan %s | FileCheck %s --check-prefix=BOTH

// KEYS: naive-causal-blocks.mlir:[[@LINE+16]]:{{[0-9]+}}: error: a causal mask over query positions 0..8 and key positions 4..8 leaves rows 0..4 without a visible key; this body needs such rows left out, which a block with visible keys cannot do
// KEYS: naive-causal-blocks.mlir:[[@LINE+24]]:3: note: here 'commir.reduce lse_merge' into '@O' gets o = NaN and lse = NaN (their naive softmax is NaN)
// BOTH: "name": "attention",

commir.mesh @mesh shape [2]
commir.kernel @attention on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@i, 2] f32 in
  commir.buffer @K : [@j, 2] f32 in
  commir.buffer @V : [@j, 2] f32 in
  commir.buffer @O : [@i, 2] f32 out
  %q = commir.load @Q[@i] : !commir.tile<f32>
  %k = commir.load @K[@j] : !commir.tile<f32>
  %v = commir.load @V[@j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %sm = commir.mask causal %s : !commir.tile<f32>
  %m = commir.row_reduce max %sm : !commir.tile<f32>
  %d = commir.binary sub %sm, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  %ll = commir.unary log %l : !commir.tile<f32>
  %lse = commir.binary add %m, %ll : !commir.tile<f32>
  commir.reduce lse_merge %o, %lse into @O[@i] : !commir.tile<f32>, !commir.tile<f32>
}
