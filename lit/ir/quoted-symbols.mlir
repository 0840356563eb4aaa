// Symbols that are not MLIR bare identifiers (a letter or '_', then letters, digits, '_', '$',
// '.') are quoted wherever they are printed: declarations, dimension lists, index lists, in the
// custom and the generic form; both read back here and the generic form in upstream MLIR.
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s --check-prefix=ROUND
// RUN: %mercury-opt --mlir-print-op-generic %s | FileCheck %s --check-prefix=GENERIC
// RUN: %mercury-opt --mlir-print-op-generic %s | %mercury-opt | FileCheck %s --check-prefix=ROUND
// RUN: %mercury-opt --mlir-print-op-generic %s | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | FileCheck %s --check-prefix=UPSTREAM

// Quoted names everywhere a symbol appears, in the custom and the generic form.
// ROUND-LABEL: commir.kernel @"k 2"
// ROUND: commir.axis @"i-j" = 64 spatial
// ROUND: commir.axis @"1i" = 4 spatial
// ROUND: commir.buffer @"A b" : [@"1i", @"i-j"] f32 in
// ROUND: %a = commir.load @"A b"[@"1i", @"i-j"] : !commir.tile<f32>
// ROUND: commir.reduce add %a into @C[@"1i", @"i-j"] : !commir.tile<f32>
// GENERIC: "commir.axis"() {sym_name = "i-j", extent = 64, kind = "spatial"}
// GENERIC: dims = {{\[}}[@"1i"], [@"i-j"]]
// GENERIC: indices = ["\"1i\"", "\"i-j\""]
commir.mesh @m shape [4]
commir.kernel @"k 2" on @m {
  commir.axis @"i-j" = 64 spatial
  commir.axis @"1i" = 4 spatial
  commir.buffer @"A b" : [@"1i", @"i-j"] f32 in
  commir.buffer @C : [@"1i", @"i-j"] f32 out
  %a = commir.load @"A b"[@"1i", @"i-j"] : !commir.tile<f32>
  commir.reduce add %a into @C[@"1i", @"i-j"] : !commir.tile<f32>
}

// UPSTREAM: "commir.axis"() {extent = 64 : i64, kind = "spatial", sym_name = "i-j"}
// UPSTREAM: dims = {{\[}}[@"1i"], [@"i-j"]]
