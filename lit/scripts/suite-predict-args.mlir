// scripts/suite_predict.sh refuses a GPU count its shapes cannot split over (powers of two),
// before anything runs: --gpus 3 was reported from inside a generated file the script had
// already deleted (found by a new-user pass).
// RUN: %exit-status bash %repo/scripts/suite_predict.sh --gpus 3 2>&1 | FileCheck %s
// CHECK: suite_predict.sh: --gpus 3: the suite's shapes split only over a power of two of GPUs (2, 4, 8, ...)
// CHECK-NEXT: exit status 1
