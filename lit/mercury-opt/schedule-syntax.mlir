// The syntax of a schedule file (--schedule; docs/primitives.md, "Schedule scripts"): each
// mistake a new-user pass made is named where it is, not as a missing '}' or a stray option.
// RUN: rm -rf %t && split-file %s %t
// A '#' comment inside a pass's braces hides the '}': said at the '#'.
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/comment.sched 2>&1 | FileCheck %s --check-prefix=COMMENT
// COMMENT: comment.sched:1:22: error: a '#' comment cannot go inside the options of 'tile' (between '{' and '}'); put it after the '}'
// COMMENT-NEXT: tile{axis=i factor=4 # four per GPU}
// COMMENT-NEXT: {{^                     \^$}}
// Two primitives on a line, or a ';' between them: one primitive per line.
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/two.sched 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: two.sched:1:43: error: expected the end of the line after pass 'tile', found pass 'parallelize': a schedule takes one primitive per line (passes on one line are separated by ',')
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/semicolon.sched 2>&1 | FileCheck %s --check-prefix=SEMI
// SEMI: semicolon.sched:1:41: error: expected the end of the line after pass 'tile', found ';': a schedule takes one primitive per line
// Passes separated by ',' on one line are accepted, as in a pipeline.
// RUN: %mercury-opt %t/op.mlir --schedule=%t/comma.sched | FileCheck %s --check-prefix=COMMA
// COMMA: commir.for @i0 parallel(1) {
// Spaces around '=': the option has an empty value, or the '=' is on its own.
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/space-after.sched 2>&1 | FileCheck %s --check-prefix=SPACE-AFTER
// SPACE-AFTER: space-after.sched:1:13: error: option 'factor' has an empty value: spaces around '=' are not allowed (write 'factor=4')
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/space-before.sched 2>&1 | FileCheck %s --check-prefix=SPACE-BEFORE
// SPACE-BEFORE: space-before.sched:1:20: error: spaces around '=' are not allowed in the options of 'tile': write 'factor=4'
// Quoted values: whole values, spaces and '#' kept (the axis is the symbol @"i o"); a quote
// left open or ending inside a value is named.
// RUN: %mercury-opt %t/op.mlir --schedule=%t/quoted.sched | FileCheck %s --check-prefix=QUOTED
// QUOTED: commir.axis @"i o" = 4 spatial
// QUOTED: commir.axis @"i#t" = 16 spatial
// QUOTED: commir.for @"i o" parallel(1) {
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/open-quote.sched 2>&1 | FileCheck %s --check-prefix=OPEN-QUOTE
// OPEN-QUOTE: open-quote.sched:1:28: error: missing '"' to close the value of option 'outer'
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/half-quote.sched 2>&1 | FileCheck %s --check-prefix=HALF-QUOTE
// HALF-QUOTE: half-quote.sched:1:31: error: the value of option 'outer' goes on after its closing quote; quote the whole value (outer="...")
// A UTF-8 byte-order mark starting the file is skipped; one elsewhere is named.
// RUN: printf '\357\273\277tile{axis=i factor=4 outer=i0 inner=i_t}\nparallelize{axis=i0 level=gpu}\n' > %t/bom.sched
// RUN: %mercury-opt %t/op.mlir --schedule=%t/bom.sched | FileCheck %s --check-prefix=COMMA
// RUN: printf 'tile{axis=i factor=4}\n\357\273\277parallelize{axis=i0 level=gpu}\n' > %t/bom2.sched
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/bom2.sched 2>&1 | FileCheck %s --check-prefix=BOM
// BOM: bom2.sched:2:1: error: expected a pass name, found U+FEFF (a byte-order mark)
// A failing pass's note shows the options given and the defaults that are not empty.
// RUN: not %mercury-opt %t/op.mlir --schedule=%t/note.sched 2>&1 | FileCheck %s --check-prefix=NOTE
// NOTE: note.sched:1:1: note: in pass 'tile{axis=x factor=4}'

//--- op.mlir
commir.mesh @m shape [2, 4] names ["node", "gpu"]
commir.kernel @k on @m {
  commir.axis @i = 64 spatial
  commir.axis @j = 16 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
//--- comment.sched
tile{axis=i factor=4 # four per GPU}
//--- two.sched
tile{axis=i factor=4 outer=i0 inner=i_t}  parallelize{axis=i0 level=gpu}
//--- semicolon.sched
tile{axis=i factor=4 outer=i0 inner=i_t}; parallelize{axis=i0 level=gpu}
//--- comma.sched
tile{axis=i factor=4 outer=i0 inner=i_t}, parallelize{axis=i0 level=gpu}  # both
//--- space-after.sched
tile{axis=i factor= 4}
//--- space-before.sched
tile{axis=i factor =4}
//--- quoted.sched
tile{axis="i" factor=4 outer="i o" inner="i#t"}  # a comment after the quoted '#'
parallelize{axis=@"i o" level=gpu}
//--- open-quote.sched
tile{axis=i factor=4 outer="i o inner=i_t}
//--- half-quote.sched
tile{axis=i factor=4 outer="i"o inner=i_t}
//--- note.sched
tile{axis=x factor=4}
