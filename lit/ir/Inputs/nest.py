"""Prints deeply nested IR: nest.py KIND DEPTH [closed]."""
import sys

kind, depth = sys.argv[1], int(sys.argv[2])
closed = len(sys.argv) > 3 and sys.argv[3] == "closed"
if kind == "region":
    text = '"test.op"() ({\n' * depth + ("}) : () -> ()\n" * depth if closed else "")
elif kind == "array":
    text = '"test.op"() {x = ' + "[" * depth + ("]" * depth + "} : () -> ()" if closed else "")
elif kind == "tensor":
    text = '"test.op"() {x = ' + "tensor<" * depth + ("f32" + ">" * depth + "} : () -> ()" if closed else "")
elif kind == "dict":
    text = '"test.op"() ' + "{x = " * depth + ("1" + "}" * depth + " : () -> ()" if closed else "")
elif kind == "angle":
    text = '"test.op"() {x = #test.a' + "<" * depth + (">" * depth + "} : () -> ()" if closed else "")
elif kind == "paren":
    text = "func.return " + "(" * depth + (")" * depth if closed else "")
else:
    sys.exit("unknown kind " + kind)
print(text)
