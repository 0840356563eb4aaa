// Two chunks at the default marker (split-marker.mlir).
"a.x"() : () -> ()
// -----
"a.y"() : () -> ()
