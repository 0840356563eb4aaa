//! The per-rank execution plan: what lowering produces and every runtime backend consumes.
//!
//! A plan is plain data (serde). Each rank runs a sequence of *stages*. Inside a stage the
//! `compute` ops run in order on the rank's compute stream, while the `comm` ops run
//! concurrently on transfer streams; a stage ends with a barrier over all ranks, so every
//! transfer of stage `t` has landed before stage `t + 1` starts. `verify` checks that the
//! concurrent parts of a stage never touch the same memory (the double-buffering contract),
//! that transfers match, and that every view stays inside its slot.
//!
//! Memory of a rank is a list of *slots* (local allocations). A slot may be initialised from a
//! region of a global input buffer (its shard), and a region of a global output buffer is read
//! back from a slot at the end (`outputs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub mod balance;
pub mod mask;
pub mod patch;
pub mod region_set;
pub mod tile;
pub mod tile_kernel;
pub mod verify;
pub use mask::{AttnMask, Documents};
pub use patch::{PatchArgs, PatchAttr, PatchKind, PatchSpec, PATCHES};
pub use region_set::RegionSet;
pub use tile::TileOp;
pub use verify::{verify, PlanError};

/// Element type of a buffer or slot. Backends may store with more precision (the CPU executor
/// holds f64 unless told to round every stored value to its slot's type); the type says what
/// the device representation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
}

impl DType {
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
}

/// Whether a global buffer is an input of the operator or its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    Output,
}

/// A logical tensor of the operator, as the caller sees it (unsharded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GlobalBuffer {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub role: Role,
}

/// A box `[offset, offset + extent)` per dimension.
///
/// `offset` and `extent` have one entry per dimension, always the same number: a plan read
/// from JSON whose region has fewer offsets than extents (or more) is refused when it is
/// read (`serde` error "region with N offsets and M extents"), so no later code indexes past
/// the shorter one; [`Region::fits_in`] checks it again for regions built in code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RegionFields")]
pub struct Region {
    pub offset: Vec<usize>,
    pub extent: Vec<usize>,
}

/// [`Region`] as written in JSON, before its dimensions are checked to agree.
#[derive(Deserialize)]
struct RegionFields {
    offset: Vec<usize>,
    extent: Vec<usize>,
}

impl TryFrom<RegionFields> for Region {
    type Error = String;
    fn try_from(r: RegionFields) -> Result<Self, String> {
        if r.offset.len() != r.extent.len() {
            return Err(format!(
                "region with {} offsets and {} extents (one of each per dimension)",
                r.offset.len(),
                r.extent.len()
            ));
        }
        Ok(Region {
            offset: r.offset,
            extent: r.extent,
        })
    }
}

/// The most elements a plan's buffer or slot may hold (2^48): what the verifier accepts, so
/// that sizes and byte counts computed from a verified plan cannot overflow.
pub const MAX_ELEMENTS: usize = 1 << 48;

impl Region {
    pub fn full(shape: &[usize]) -> Self {
        Region {
            offset: vec![0; shape.len()],
            extent: shape.to_vec(),
        }
    }
    /// The number of elements (saturating at `usize::MAX`: the verifier refuses shapes of more
    /// than [`MAX_ELEMENTS`], so a verified plan never gets there).
    pub fn numel(&self) -> usize {
        self.extent
            .iter()
            .try_fold(1usize, |a, e| a.checked_mul(*e))
            .unwrap_or(usize::MAX)
    }
    pub fn rank(&self) -> usize {
        self.extent.len()
    }
    /// True when `self` fits inside a tensor of `shape`.
    pub fn fits_in(&self, shape: &[usize]) -> bool {
        self.rank() == shape.len()
            && self.offset.len() == shape.len()
            && self
                .offset
                .iter()
                .zip(&self.extent)
                .zip(shape)
                .all(|((o, e), s)| o.checked_add(*e).is_some_and(|end| end <= *s))
    }
    /// Chunk `chunk` of `parts` equal chunks of this box along `axis`: the collective
    /// geometry (an AllGather member `p`'s piece is chunk `p` of the destination, a
    /// ReduceScatter member keeps chunk `p` of the source, an AllToAll member `p` sends chunk
    /// `q` of its source to member `q`, which stores it as chunk `p` of its destination).
    /// `Err` when the axis does not exist, the chunk is out of range, or the extent does not
    /// split evenly.
    pub fn chunk(&self, axis: usize, parts: usize, chunk: usize) -> Result<Region, String> {
        if axis >= self.rank() || parts == 0 || chunk >= parts {
            return Err(format!(
                "chunk {chunk} of {parts} along axis {axis} of {self}"
            ));
        }
        if !self.extent[axis].is_multiple_of(parts) {
            return Err(format!(
                "extent {} of axis {axis} does not split into {parts} chunks",
                self.extent[axis]
            ));
        }
        let step = self.extent[axis] / parts;
        let mut out = self.clone();
        out.offset[axis] += chunk * step;
        out.extent[axis] = step;
        Ok(out)
    }
    /// True when the two boxes share at least one element.
    pub fn overlaps(&self, other: &Region) -> bool {
        self.rank() == other.rank()
            && (0..self.rank()).all(|d| {
                let (a0, a1) = (
                    self.offset[d],
                    self.offset[d].saturating_add(self.extent[d]),
                );
                let (b0, b1) = (
                    other.offset[d],
                    other.offset[d].saturating_add(other.extent[d]),
                );
                a0 < b1 && b0 < a1
            })
            && self.numel() > 0
            && other.numel() > 0
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for d in 0..self.rank() {
            if d > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}:{}", self.offset[d], self.offset[d] + self.extent[d])?;
        }
        write!(f, "]")
    }
}

/// How a slot is filled before the first stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotInit {
    /// Contents undefined (backends poison it).
    Uninit,
    /// All zeros (additive accumulators).
    Zero,
    /// Every element minus infinity (the log-sum-exp half of an empty softmax accumulator).
    NegInf,
    /// All zeros, and final: the accumulator of a tile every contribution of which the causal
    /// mask skips (the gradient of a key no query sees), whose value is the reduction's
    /// identity. Filled as [`SlotInit::Zero`]; the plan verifier refuses an output piece from
    /// a `Zero` or `NegInf` slot nothing writes (an empty program), and takes one from this.
    MaskedZero,
    /// Every element minus infinity, and final: the log-sum-exp half of a
    /// [`SlotInit::MaskedZero`] softmax accumulator (a query no key is visible to).
    MaskedNegInf,
    /// Copy of `region` of global input buffer `buffer` (an index into `Plan::buffers`).
    FromGlobal { buffer: usize, region: Region },
    /// Copies of several regions of global input buffer `buffer`, side by side in the slot:
    /// a rank's shard under a zigzag or striped placement is several runs of the buffer, kept
    /// in increasing order. The pieces tile the slot.
    FromGlobalPieces {
        buffer: usize,
        pieces: Vec<InputPiece>,
    },
}

/// One piece of a [`SlotInit::FromGlobalPieces`] slot: `region` of the global buffer lands at
/// `at` in the slot (same extents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputPiece {
    pub region: Region,
    pub at: Region,
}

/// A local allocation of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub init: SlotInit,
}

impl Slot {
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}

/// A sub-box of a slot (offsets relative to the slot).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct View {
    pub slot: usize,
    pub region: Region,
}

/// How a partial result is combined into an accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CombineKind {
    /// acc += part.
    Add,
    /// (o, lse) softmax merge: views are `[o, lse]` for acc and for part.
    LseMerge,
}

/// Compute-stream operations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum ComputeOp {
    Patch {
        patch: PatchKind,
        inputs: Vec<View>,
        outputs: Vec<View>,
    },
    /// `acc = combine(acc, part)`; for `LseMerge` both lists are `[o, lse]`.
    Combine {
        kind: CombineKind,
        acc: Vec<View>,
        part: Vec<View>,
    },
    /// Local copy (pack/unpack); shapes must have equal element counts.
    Copy { src: View, dst: View },
    /// A compiler-generated computation on tiles (`tile.rs`): a matmul, a row reduction or a
    /// fused elementwise program; `output` is written, never read.
    Tile {
        tile: TileOp,
        inputs: Vec<View>,
        output: View,
    },
}

/// Collective operations over a group of ranks (ordered; a rank's position is its index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "collective")]
pub enum Collective {
    /// dst = concat over group of each member's src along `axis` of dst.
    AllGather { src: View, dst: View, axis: usize },
    /// In place: every member's `bufs` become the combination over the group.
    AllReduce { bufs: Vec<View>, kind: CombineKind },
    /// Combine each member's `src` over the group, member `p` keeps chunk `p` along `axis`.
    ReduceScatter {
        src: View,
        dst: View,
        axis: usize,
        kind: CombineKind,
    },
    /// Reduce to one member: member `root` (a position in the group, as for `Broadcast`)
    /// receives in `dst` the combination over the group, in group order, of every member's
    /// `src`. Every member's `src` has the same extents and element type; `dst` has the
    /// extents of `src` (its element type may differ: a bf16 partial sum reduced into f32).
    /// `dst` is `Some` on the root and `None` on every other member, which only sends: the
    /// plan verifier checks both, and that the members agree on `root` and `kind`. The root's
    /// `dst` may be its `src` (in place: its partial is overwritten by the sum). Only `Add`
    /// is expressible (one view cannot hold an lse merge's `[o, lse]` pair; refused).
    ///
    /// The lowering emits one per owner of a tile whose owners are a strict subset of the
    /// reducing group: each owner receives only its own part of the sum (half the bytes of
    /// an all-reduce of the tile).
    Reduce {
        src: View,
        dst: Option<View>,
        root: usize,
        kind: CombineKind,
    },
    /// Member p sends chunk q of `src` (split along `split_axis`) to member q, which stores
    /// it as chunk p of `dst` along `concat_axis`.
    AllToAll {
        src: View,
        dst: View,
        split_axis: usize,
        concat_axis: usize,
    },
    /// Member `root`'s `buf` is copied to every member's `buf`.
    Broadcast { buf: View, root: usize },
}

/// Transfer-stream operations. `Send`/`Recv` pairs match on (sender, receiver, tag).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum CommOp {
    Send {
        peer: usize,
        src: View,
        tag: u64,
    },
    Recv {
        peer: usize,
        dst: View,
        tag: u64,
    },
    Collective {
        group: Vec<usize>,
        collective: Collective,
    },
}

/// One bulk-synchronous step of a rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub compute: Vec<ComputeOp>,
    pub comm: Vec<CommOp>,
}

/// A region of a global output buffer held by a rank's slot after the last stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputPiece {
    pub buffer: usize,
    pub region: Region,
    pub src: View,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankProgram {
    pub rank: usize,
    /// Coordinates of the rank in the mesh (slowest level first).
    pub coords: Vec<usize>,
    pub slots: Vec<Slot>,
    pub stages: Vec<Stage>,
    pub outputs: Vec<OutputPiece>,
}

impl RankProgram {
    /// Bytes of all slots of this rank: the memory the plan needs on the device.
    pub fn memory_bytes(&self) -> usize {
        self.slots.iter().map(Slot::bytes).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The kernel (operator) symbol the plan was lowered from.
    pub name: String,
    /// Mesh shape, slowest level first; ranks are numbered row-major over it.
    pub mesh: Vec<usize>,
    pub buffers: Vec<GlobalBuffer>,
    /// Run-time document boundaries the attention masks read (`mask.rs`): inputs of every
    /// run, by name, besides the buffers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<Documents>,
    pub ranks: Vec<RankProgram>,
}

impl Plan {
    /// The number of ranks: the mesh's product (saturating; the verifier refuses a mesh of
    /// more than [`MAX_ELEMENTS`] ranks).
    pub fn num_ranks(&self) -> usize {
        self.mesh
            .iter()
            .try_fold(1usize, |a, e| a.checked_mul(*e))
            .unwrap_or(usize::MAX)
    }
    pub fn num_stages(&self) -> usize {
        self.ranks.iter().map(|r| r.stages.len()).max().unwrap_or(0)
    }
    pub fn buffer_index(&self, name: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.name == name)
    }
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plan serialises")
    }
    pub fn from_json(text: &str) -> Result<Plan, serde_json::Error> {
        serde_json::from_str(text)
    }
    /// Bytes moved by point-to-point sends and collectives, per rank (sent side).
    pub fn bytes_sent_per_rank(&self) -> BTreeMap<usize, usize> {
        let mut out = BTreeMap::new();
        for r in &self.ranks {
            let mut total = 0;
            for st in &r.stages {
                for c in &st.comm {
                    match c {
                        CommOp::Send { src, .. } => {
                            total += src.region.numel() * r.slots[src.slot].dtype.size_bytes()
                        }
                        CommOp::Collective { group, collective } => {
                            total += collective_send_bytes(r, group.len(), collective)
                        }
                        CommOp::Recv { .. } => {}
                    }
                }
            }
            out.insert(r.rank, total);
        }
        out
    }
}

/// Bytes a member sends in a collective under ring algorithms (what NCCL moves). A reduce's
/// root (the member with a `dst`) sends nothing, every other member its whole `src`.
pub fn collective_send_bytes(r: &RankProgram, n: usize, c: &Collective) -> usize {
    let bytes = |v: &View| v.region.numel() * r.slots[v.slot].dtype.size_bytes();
    if n <= 1 {
        return 0;
    }
    match c {
        Collective::AllGather { src, .. } => bytes(src) * (n - 1),
        Collective::AllReduce { bufs, .. } => bufs.iter().map(|b| 2 * bytes(b) * (n - 1) / n).sum(),
        Collective::ReduceScatter { src, .. } => bytes(src) * (n - 1) / n,
        // A ring (chain) ending at the root: every other member passes the whole buffer on
        // once, the root only receives ((n - 1) x the buffer over the group).
        Collective::Reduce { src, dst, .. } => {
            if dst.is_some() {
                0
            } else {
                bytes(src)
            }
        }
        Collective::AllToAll { src, .. } => bytes(src) * (n - 1) / n,
        Collective::Broadcast { buf, .. } => bytes(buf),
    }
}

/// FNV-1a, 64 bits (Fowler, Noll and Vo): the stable digest the project uses for generated
/// kernel names, the launcher's check that every process runs the same plan, and snapshot
/// digests. Not a cryptographic hash.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Row-major rank number of mesh coordinates.
pub fn rank_of(mesh: &[usize], coords: &[usize]) -> usize {
    coords.iter().zip(mesh).fold(0, |acc, (c, m)| acc * m + c)
}

/// Mesh coordinates of a rank number (row-major, slowest level first).
pub fn coords_of(mesh: &[usize], mut rank: usize) -> Vec<usize> {
    let mut c = vec![0; mesh.len()];
    for d in (0..mesh.len()).rev() {
        c[d] = rank % mesh[d];
        rank /= mesh[d];
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_vectors() {
        // The published FNV-1a 64-bit test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn region_dimensions_agree_when_read() {
        let ok: Region = serde_json::from_str(r#"{"offset": [1, 0], "extent": [2, 3]}"#).unwrap();
        assert_eq!(ok.offset, vec![1, 0]);
        let e = serde_json::from_str::<Region>(r#"{"offset": [1], "extent": [2, 3]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("region with 1 offsets and 2 extents"), "{e}");
        // Built in code, a mismatched region does not fit anywhere.
        let bad = Region {
            offset: vec![0],
            extent: vec![1, 1],
        };
        assert!(!bad.fits_in(&[4, 4]));
    }

    #[test]
    fn rank_coords_roundtrip() {
        let mesh = [2, 4];
        for r in 0..8 {
            assert_eq!(rank_of(&mesh, &coords_of(&mesh, r)), r);
        }
        assert_eq!(coords_of(&mesh, 5), vec![1, 1]);
    }

    #[test]
    fn region_overlap() {
        let a = Region {
            offset: vec![0, 0],
            extent: vec![2, 4],
        };
        let b = Region {
            offset: vec![1, 3],
            extent: vec![2, 2],
        };
        let c = Region {
            offset: vec![2, 0],
            extent: vec![1, 4],
        };
        assert!(a.overlaps(&b));
        assert!(!a.overlaps(&c));
        assert!(a.fits_in(&[2, 4]));
        assert!(!b.fits_in(&[2, 4]));
    }

    /// A slot filled from several runs of an input: the pieces must tile it exactly.
    #[test]
    fn input_pieces_tile_their_slot() {
        let r = |o: usize, e: usize| Region {
            offset: vec![o],
            extent: vec![e],
        };
        let plan = |pieces: Vec<InputPiece>| Plan {
            name: "k".into(),
            mesh: vec![1],
            buffers: vec![
                GlobalBuffer {
                    name: "x".into(),
                    shape: vec![16],
                    dtype: DType::F32,
                    role: Role::Input,
                },
                GlobalBuffer {
                    name: "y".into(),
                    shape: vec![8],
                    dtype: DType::F32,
                    role: Role::Output,
                },
            ],
            documents: vec![],
            ranks: vec![RankProgram {
                rank: 0,
                coords: vec![0],
                slots: vec![Slot {
                    name: "x.shard".into(),
                    dtype: DType::F32,
                    shape: vec![8],
                    init: SlotInit::FromGlobalPieces { buffer: 0, pieces },
                }],
                stages: vec![],
                outputs: vec![OutputPiece {
                    buffer: 1,
                    region: r(0, 8),
                    src: View {
                        slot: 0,
                        region: r(0, 8),
                    },
                }],
            }],
        };
        let piece = |g: usize, at: usize| InputPiece {
            region: r(g, 4),
            at: r(at, 4),
        };
        assert!(verify(&plan(vec![piece(0, 0), piece(12, 4)])).is_ok());
        let overlap = verify(&plan(vec![piece(0, 0), piece(12, 2)])).unwrap_err();
        assert!(
            overlap.to_string().contains("does not land")
                || overlap.to_string().contains("two pieces"),
            "{overlap}"
        );
        let short = verify(&plan(vec![piece(0, 0)])).unwrap_err();
        assert!(
            short.to_string().contains("initialised from 4 elements"),
            "{short}"
        );
        let outside = verify(&plan(vec![piece(0, 0), piece(14, 4)])).unwrap_err();
        assert!(outside.to_string().contains("outside"), "{outside}");
    }
}
