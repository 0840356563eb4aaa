// IRDL definition of the CommIR dialect, so that upstream MLIR accepts CommIR in generic form:
//   mercury-opt --mlir-print-op-generic X.mlir | mlir-opt-22 --irdl-file=dialects/commir/commir.irdl.mlir
// Generated from the op definitions (dialects/commir/src/ops/mod.rs); regenerate with
//   MERCURY_WRITE_IRDL=1 cargo test -p mercury-commir --lib irdl
// Attributes use builtin kinds (strings, integers, arrays, symbol references, types); the
// checks beyond their kinds are the Rust verifier's. Optional attributes are not listed.
// IRDL constraint variables bind one value: the values of one operand or result group share
// an element type.
irdl.dialect @commir {
  // A tile of a buffer, with its element type: !commir.tile<bf16>.
  irdl.type @tile {
    %elem = irdl.any
    irdl.parameters(elem: %elem)
  }

  irdl.operation @mesh {
    %str = irdl.base "#builtin.string"
    %arr = irdl.base "#builtin.array"
    irdl.attributes {"sym_name" = %str, "shape" = %arr}
  }

  irdl.operation @kernel {
    %str = irdl.base "#builtin.string"
    %sym = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"sym_name" = %str, "mesh" = %sym}
    %body = irdl.region
    irdl.regions(body: %body)
  }

  irdl.operation @axis {
    %str = irdl.base "#builtin.string"
    %int = irdl.base "#builtin.integer"
    %spatial = irdl.is "spatial"
    %reduction = irdl.is "reduction"
    %managed = irdl.is "managed"
    %kind = irdl.any_of(%spatial, %reduction, %managed)
    irdl.attributes {"sym_name" = %str, "extent" = %int, "kind" = %kind}
  }

  irdl.operation @buffer {
    %str = irdl.base "#builtin.string"
    %arr = irdl.base "#builtin.array"
    %type = irdl.base "#builtin.type"
    %in = irdl.is "in"
    %out = irdl.is "out"
    %inout = irdl.is "inout"
    %temp = irdl.is "temp"
    %role = irdl.any_of(%in, %out, %inout, %temp)
    irdl.attributes {"sym_name" = %str, "dims" = %arr, "dtype" = %type, "role" = %role}
  }

  irdl.operation @documents {
    %str = irdl.base "#builtin.string"
    %int = irdl.base "#builtin.integer"
    irdl.attributes {"sym_name" = %str, "positions" = %int}
  }

  irdl.operation @for {
    %sym = irdl.base "#builtin.symbol_ref"
    irdl.attributes {"axis" = %sym}
    %body = irdl.region
    irdl.regions(body: %body)
  }

  irdl.operation @load {
    %sym = irdl.base "#builtin.symbol_ref"
    %arr = irdl.base "#builtin.array"
    irdl.attributes {"buffer" = %sym, "indices" = %arr}
    %tile = irdl.base @commir::@tile
    irdl.results(tile: %tile)
  }

  irdl.operation @patch {
    %str = irdl.base "#builtin.string"
    irdl.attributes {"kernel" = %str}
    %inputs = irdl.base @commir::@tile
    irdl.operands(inputs: variadic %inputs)
    %outputs = irdl.base @commir::@tile
    irdl.results(outputs: variadic %outputs)
  }

  irdl.operation @matmul {
    %lhs = irdl.base @commir::@tile
    %rhs = irdl.base @commir::@tile
    irdl.operands(lhs: %lhs, rhs: %rhs)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @unary {
    %exp = irdl.is "exp"
    %log = irdl.is "log"
    %gelu = irdl.is "gelu"
    %silu = irdl.is "silu"
    %kind = irdl.any_of(%exp, %log, %gelu, %silu)
    irdl.attributes {"kind" = %kind}
    %input = irdl.base @commir::@tile
    irdl.operands(input: %input)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @binary {
    %add = irdl.is "add"
    %sub = irdl.is "sub"
    %mul = irdl.is "mul"
    %div = irdl.is "div"
    %max = irdl.is "max"
    %kind = irdl.any_of(%add, %sub, %mul, %div, %max)
    irdl.attributes {"kind" = %kind}
    %lhs = irdl.base @commir::@tile
    %rhs = irdl.base @commir::@tile
    irdl.operands(lhs: %lhs, rhs: %rhs)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @scale {
    %float = irdl.base "#builtin.float"
    irdl.attributes {"factor" = %float}
    %input = irdl.base @commir::@tile
    irdl.operands(input: %input)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @cast {
    %input = irdl.base @commir::@tile
    irdl.operands(input: %input)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @mask {
    %causal = irdl.is "causal"
    %kind = irdl.any_of(%causal)
    irdl.attributes {"kind" = %kind}
    %input = irdl.base @commir::@tile
    irdl.operands(input: %input)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @row_reduce {
    %max = irdl.is "max"
    %sum = irdl.is "sum"
    %kind = irdl.any_of(%max, %sum)
    irdl.attributes {"kind" = %kind}
    %input = irdl.base @commir::@tile
    irdl.operands(input: %input)
    %result = irdl.base @commir::@tile
    irdl.results(result: %result)
  }

  irdl.operation @reduce {
    %add = irdl.is "add"
    %lse_merge = irdl.is "lse_merge"
    %kind = irdl.any_of(%add, %lse_merge)
    %sym = irdl.base "#builtin.symbol_ref"
    %arr = irdl.base "#builtin.array"
    irdl.attributes {"kind" = %kind, "buffer" = %sym, "indices" = %arr}
    %values = irdl.base @commir::@tile
    irdl.operands(values: variadic %values)
  }

  irdl.operation @store {
    %sym = irdl.base "#builtin.symbol_ref"
    %arr = irdl.base "#builtin.array"
    irdl.attributes {"buffer" = %sym, "indices" = %arr}
    %value = irdl.base @commir::@tile
    irdl.operands(value: %value)
  }

  irdl.operation @reshard {
    %sym = irdl.base "#builtin.symbol_ref"
    %arr = irdl.base "#builtin.array"
    irdl.attributes {"buffer" = %sym, "sharding" = %arr}
  }
}
