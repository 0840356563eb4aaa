use super::*;
use crate::cuda::executor::BoundRegion;
use crate::cuda::test_plans::ring_attention;
use mercury_plan::{DType, Role};

/// Attention over `ranks` ranks as the Python package writes it (bf16 O, f32 L kept when
/// `lse`), with `schedule` applied.
fn attention(ranks: usize, lse: bool, schedule: &str) -> Plan {
    let keep = if lse { " lse @L" } else { "" };
    let l_decl = if lse {
        "  commir.buffer @L : [@b, @h, @i] f32 out sharding [R, R, S(0)]\n"
    } else {
        ""
    };
    let text = format!(
        "commir.mesh @mesh shape [{ranks}]
commir.kernel @attention on @mesh {{
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @h, @i, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 16] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 16] bf16 out sharding [R, R, S(0), R]
{l_decl}  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {{causal = true}} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i]{keep} : !commir.tile<f32>, !commir.tile<f32>
}}
"
    );
    mercury_driver::Compiler::new()
        .compile(
            "attention.mlir",
            &text,
            &mercury_driver::Schedule::script(schedule),
        )
        .unwrap_or_else(|d| panic!("{}", d.render()))
}

fn buffer_names(plan: &Plan, ins: &[DirectIn]) -> Vec<String> {
    ins.iter()
        .map(|d| plan.buffers[d.buffer].name.clone())
        .collect()
}

#[test]
fn one_rank_reads_its_inputs_and_writes_its_outputs_in_place() {
    for lse in [true, false] {
        let plan = attention(1, lse, "");
        let d = analyse(&plan, &plan.ranks[0]);
        assert_eq!(buffer_names(&plan, &d.inputs), ["Q", "K", "V"], "lse {lse}");
        for (k, i) in d.inputs.iter().enumerate() {
            assert_eq!(i.readers.len(), 1);
            assert_eq!(i.readers[0].2, k, "q, k, v operands in order");
            assert_eq!(i.region, Region::full(&plan.buffers[i.buffer].shape));
        }
        assert_eq!(d.outputs.len(), 1, "lse {lse}: {d:?}");
        let out = &d.outputs[0];
        assert_eq!(plan.buffers[out.o.1].name, "O");
        assert_eq!(
            out.lse.as_ref().map(|l| plan.buffers[l.1].name.as_str()),
            lse.then_some("L")
        );
    }
}

#[test]
fn a_ring_reads_only_the_queries_in_place() {
    // K and V travel (sent, then overwritten by what arrives); the output accumulates over
    // the ring's blocks and is f32: only Q stays where the caller bound it.
    let plan = ring_attention(2, (1, 2, 2), 64, 16, true);
    for r in &plan.ranks {
        let d = analyse(&plan, r);
        assert_eq!(buffer_names(&plan, &d.inputs), ["Q"], "rank {}", r.rank);
        assert!(d.outputs.is_empty(), "{d:?}");
    }
    // The same causal ring with a bf16 output: rank 1's two blocks merge into one
    // accumulator, rank 0 sees no key of rank 1 (one block, which writes the output itself).
    let plan = attention(
        2,
        true,
        "tile{axis=i factor=2 outer=i0 inner=i_t}
parallelize{axis=i0 level=0}
tile{axis=j factor=2 outer=j0 inner=j_t}
shift{axis=j0 by=i0}
shard{buffer=K axis=j0}
shard{buffer=V axis=j0}
",
    );
    for r in &plan.ranks {
        let d = analyse(&plan, r);
        assert_eq!(buffer_names(&plan, &d.inputs), ["Q"]);
        assert_eq!(d.outputs.len(), usize::from(r.rank == 0), "{d:?}");
    }
}

fn global(strides: &[usize], shape: &[usize], ptr: u64, dtype: DType) -> GlobalMem {
    GlobalMem {
        own: None,
        pieces: vec![BoundRegion {
            region: Region::full(shape),
            ptr,
            strides: strides.to_vec(),
        }],
        dtype,
        shape: shape.to_vec(),
        role: Role::Input,
        ready: true,
        poison: Vec::new(),
    }
}

#[test]
fn cudnn_reads_bhsd_and_bshd_memory_and_refuses_what_it_cannot() {
    let shape = [2, 4, 64, 16];
    // bhsd, contiguous.
    let g = global(&[4096, 1024, 16, 1], &shape, 0x10000, DType::BF16);
    let t = tensor4(&g, &Region::full(&shape), false).unwrap();
    assert_eq!((t.ptr, t.strides), (0x10000, [4096, 1024, 16, 1]));
    // bshd memory read as bhsd (flash-attn's layout): a sub-region starts at its element.
    let g = global(&[4096, 16, 64, 1], &shape, 0x10000, DType::BF16);
    let r = Region {
        offset: vec![1, 2, 8, 0],
        extent: vec![1, 2, 32, 16],
    };
    let t = tensor4(&g, &r, false).unwrap();
    assert_eq!(t.ptr, 0x10000 + 2 * (4096 + 2 * 16 + 8 * 64));
    // A unit batch takes a stride past every other dimension.
    assert_eq!(t.strides, [2048, 16, 64, 1]);
    // Not unit-stride in the head dim, misaligned start or stride: refused.
    let g = global(&[4096, 1024, 16, 2], &shape, 0x10000, DType::BF16);
    assert!(tensor4(&g, &Region::full(&shape), false).is_none());
    let g = global(&[4096, 1024, 16, 1], &shape, 0x10002, DType::BF16);
    assert!(tensor4(&g, &Region::full(&shape), false).is_none());
    let g = global(&[4100, 1025, 16, 1], &shape, 0x10000, DType::BF16);
    assert!(tensor4(&g, &Region::full(&shape), false).is_none());
    // A region outside every bound piece, or a placeholder: refused.
    let g = global(&[4096, 1024, 16, 1], &[2, 4, 32, 16], 0x10000, DType::BF16);
    assert!(tensor4(&g, &Region::full(&shape), false).is_none());
    let g = global(&[4096, 1024, 16, 1], &shape, 0, DType::BF16);
    assert!(tensor4(&g, &Region::full(&shape), false).is_none());
}

#[test]
fn the_lse_is_read_as_stats_with_a_unit_column() {
    let shape = [2, 4, 64];
    let g = global(&[256, 64, 1], &shape, 0x20004, DType::F32);
    let t = tensor4(&g, &Region::full(&shape), true).unwrap();
    assert_eq!((t.ptr, t.strides), (0x20004, [256, 64, 1, 1]));
    // Rows not adjacent: refused.
    let g = global(&[512, 128, 2], &shape, 0x20000, DType::F32);
    assert!(tensor4(&g, &Region::full(&shape), true).is_none());
}
