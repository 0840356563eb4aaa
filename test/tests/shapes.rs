//! The odd-shape cases of the GPU script (`examples/shapes/cases.txt`: head dims 32 to 256,
//! multi-head latent attention, GQA on a 3-level mesh, 3-D tiles, cross-attention, decoding,
//! each under a shipped schedule), checked on the host as far as they can be without a GPU:
//! each lowers, scheduled and unscheduled, and every attention block of every rank resolves
//! against its slots (the CUDA executor's `ops::resolve`, with stand-in addresses) and routes
//! to the cuDNN patch (bf16) or the f32 kernel (f32) by the checks that need no library (`ops::cudnn_host_check`; whether
//! the loaded cuDNN builds each plan is `scripts/gpu.sh`'s to show). The executor's own
//! routing is `ops::attention_route`.

use mercury_driver::{Compiler, Schedule};
use mercury_kernels::cuda::{validate_f32, ElemType};
use mercury_plan::{ComputeOp, Plan};
use mercury_runtime::cuda::mem::{MemTable, SlotInfo};
use mercury_runtime::cuda::ops::{self, AttnVia, ComputeLaunch};
use mercury_tests::repo;

/// One line of `cases.txt`: name, file of `examples/shapes/`, schedule.
fn cases() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(repo().join("examples/shapes/cases.txt")).expect("cases");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "cases.txt line '{l}': NAME FILE SCHEDULE");
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect()
}

fn compile(file: &str, schedule: Option<&str>) -> Plan {
    let path = format!("examples/shapes/{file}");
    let text = std::fs::read_to_string(repo().join(&path)).expect("example");
    let schedule = match schedule {
        None => Schedule::default(),
        Some("--shift-shard") => Schedule::shift_shard(),
        Some(script) => {
            let p = repo().join("examples/schedules").join(script);
            Schedule::script(&std::fs::read_to_string(p).expect("schedule script"))
        }
    };
    Compiler::new()
        .compile(&path, &text, &schedule)
        .unwrap_or_else(|d| panic!("{path} under {schedule:?}: {}", d.message))
}

/// Every slot of every rank at a distinct 256-byte-aligned stand-in address (what the
/// executor's allocator gives), as the executor's memory table would hold them.
fn mem_table(plan: &Plan) -> MemTable {
    let mut next = 1u64 << 20;
    let ranks = plan
        .ranks
        .iter()
        .map(|r| {
            r.slots
                .iter()
                .map(|s| {
                    let ptr = next;
                    next += (s.bytes() as u64).div_ceil(256) * 256 + 256;
                    SlotInfo {
                        ptr,
                        dtype: s.dtype,
                        shape: s.shape.clone(),
                    }
                })
                .collect()
        })
        .collect();
    MemTable {
        ranks,
        ..MemTable::default()
    }
}

/// Resolves every compute op of `plan` and routes its attention blocks; returns how many
/// blocks went to the patch each block's inputs call for (cuDNN for bf16, the f32 kernel for
/// f32) and the shapes that did not.
fn route(plan: &Plan) -> (usize, Vec<String>) {
    let mem = mem_table(plan);
    let (mut routed, mut other) = (0, Vec::new());
    for (ri, r) in plan.ranks.iter().enumerate() {
        for op in r.stages.iter().flat_map(|s| &s.compute) {
            let launch = ops::resolve(&mem, ri, op)
                .unwrap_or_else(|e| panic!("rank {ri}: {op:?} does not resolve: {e}"));
            let ComputeLaunch::Attention { launch, .. } = launch else {
                assert!(!matches!(op, ComputeOp::Patch { patch, .. }
                    if matches!(patch, mercury_plan::PatchKind::Attention { .. })));
                continue;
            };
            let nvrtc = launch.validate().map_err(|e| e.to_string());
            let f32 = validate_f32(&launch).map_err(|e| e.to_string());
            let f32_inputs = launch.elem == ElemType::F32;
            match ops::attention_route(&launch, ops::cudnn_host_check(&launch), nvrtc, f32) {
                Ok((AttnVia::Cudnn(_), None)) if !f32_inputs => routed += 1,
                Ok((AttnVia::F32, None)) if f32_inputs => routed += 1,
                Ok((via, w)) => other.push(format!("{via:?} {w:?}")),
                Err(e) => other.push(e.to_string()),
            }
        }
    }
    (routed, other)
}

#[test]
fn odd_shapes_lower_resolve_and_route_to_cudnn_or_the_f32_kernel() {
    let cases = cases();
    assert!(cases.len() >= 10, "cases.txt lists {} cases", cases.len());
    for (name, file, schedule) in &cases {
        for (what, plan) in [
            ("scheduled", compile(file, Some(schedule))),
            ("single-device", compile(file, None)),
        ] {
            let (n, other) = route(&plan);
            assert!(n > 0, "{name} ({what}): no attention block");
            assert!(
                other.is_empty(),
                "{name} ({what}): blocks not routed to their patch: {other:?}"
            );
        }
    }
}

/// The cases' head dims are not the NVRTC kernel's: without the cuDNN patch each is refused
/// naming the shape and both reasons (never run on a kernel that cannot compute it).
#[test]
fn odd_shapes_without_cudnn_are_refused_naming_both_reasons() {
    let plan = compile("mla_d192_d128_causal.mlir", Some("ring_attention.sched"));
    let mem = mem_table(&plan);
    let op = plan.ranks[0]
        .stages
        .iter()
        .flat_map(|s| &s.compute)
        .find(|op| matches!(op, ComputeOp::Patch { .. }))
        .expect("an attention block");
    let Ok(ComputeLaunch::Attention { launch, .. }) = ops::resolve(&mem, 0, op) else {
        panic!("resolves to an attention launch");
    };
    let nvrtc = launch.validate().map_err(|e| e.to_string());
    let f32 = validate_f32(&launch).map_err(|e| e.to_string());
    let e = ops::attention_route(&launch, Err("not loaded".into()), nvrtc, f32)
        .expect_err("refused")
        .to_string();
    for want in [
        "d_qk192 d_v128",
        ops::ATTENTION_REFUSED,
        "cuDNN refused (not loaded)",
        "d_qk 192 / d_v 128",
    ] {
        assert!(e.contains(want), "'{e}' lacks '{want}'");
    }
}
