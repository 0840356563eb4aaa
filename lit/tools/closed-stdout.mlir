// A standard output closed before the tool is done (`--help | true`, a pipe into `head`)
// stops the output quietly: the hand-written tools' println! panicked there (exit 101).
// REQUIRES: mercury-mgpu, mercury-gpu-bench, mercury-study
// RUN: bash -c '%mercury-mgpu --help 2>/dev/null | true; exit ${PIPESTATUS[0]}'
// RUN: bash -c '%mercury-gpu-bench --help 2>/dev/null | true; exit ${PIPESTATUS[0]}'
// RUN: bash -c '%mercury-study --help 2>/dev/null | true; exit ${PIPESTATUS[0]}'
