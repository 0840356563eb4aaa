// Regression (mercury-fuzz parser seed 297070 of --seed 1): a float literal that overflows f64
// was read as infinity and printed as a hex bit pattern no attribute syntax reads; it is refused.
"mydialect.op"() {x = 1e309} : () -> ()
