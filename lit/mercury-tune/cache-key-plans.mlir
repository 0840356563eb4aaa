// Plans given as JSON are their own candidates: the cache key holds them whole. It held only
// the global buffers (name, shape, dtype, role), so a plan file edited to another schedule of
// the same operator took the entry cached for the first one, and its report named a schedule
// the file no longer holds (new-user pass, 2026-12-02).
// REQUIRES: mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --out %t/flat > /dev/null
// RUN: %mercury-tune %repo/examples/small/attention.mlir --topology h200-1x8 --refactor-mesh --out %t/tiers > /dev/null
// The two schedules differ (the premise of the test).
// RUN: not cmp -s %t/flat/schedule.plan.json %t/tiers/schedule.plan.json
// RUN: %mercury-tune %t/flat/schedule.plan.json --topology h200-1x8 --cache %t/c --out %t/a | FileCheck %s --check-prefix=MISS
// RUN: %mercury-tune %t/flat/schedule.plan.json --topology h200-1x8 --cache %t/c --out %t/b | FileCheck %s --check-prefix=HIT
// RUN: %mercury-tune %t/tiers/schedule.plan.json --topology h200-1x8 --cache %t/c --out %t/d | FileCheck %s --check-prefix=MISS
// MISS: cache miss
// HIT: chosen: {{.*}}(cache)
