// A file with CRLF line ends (see ../crlf.mlir).
"func.func"() ({
^bb0(%a: i32):
  %0 = arith.addi %a, %a : i32 // a comment
  func.return %0 : i32
}) {sym_name = "crlf", function_type = (i32) -> i32} : () -> ()
