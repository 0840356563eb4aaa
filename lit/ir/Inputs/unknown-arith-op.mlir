"arith.frobnicate"() : () -> ()
