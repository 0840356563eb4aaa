// A bracket left open in a CommIR custom form is reported at that bracket, not at the next
// closing brace further down (issue 40).
// RUN: not %mercury-opt %s 2>&1 | FileCheck %s

// CHECK: commir-unclosed-bracket.mlir:[[@LINE+8]]:22: error: '[' is not closed: expected ']' before 'commir.buffer'
// CHECK: commir-unclosed-bracket.mlir:[[@LINE+8]]:3: note: the bracketed group ends here, without its ']'
commir.mesh @mesh shape [8] names ["gpu"]

commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @i = 256 spatial
  commir.axis @j = 256 managed
  commir.buffer @Q : [@b, @i, 16 f32 in sharding [R, S(0), R]
  commir.buffer @K : [@b, @j, 16] f32 in sharding [R, S(0), R]
  commir.buffer @O : [@b, @i, 16] f32 out sharding [R, S(0), R]
  %q = commir.load @Q[@b, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @j] : !commir.tile<f32>
  commir.store %q into @O[@b, @i] : !commir.tile<f32>
}
