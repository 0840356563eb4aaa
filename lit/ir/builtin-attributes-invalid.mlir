// Builtin attributes refused where upstream refuses them.
// RUN: %mercury-opt --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// expected-error@+1 {{integer constant out of range for attribute}}
"test.a"() {a = 128 : si8} : () -> ()

// -----

// expected-error@+1 {{negative integer literal not valid for unsigned integer type}}
"test.a"() {a = -1 : ui8} : () -> ()

// -----

// expected-error@+1 {{inferred shape of elements literal ([2]) does not match type ([3])}}
"test.a"() {a = dense<[1, 2]> : tensor<3xi32>} : () -> ()

// -----

// expected-error@+1 {{expected integer elements, but parsed floating-point}}
"test.a"() {a = dense<[1.5]> : tensor<1xi32>} : () -> ()

// -----

// expected-error@+1 {{elements literal type must have static shape}}
"test.a"() {a = dense<1> : tensor<?xi32>} : () -> ()

// -----

// expected-error@+1 {{non-affine expression: at least one of the multiply operands has to be either a constant or symbolic}}
#m = affine_map<(d0, d1) -> (d0 * d1)>

// -----

// expected-error@+1 {{use of undeclared identifier}}
#m = affine_map<(d0) -> (d1)>

// -----

// expected-error@+1 {{undefined symbol alias id 'missing'}}
"test.a"() {a = #missing} : () -> ()

// -----

// expected-error@+1 {{duplicate key 'a' in dictionary attribute}}
"test.a"() {a = 1, a = 2} : () -> ()

// -----

// expected-error@+1 {{unexpected decimal integer literal for a floating point value}}
"test.a"() {a = 1 : f32} : () -> ()
