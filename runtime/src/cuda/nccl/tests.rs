use super::plan::*;
use super::*;
use crate::cuda::schedule::tests::view;

/// A mixed all-to-all of 3 members becomes 9 messages in (sender, receiver) order, chunk q
/// of p's source landing in chunk p of q's destination.
#[test]
fn decompose_all_to_all() {
    let call = CollectiveCall {
        group: vec![0, 1, 4],
        members: (0..3)
            .map(|_| Collective::AllToAll {
                src: view(0, 0, 6),
                dst: view(1, 0, 6),
                split_axis: 0,
                concat_axis: 0,
            })
            .collect(),
    };
    let d = decompose(&call, 4).unwrap();
    assert!(d.fan_out.is_empty());
    let m = d.messages;
    assert_eq!(m.len(), 9);
    let m5 = &m[5]; // p = 1, q = 2
    assert_eq!((m5.src_rank, m5.dst_rank), (1, 4));
    assert_eq!(m5.src, view(0, 4, 2));
    assert_eq!(m5.dst, view(1, 2, 2));
    assert_eq!((m[0].src_rank, m[0].dst_rank), (0, 0));
}

/// All-gather over [0, 1 | 4, 5] (2 ranks per process): what both ranks of the other
/// process receive crosses once, to the first of them, and fans out from there; the
/// broadcast likewise.
#[test]
fn decompose_gather_and_broadcast() {
    let call = CollectiveCall {
        group: vec![0, 1, 4, 5],
        members: (0..4)
            .map(|_| Collective::AllGather {
                src: view(0, 0, 3),
                dst: view(1, 0, 12),
                axis: 0,
            })
            .collect(),
    };
    let d = decompose(&call, 2).unwrap();
    let pairs = |v: &[Message]| -> Vec<(usize, usize)> {
        v.iter().map(|m| (m.src_rank, m.dst_rank)).collect()
    };
    // Member 0 (rank 0): to itself, to 1 (same process), to 4 only across.
    assert_eq!(pairs(&d.messages[..3]), vec![(0, 0), (0, 1), (0, 4)]);
    assert_eq!(d.messages.len(), 12);
    assert_eq!(d.fan_out.len(), 4);
    // Rank 4 passes rank 0's chunk (chunk 0) on to rank 5.
    assert_eq!((d.fan_out[0].src_rank, d.fan_out[0].dst_rank), (4, 5));
    assert_eq!(d.fan_out[0].src, view(1, 0, 3));
    assert_eq!(d.fan_out[0].dst, view(1, 0, 3));
    // Rank 5's chunk (chunk 3) crosses to rank 0 and fans out to rank 1.
    assert_eq!((d.fan_out[3].src_rank, d.fan_out[3].dst_rank), (0, 1));
    assert_eq!(d.fan_out[3].dst, view(1, 9, 3));
    // One rank per process: nothing to fan out.
    assert!(decompose(&call, 1).unwrap().fan_out.is_empty());
    let call = CollectiveCall {
        group: vec![0, 1, 4, 5],
        members: (0..4)
            .map(|_| Collective::Broadcast {
                buf: view(0, 0, 4),
                root: 1,
            })
            .collect(),
    };
    let d = decompose(&call, 2).unwrap();
    assert_eq!(pairs(&d.messages), vec![(1, 0), (1, 4)]);
    assert_eq!(pairs(&d.fan_out), vec![(4, 5)]);
}

/// A reduction has no message form: refused, naming the group.
#[test]
fn decompose_refuses_reductions() {
    let call = CollectiveCall {
        group: vec![0, 1, 4],
        members: (0..3)
            .map(|_| Collective::AllReduce {
                bufs: vec![view(0, 0, 4)],
                kind: CombineKind::Add,
            })
            .collect(),
    };
    let e = decompose(&call, 2).unwrap_err().to_string();
    assert!(e.contains("[0, 1, 4]") && e.contains("reduces"), "{e}");
    // A reduce to one member too.
    let call = CollectiveCall {
        group: vec![0, 1, 4],
        members: (0..3)
            .map(|p| Collective::Reduce {
                src: view(0, 0, 4),
                dst: (p == 2).then(|| view(0, 4, 4)),
                root: 2,
                kind: CombineKind::Add,
            })
            .collect(),
    };
    let e = decompose(&call, 2).unwrap_err().to_string();
    assert!(e.contains("[0, 1, 4]") && e.contains("reduces"), "{e}");
}

/// bf16 into bf16 sums in bf16 (half the bytes on the wire); an f32 side widens; other
/// types are refused.
#[test]
fn reduce_type_keeps_bf16_and_widens_mixed() {
    use DType::*;
    assert_eq!(reduce_type(BF16, BF16).unwrap(), BF16);
    assert_eq!(reduce_type(F32, F32).unwrap(), F32);
    assert_eq!(reduce_type(BF16, F32).unwrap(), F32);
    assert_eq!(reduce_type(F32, BF16).unwrap(), F32);
    let e = reduce_type(F16, F16).unwrap_err().to_string();
    assert!(e.contains("f16"), "{e}");
}
