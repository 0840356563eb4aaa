// The arith dialect as the Arith dialect documentation writes it: integer and float
// arithmetic with their flags, comparisons by predicate, casts, select, the extended ops and
// constants of every typed attribute, on scalars, vectors (scalable too) and tensors. What we
// print reads back in upstream mlir-opt as the same IR (compared through its generic print).
// RUN: %mercury-opt %s | %mlir-opt --mlir-print-op-generic > %t.ours
// RUN: %mlir-opt %s --mlir-print-op-generic > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: %mercury-opt %s | FileCheck %s

// CHECK-LABEL: func.func @integers
func.func @integers(%a: i32, %b: i32, %i: index, %v: vector<4xi8>) -> i32 {
  // CHECK: arith.addi %a, %b overflow<nsw, nuw> : i32
  %0 = arith.addi %a, %b overflow<nsw, nuw> : i32
  // CHECK: arith.divsi %{{.*}}, %b exact : i32
  %1 = arith.divsi %0, %b exact : i32
  %2 = arith.subi %1, %a : i32
  %3 = arith.muli %i, %i : index
  %4 = arith.andi %v, %v : vector<4xi8>
  %5 = arith.ceildivsi %2, %a : i32
  %6 = arith.floordivsi %5, %a : i32
  %7 = arith.remui %6, %b : i32
  %8 = arith.shrsi %7, %b : i32
  %9 = arith.maxsi %8, %a : i32
  // CHECK: arith.cmpi ult, %{{.*}}, %a : i32
  %c = arith.cmpi ult, %9, %a : i32
  // CHECK: arith.select %c, %{{.*}}, %b : i32
  %s = arith.select %c, %9, %b : i32
  %cv = arith.cmpi eq, %v, %v : vector<4xi8>
  // CHECK: arith.select %cv, %v, %{{.*}} : vector<4xi1>, vector<4xi8>
  %sv = arith.select %cv, %v, %4 : vector<4xi1>, vector<4xi8>
  // CHECK: %sum:2 = arith.addui_extended %a, %b : i32, i1
  %sum:2 = arith.addui_extended %a, %b : i32, i1
  %lo, %hi = arith.mulsi_extended %sum#0, %b : i32
  return %s : i32
}

// CHECK-LABEL: func.func @floats
func.func @floats(%x: f32, %y: f32, %t: tensor<2x?xf16>, %w: vector<[4]xbf16>) -> f64 {
  // CHECK: arith.addf %x, %y fastmath<nnan, ninf> : f32
  %0 = arith.addf %x, %y fastmath<nnan,ninf> : f32
  %1 = arith.mulf %0, %y fastmath<fast> : f32
  %2 = arith.maximumf %1, %x : f32
  %3 = arith.negf %2 : f32
  %4 = arith.divf %t, %t : tensor<2x?xf16>
  %5 = arith.minnumf %w, %w : vector<[4]xbf16>
  // CHECK: arith.cmpf oge, %{{.*}}, %x : f32
  %6 = arith.cmpf oge, %3, %x : f32
  // CHECK: arith.extf %{{.*}} : f32 to f64
  %7 = arith.extf %3 : f32 to f64
  // CHECK: arith.truncf %{{.*}} to_nearest_even : f64 to f16
  %8 = arith.truncf %7 to_nearest_even : f64 to f16
  return %7 : f64
}

// CHECK-LABEL: func.func @casts
func.func @casts(%a: i32, %i: index, %f: f32, %m: memref<4xi16>) {
  %0 = arith.extsi %a : i32 to i64
  %1 = arith.extui %a : i32 to i48
  %2 = arith.trunci %a overflow<nsw> : i32 to i8
  %3 = arith.index_cast %i : index to i32
  %4 = arith.index_castui %a : i32 to index
  %5 = arith.sitofp %a : i32 to f32
  %6 = arith.uitofp %a : i32 to f8E4M3FN
  %7 = arith.fptosi %f : f32 to i16
  %8 = arith.fptoui %f : f32 to i64
  %9 = arith.bitcast %f : f32 to i32
  %10 = arith.index_cast %m : memref<4xi16> to memref<4xindex>
  return
}

// CHECK-LABEL: func.func @constants
func.func @constants() {
  // CHECK: arith.constant 42 : i32
  %0 = arith.constant 42 : i32
  // CHECK: arith.constant -1 : i8
  %1 = arith.constant 255 : i8
  // CHECK: arith.constant true
  %2 = arith.constant true
  %3 = arith.constant 2.5 : f16
  %4 = arith.constant 0x7FC00000 : f32
  %5 = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %6 = arith.constant dense<1.0> : vector<[8]xf32>
  %7 = arith.constant 170141183460469231731687303715884105727 : i128
  %8 = arith.constant 0 : index
  %9 = arith.constant dense<"0x0100000002000000"> : tensor<2xi32>
  %10 = arith.constant sparse<[[0, 1]], [7]> : tensor<2x2xi64>
  // NaNs keep their sign and payload, signaling ones stay signaling.
  // CHECK: arith.constant 0x7FFFFFFF : f32
  %11 = arith.constant 0x7fffffff : f32
  // CHECK: arith.constant 0x7F800001 : f32
  %12 = arith.constant 0x7F800001 : f32
  // CHECK: arith.constant 0xFFF8000000000001 : f64
  %13 = arith.constant 0xFFF8000000000001 : f64
  // CHECK: arith.constant 0xFE01 : f16
  %14 = arith.constant 0xFE01 : f16
  // CHECK: arith.constant 0x7FC1 : bf16
  %15 = arith.constant 0x7FC1 : bf16
  // CHECK: arith.constant 0xFF800000 : f32
  %16 = arith.constant 0xFF800000 : f32
  return
}

// CHECK-LABEL: func.func @wide
func.func @wide() -> i128 {
  // CHECK: arith.constant -1 : i128
  %0 = arith.constant 340282366920938463463374607431768211455 : i128
  return %0 : i128
}
