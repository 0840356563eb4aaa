// reshape-mesh re-expresses a placement only when it is one flat split of the devices in rank
// order; anything else is refused at its op (passes/transforms/src/mesh.rs, `reexpress`).
// RUN: not %mercury-opt --split-input-file --reshape-mesh=shape=8 %s > %t.out 2> %t.err
// RUN: FileCheck %s --check-prefix=OUT < %t.out
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// A striping that flattens (block 64 over the 8 devices) and a size-1 level: re-expressed.
// OUT: commir.mesh @m shape [8]
// OUT: commir.buffer @A : [@i, @j] f32 in sharding [S(striped(0, 64)), R]
// OUT: commir.buffer @C : [@i] f32 out sharding [S(striped(0, 64))]
// OUT: commir.buffer @A : [@i, @j] f32 in sharding [R, S(0)]
// Mixed splits, levels out of mesh order, a striping that is not one flat block, and a body
// reshard to a partly replicated placement: refused.
// ERR: reshape-mesh.mlir:51:3: error: reshape-mesh cannot re-express '@A' 'sharding [S(0, zigzag(1)), R]' on mesh [8]: its splits [Block, Zigzag] over levels [0, 1] are not one split of the flattened levels
// ERR: reshape-mesh.mlir:65:3: error: reshape-mesh cannot re-express '@A' 'sharding [S(1, 0), R]' on mesh [8]: its levels [1, 0] are not in mesh order
// ERR: reshape-mesh.mlir:79:3: error: reshape-mesh cannot re-express '@A' 'sharding [S(striped(0, 64), striped(1, 64)), R]' on mesh [8]: its splits
// ERR: reshape-mesh.mlir:96:3: error: reshape-mesh cannot re-express '@A' 'sharding [S(0), R]' on mesh [8]: it is replicated over level(s) [1]

commir.mesh @m shape [2, 4]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(striped(0, 256), striped(1, 64)), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(striped(0, 256), striped(1, 64))]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// -----
commir.mesh @m shape [1, 8]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), S(1)]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// -----
commir.mesh @m shape [2, 4]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0, zigzag(1)), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// -----
commir.mesh @m shape [2, 4]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(1, 0), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// -----
commir.mesh @m shape [2, 4]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(striped(0, 64), striped(1, 64)), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}

// -----
commir.mesh @m shape [2, 4]
commir.kernel @ws on @m {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0, 1), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
  commir.reshard @A to [S(0), R]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
