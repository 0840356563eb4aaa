// A --topology / --predict argument is a preset name or a path, nothing else (as a file
// argument of mlir-opt is a path). A bare name that is neither, where topologies/<name>.toml
// exists under the working directory, is refused with that path as the hint (found by a
// new-user pass: the README's `--predict topologies/h200-1x2-measured.toml` tried as
// `--predict h200-1x2-measured`); a typo of a preset names the preset.
// REQUIRES: mercury-run, mercury-tune
// RUN: cd %repo && %exit-status %mercury-run examples/2gpu/attention_causal_s32k.mlir --shift-shard --no-run \
// RUN:   --predict h200-1x2-measured 2>&1 | FileCheck %s --check-prefix=BARE
// BARE: mercury-run: error: --predict h200-1x2-measured: 'h200-1x2-measured' is neither a topology preset nor a readable file (did you mean 'topologies/h200-1x2-measured.toml'?); presets: h100-1x4,
// BARE: exit status 1
// RUN: cd %repo && %exit-status %mercury-tune examples/small/attention.mlir --topology h200-1x2-measured.toml \
// RUN:   --out %t 2>&1 | FileCheck %s --check-prefix=TUNE-BARE
// TUNE-BARE: mercury-tune: error: 'h200-1x2-measured.toml' is neither a topology preset nor a readable file (did you mean 'topologies/h200-1x2-measured.toml'?)
// TUNE-BARE: exit status 1
// The path itself is what to give.
// RUN: cd %repo && %mercury-run examples/2gpu/attention_causal_s32k.mlir --shift-shard --no-run \
// RUN:   --predict topologies/h200-1x2-measured.toml | FileCheck %s --check-prefix=PATH
// PATH: model: predicted {{[0-9.]+}} ms on topology 'measured-h200-1x2' (2 devices)
// Elsewhere no such file: no path hint.
// RUN: rm -rf %t.dir && mkdir -p %t.dir && cd %t.dir && %exit-status %mercury-tune %repo/examples/small/attention.mlir \
// RUN:   --topology h200-1x2-measured --out %t 2>&1 | FileCheck %s --check-prefix=ELSEWHERE
// ELSEWHERE: mercury-tune: error: 'h200-1x2-measured' is neither a topology preset nor a readable file; presets:
// ELSEWHERE: exit status 1
// RUN: %exit-status %mercury-tune %repo/examples/small/attention.mlir --topology h100-2x44 --out %t \
// RUN:   2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: mercury-tune: error: 'h100-2x44' is neither a topology preset nor a readable file (did you mean 'h100-2x4'?); presets:
// TYPO: exit status 1
