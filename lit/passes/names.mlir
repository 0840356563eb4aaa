// Names: the axes a pass makes up never collide with the user's symbols (fresh names), a name
// the user asks for that is taken is refused, and the names a pass derives from quoted ones are
// quoted in turn (upstream MLIR reads the generic form; see also lit/ir/quoted-symbols.mlir).
// RUN: %mercury-opt --tile="axis=i factor=4" %s  | FileCheck %s --check-prefix=TILE
// RUN: %mercury-opt --shift-shard %s  | FileCheck %s --check-prefix=RING
// RUN: not %mercury-opt --tile="axis=i factor=4 outer=s inner=i_t" %s  2>&1 | FileCheck %s --check-prefix=TAKEN
// RUN: %mercury-opt --shift-shard --mlir-print-op-generic %S/Inputs/quoted.mlir | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | FileCheck %s --check-prefix=UPSTREAM

// The user's own axes are called like tile's and shift-shard's defaults.
// TILE-LABEL: commir.kernel @s
// TILE: commir.axis @i_o_1 = 4 spatial
// TILE-NEXT: commir.axis @i_i_1 = 16 spatial
// TILE: commir.for @i_o_1 {
// RING-LABEL: commir.kernel @s
// RING: commir.axis @i0_1 = 4 spatial
// RING: commir.axis @j_t_1 = 4 managed
// RING: commir.for @i0_1 parallel(0) {
// RING-NEXT: commir.for @j0 shift(@i0_1) {
// TAKEN: names.mlir:[[@LINE+3]]:3: error: tile: outer=s names '@s', which is already a symbol of '@s' (choose another name, or leave outer= out for a fresh one)
commir.mesh @m shape [4]
commir.kernel @s on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 16 managed
  commir.axis @i_o = 2 spatial
  commir.axis @i_i = 2 spatial
  commir.axis @i0 = 2 spatial
  commir.axis @j_t = 2 spatial
  commir.buffer @A : [@i_o, @i_i, @i0, @j_t, @i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i_o, @i_i, @i0, @j_t, @i] f32 out
  %a = commir.load @A[@i_o, @i_i, @i0, @j_t, @i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i_o, @i_i, @i0, @j_t, @i] : !commir.tile<f32>
}

// UPSTREAM: "commir.axis"() {extent = 4 : i64, kind = "spatial", sym_name = "i-j0"}
// UPSTREAM: "commir.load"() {buffer = @K, indices = ["b", "\22head-n\22", "(\22key pos0\22 + \22i-j0\22) mod 4", "\22key pos_t\22"]}
