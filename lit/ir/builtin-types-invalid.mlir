// Builtin types refused where upstream refuses them.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// expected-error@+1 {{invalid integer width}}
"test.t"() {t = i16777216} : () -> ()

// -----

// expected-error@+1 {{invalid tensor element type}}
"test.t"() {t = tensor<tensor<i8>>} : () -> ()

// -----

// expected-error@+1 {{vector types must have positive constant sizes but got 0}}
"test.t"() {t = vector<0xf32>} : () -> ()

// -----

// expected-error@+1 {{invalid element type for complex}}
"test.t"() {t = complex<index>} : () -> ()

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
// expected-error@+1 {{memref layout mismatch between rank and affine map: 1 != 2}}
"test.t"() {t = memref<4xi8, #map>} : () -> ()

// -----

// expected-error@+1 {{undefined symbol alias id 'nope'}}
"test.t"() {t = !nope} : () -> ()
