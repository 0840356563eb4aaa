//! The compiler-generated device kernels, emitted as MLIR text.
//!
//! Every kernel is written once as a *body template* that works on two
//! SSA values, `%gid` (the first element this thread handles) and `%stride`
//! (the distance between two elements handled by the same thread), i.e. a
//! grid-stride loop. The same template is instantiated
//!
//! * for the device ([`gpu_module_mlir`]): inside a `gpu.func ... kernel`,
//!   with `%gid = blockIdx.x * blockDim.x + threadIdx.x`,
//!   `%stride = gridDim.x * blockDim.x`, pointers in the global address space
//!   (`!llvm.ptr<1>`) and `exp2`/`log2` as the PTX `ex2.approx.f32` /
//!   `lg2.approx.f32` instructions (no libdevice needed);
//! * for the host ([`host_module_mlir`]): inside a `func.func` with the same
//!   parameters, an outer sequential loop simulating `threads` threads,
//!   generic pointers (`!llvm.ptr`) and the exact `llvm.exp2`/`llvm.log2`
//!   intrinsics. This is what the numerical unit tests JIT and run on the CPU.

use mercury_plan::tile_kernel::TileKernel;
use std::fmt::Write as _;

/// Type of one kernel parameter (the runtime passes them in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// Device pointer to `f32` elements.
    PtrF32,
    /// Device pointer to bf16 elements (stored as 16-bit integers).
    PtrBf16,
    /// Device pointer to 16-bit elements of any type (copied bit for bit).
    PtrB16,
    /// Device pointer to 32-bit elements of any type (copied bit for bit).
    PtrB32,
    /// A signed 64-bit count, length or stride (in elements).
    I64,
    /// A 32-bit float scalar passed by value.
    F32,
}

impl ParamType {
    /// True for the device-pointer parameters.
    pub fn is_pointer(self) -> bool {
        matches!(
            self,
            ParamType::PtrF32 | ParamType::PtrBf16 | ParamType::PtrB16 | ParamType::PtrB32
        )
    }

    /// Size in bytes of the launch argument (pointers are 64-bit).
    pub fn arg_size(self) -> usize {
        match self {
            ParamType::F32 => 4,
            _ => 8,
        }
    }
}

/// One kernel parameter: its name (as in the contract table) and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// Parameter name as written in the contract.
    pub name: &'static str,
    /// Parameter type.
    pub ty: ParamType,
}

const fn p(name: &'static str, ty: ParamType) -> KernelParam {
    KernelParam { name, ty }
}

use ParamType::{PtrB16, PtrB32, PtrBf16, PtrF32, F32, I64};

/// The compiler-generated device kernels (see the crate docs for the
/// contract table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKernel {
    /// `mercury_lse_merge_o_f32`: rescale-and-add of two partial attention
    /// outputs by their log-sum-exps (does not write `lse_acc`).
    LseMergeO,
    /// `mercury_lse_merge_lse_f32`: merge of the log-sum-exps, launched after
    /// [`DeviceKernel::LseMergeO`].
    LseMergeLse,
    /// `mercury_add_f32`: `acc += part`.
    AddF32,
    /// `mercury_add_bf16_f32`: `acc += f32(part)` with a bf16 part (a partial sum that
    /// travelled in the output's precision).
    AddBf16F32,
    /// `mercury_sum_bf16`: `dst = bf16(p0 + p1 + ...)` over `nparts` (1 to 8) bf16 parts,
    /// summed in f32 in part order and rounded once: a reduce-scatter's chunk in one pass
    /// (reads each part once, writes the result once).
    SumBf16,
    /// `mercury_cast_f32_to_bf16`: round to nearest even.
    CastF32ToBf16,
    /// `mercury_cast_bf16_to_f32`: exact widening.
    CastBf16ToF32,
    /// `mercury_copy_2d_b16`: strided 2-D copy of 16-bit elements.
    Copy2dB16,
    /// `mercury_copy_2d_b32`: strided 2-D copy of 32-bit elements.
    Copy2dB32,
    /// `mercury_fill_f32`: `dst[i] = value`.
    FillF32,
    /// `mercury_attn_merge_o_bf16`: merges `nparts` bf16 partial attention outputs (a vendor
    /// patch's O, dense rows, e.g. several ring steps) into a strided f32 accumulator by their
    /// log-sum-exps in one pass, four elements per work item; with `overwrite` the accumulator
    /// is replaced. Does not write `lse_acc`.
    AttnMergeOBf16,
    /// `mercury_attn_merge_lse`: the strided log-sum-exp update over `nparts` parts (with
    /// `overwrite`: of the parts alone) that goes with [`DeviceKernel::AttnMergeOBf16`],
    /// launched after it.
    AttnMergeLse,
}

impl DeviceKernel {
    /// Every kernel, in a fixed order.
    pub const ALL: [DeviceKernel; 12] = [
        DeviceKernel::LseMergeO,
        DeviceKernel::LseMergeLse,
        DeviceKernel::AddF32,
        DeviceKernel::AddBf16F32,
        DeviceKernel::CastF32ToBf16,
        DeviceKernel::CastBf16ToF32,
        DeviceKernel::Copy2dB16,
        DeviceKernel::Copy2dB32,
        DeviceKernel::FillF32,
        DeviceKernel::AttnMergeOBf16,
        DeviceKernel::AttnMergeLse,
        DeviceKernel::SumBf16,
    ];

    /// The symbol (PTX `.entry` name) the runtime launches.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKernel::LseMergeO => "mercury_lse_merge_o_f32",
            DeviceKernel::LseMergeLse => "mercury_lse_merge_lse_f32",
            DeviceKernel::AddF32 => "mercury_add_f32",
            DeviceKernel::AddBf16F32 => "mercury_add_bf16_f32",
            DeviceKernel::SumBf16 => "mercury_sum_bf16",
            DeviceKernel::CastF32ToBf16 => "mercury_cast_f32_to_bf16",
            DeviceKernel::CastBf16ToF32 => "mercury_cast_bf16_to_f32",
            DeviceKernel::Copy2dB16 => "mercury_copy_2d_b16",
            DeviceKernel::Copy2dB32 => "mercury_copy_2d_b32",
            DeviceKernel::FillF32 => "mercury_fill_f32",
            DeviceKernel::AttnMergeOBf16 => "mercury_attn_merge_o_bf16",
            DeviceKernel::AttnMergeLse => "mercury_attn_merge_lse",
        }
    }

    /// Looks a kernel up by its symbol name.
    pub fn from_name(name: &str) -> Option<DeviceKernel> {
        DeviceKernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The parameters, in launch order.
    pub fn params(self) -> &'static [KernelParam] {
        const LSE_O: &[KernelParam] = &[
            p("o_acc", PtrF32),
            p("lse_acc", PtrF32),
            p("o_part", PtrF32),
            p("lse_part", PtrF32),
            p("rows", I64),
            p("d", I64),
        ];
        const LSE_LSE: &[KernelParam] =
            &[p("lse_acc", PtrF32), p("lse_part", PtrF32), p("rows", I64)];
        const ADD: &[KernelParam] = &[p("acc", PtrF32), p("part", PtrF32), p("n", I64)];
        const ADD_BF16: &[KernelParam] = &[p("acc", PtrF32), p("part", PtrBf16), p("n", I64)];
        const SUM_BF16: &[KernelParam] = &[
            p("dst", PtrBf16),
            p("p0", PtrBf16),
            p("p1", PtrBf16),
            p("p2", PtrBf16),
            p("p3", PtrBf16),
            p("p4", PtrBf16),
            p("p5", PtrBf16),
            p("p6", PtrBf16),
            p("p7", PtrBf16),
            p("n", I64),
            p("nparts", I64),
        ];
        const TO_BF16: &[KernelParam] = &[p("dst", PtrBf16), p("src", PtrF32), p("n", I64)];
        const FROM_BF16: &[KernelParam] = &[p("dst", PtrF32), p("src", PtrBf16), p("n", I64)];
        const COPY_B16: &[KernelParam] = &[
            p("dst", PtrB16),
            p("src", PtrB16),
            p("rows", I64),
            p("cols", I64),
            p("dst_stride", I64),
            p("src_stride", I64),
        ];
        const COPY_B32: &[KernelParam] = &[
            p("dst", PtrB32),
            p("src", PtrB32),
            p("rows", I64),
            p("cols", I64),
            p("dst_stride", I64),
            p("src_stride", I64),
        ];
        const FILL: &[KernelParam] = &[p("dst", PtrF32), p("value", F32), p("n", I64)];
        // Rows are (batch, head, seq) of a [b, hq, sq, d] accumulator with element strides
        // o_sb / o_sh / o_sr (lse: l_sb / l_sh, unit seq stride); `nparts` dense parts lie
        // `part_o_stride` / `part_l_stride` elements apart.
        const ATTN_O: &[KernelParam] = &[
            p("o_acc", PtrF32),
            p("lse_acc", PtrF32),
            p("o_part", PtrBf16),
            p("lse_part", PtrF32),
            p("rows", I64),
            p("d", I64),
            p("sq", I64),
            p("hq", I64),
            p("o_sb", I64),
            p("o_sh", I64),
            p("o_sr", I64),
            p("l_sb", I64),
            p("l_sh", I64),
            p("overwrite", I64),
            p("nparts", I64),
            p("part_o_stride", I64),
            p("part_l_stride", I64),
        ];
        const ATTN_LSE: &[KernelParam] = &[
            p("lse_acc", PtrF32),
            p("lse_part", PtrF32),
            p("rows", I64),
            p("sq", I64),
            p("hq", I64),
            p("l_sb", I64),
            p("l_sh", I64),
            p("overwrite", I64),
            p("nparts", I64),
            p("part_l_stride", I64),
        ];
        match self {
            DeviceKernel::LseMergeO => LSE_O,
            DeviceKernel::LseMergeLse => LSE_LSE,
            DeviceKernel::AddF32 => ADD,
            DeviceKernel::AddBf16F32 => ADD_BF16,
            DeviceKernel::SumBf16 => SUM_BF16,
            DeviceKernel::CastF32ToBf16 => TO_BF16,
            DeviceKernel::CastBf16ToF32 => FROM_BF16,
            DeviceKernel::Copy2dB16 => COPY_B16,
            DeviceKernel::Copy2dB32 => COPY_B32,
            DeviceKernel::FillF32 => FILL,
            DeviceKernel::AttnMergeOBf16 => ATTN_O,
            DeviceKernel::AttnMergeLse => ATTN_LSE,
        }
    }

    /// Number of work items (threads needed for one element each) for the
    /// given integer launch arguments, in parameter order (pointer and `f32`
    /// parameters are skipped, so pass only the `i64` ones). Returns `None`
    /// when the wrong number of counts is given. The grid must cover at least
    /// this many threads *or* be smaller: the kernels use grid-stride loops,
    /// so any 1-D grid and block size is correct.
    pub fn work_items(self, counts: &[i64]) -> Option<i64> {
        let want = self.params().iter().filter(|p| p.ty == I64).count();
        if counts.len() != want {
            return None;
        }
        Some(match self {
            DeviceKernel::LseMergeO | DeviceKernel::Copy2dB16 | DeviceKernel::Copy2dB32 => {
                counts[0].saturating_mul(counts[1])
            }
            // Four elements per work item.
            DeviceKernel::AttnMergeOBf16 => counts[0].saturating_mul(counts[1]) / 4,
            _ => counts[0],
        })
    }

    /// The grid-stride loop body (see the module docs). Tokens: `!P` is the
    /// pointer type, `EXP2` / `LOG2` the intrinsic names.
    fn body_template(self) -> &'static str {
        match self {
            DeviceKernel::LseMergeO => LSE_MERGE_O_BODY,
            DeviceKernel::LseMergeLse => LSE_MERGE_LSE_BODY,
            DeviceKernel::AddF32 => ADD_F32_BODY,
            DeviceKernel::AddBf16F32 => ADD_BF16_F32_BODY,
            DeviceKernel::SumBf16 => SUM_BF16_BODY.as_str(),
            DeviceKernel::CastF32ToBf16 => CAST_F32_TO_BF16_BODY,
            DeviceKernel::CastBf16ToF32 => CAST_BF16_TO_F32_BODY,
            DeviceKernel::Copy2dB16 | DeviceKernel::Copy2dB32 => COPY_2D_BODY,
            DeviceKernel::FillF32 => FILL_F32_BODY,
            DeviceKernel::AttnMergeOBf16 => ATTN_MERGE_O_BODY,
            DeviceKernel::AttnMergeLse => ATTN_MERGE_LSE_BODY,
        }
    }

    /// The element type that replaces `ELT` in [`COPY_2D_BODY`] (the other templates
    /// have no `ELT` token).
    fn copy_element(self) -> Option<&'static str> {
        match self {
            DeviceKernel::Copy2dB16 => Some("i16"),
            DeviceKernel::Copy2dB32 => Some("i32"),
            _ => None,
        }
    }
}

impl std::fmt::Display for DeviceKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Threads per block that [`launch_dims`] picks.
pub const DEFAULT_BLOCK: u32 = 256;

/// Blocks per SM beyond which [`launch_dims`] lets the grid-stride loop do the
/// rest (measured on an H200: a grid capped at 8-32 blocks of 256 per SM runs
/// the streaming kernels 1.1-2.1x faster than one thread per element, e.g.
/// `mercury_fill_f32` 3.5 vs 1.7 TB/s, `mercury_lse_merge_o_f32` 2.7 vs 2.1 TB/s).
pub const BLOCKS_PER_SM: u32 = 32;

/// A good 1-D launch for `work_items` elements (see
/// [`DeviceKernel::work_items`]) on a GPU with `sm_count` SMs:
/// `(grid, block)` = `(min(ceil(work_items / 256), 32 * sm_count), 256)`, at
/// least one block. Any other 1-D launch is also correct.
pub fn launch_dims(work_items: i64, sm_count: u32) -> (u32, u32) {
    let block = DEFAULT_BLOCK;
    let cap = u64::from(BLOCKS_PER_SM) * u64::from(sm_count.max(1));
    let items = u64::try_from(work_items).unwrap_or(0);
    let grid = items.div_ceil(u64::from(block)).clamp(1, cap);
    (u32::try_from(grid).unwrap_or(u32::MAX), block)
}

/// Which instantiation of the body templates to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    Device,
    Host,
}

impl Flavor {
    pub(crate) fn ptr(self) -> &'static str {
        match self {
            Flavor::Device => "!llvm.ptr<1>",
            Flavor::Host => "!llvm.ptr",
        }
    }
    pub(crate) fn exp2(self) -> &'static str {
        match self {
            Flavor::Device => "llvm.nvvm.ex2.approx.f32",
            Flavor::Host => "llvm.exp2.f32",
        }
    }
    pub(crate) fn log2(self) -> &'static str {
        match self {
            Flavor::Device => "llvm.nvvm.lg2.approx.f",
            Flavor::Host => "llvm.log2.f32",
        }
    }
    fn param_type(self, ty: ParamType) -> &'static str {
        match ty {
            ParamType::I64 => "i64",
            ParamType::F32 => "f32",
            _ => self.ptr(),
        }
    }
}

fn instantiate(kernel: DeviceKernel, flavor: Flavor, indent: &str) -> String {
    let mut template = kernel.body_template().to_string();
    if let Some(elt) = kernel.copy_element() {
        template = template.replace("ELT", elt);
    }
    let body = template
        .replace("!P", flavor.ptr())
        .replace("EXP2", flavor.exp2())
        .replace("LOG2", flavor.log2());
    let mut out = String::new();
    for line in body.lines() {
        if line.trim().is_empty() {
            continue;
        }
        out.push_str(indent);
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn signature(kernel: DeviceKernel, flavor: Flavor) -> String {
    kernel
        .params()
        .iter()
        .map(|p| format!("%{}: {}", p.name, flavor.param_type(p.ty)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Emits one MLIR module with `gpu.container_module` and a
/// `gpu.module @mercury_kernels` holding one `gpu.func ... kernel` per
/// requested kernel (duplicates are emitted once).
pub fn gpu_module_mlir(kernels: &[DeviceKernel]) -> String {
    gpu_module_mlir_with(kernels, &[])
}

/// As [`gpu_module_mlir`], plus one kernel per generated tile kernel (`tiles`, duplicates
/// emitted once; the contract is `mercury_plan::tile_kernel`'s).
pub fn gpu_module_mlir_with(kernels: &[DeviceKernel], tiles: &[TileKernel]) -> String {
    let mut out = String::new();
    out.push_str("module attributes {gpu.container_module} {\n");
    out.push_str("  gpu.module @mercury_kernels {\n");
    for tile in crate::elementwise::dedup_tiles(tiles) {
        out.push_str(&crate::elementwise::gpu_func(&tile));
    }
    for kernel in dedup(kernels) {
        let _ = writeln!(
            out,
            "    gpu.func @{}({}) kernel {{",
            kernel.name(),
            signature(kernel, Flavor::Device)
        );
        out.push_str(GPU_PROLOGUE);
        out.push_str(&instantiate(kernel, Flavor::Device, "      "));
        out.push_str("      gpu.return\n    }\n");
    }
    out.push_str("  }\n}\n");
    out
}

/// Same as [`gpu_module_mlir`].
pub fn emit_gpu_mlir(kernels: &[DeviceKernel]) -> String {
    gpu_module_mlir(kernels)
}

/// Emits the host (CPU) instantiation of the same kernel bodies: one
/// `func.func @<kernel name>` per kernel with the same parameters (generic
/// `!llvm.ptr` pointers), running the grid-stride body for `threads`
/// simulated threads one after the other (`%gid` = 0..threads,
/// `%stride` = threads). Exact `llvm.exp2`/`llvm.log2` replace the PTX
/// approximations. Used by the numerical tests; lowerable with
/// `convert-scf-to-cf, convert-to-llvm, reconcile-unrealized-casts`.
pub fn host_module_mlir(kernels: &[DeviceKernel], threads: u32) -> String {
    host_module_mlir_with(kernels, &[], threads)
}

/// As [`host_module_mlir`], plus the host instantiation of each generated tile kernel.
pub fn host_module_mlir_with(
    kernels: &[DeviceKernel],
    tiles: &[TileKernel],
    threads: u32,
) -> String {
    let threads = threads.max(1);
    let mut out = String::new();
    out.push_str("module {\n");
    for tile in crate::elementwise::dedup_tiles(tiles) {
        out.push_str(&crate::elementwise::host_func(&tile, threads));
    }
    for kernel in dedup(kernels) {
        out.push_str(&host_func(
            kernel.name(),
            &signature(kernel, Flavor::Host),
            threads,
            &instantiate(kernel, Flavor::Host, "      "),
        ));
    }
    out.push_str("}\n");
    out
}

/// The host `func.func @name(signature)` that runs a kernel's `body` (its `Flavor::Host`
/// instantiation, indented by six spaces) for `threads` simulated threads in sequence: `%gid`
/// runs over `0..threads` and `%stride` is `threads`, so the body's grid-stride loop covers
/// every work item exactly once.
pub(crate) fn host_func(name: &str, signature: &str, threads: u32, body: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  func.func @{name}({signature}) attributes {{llvm.emit_c_interface}} {{"
    );
    let _ = writeln!(
        out,
        "    %h_lo = arith.constant 0 : i64\n    %h_step = arith.constant 1 : i64\n    \
         %stride = arith.constant {threads} : i64\n    \
         scf.for %gid = %h_lo to %stride step %h_step : i64 {{"
    );
    out.push_str(body);
    out.push_str("    }\n    return\n  }\n");
    out
}

fn dedup(kernels: &[DeviceKernel]) -> Vec<DeviceKernel> {
    let mut seen = Vec::new();
    for &k in kernels {
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen
}

/// Defines `%gid` and `%stride` (i64) from the 1-D launch geometry.
pub(crate) const GPU_PROLOGUE: &str = "\
      %bid_x = gpu.block_id x
      %bdim_x = gpu.block_dim x
      %tid_x = gpu.thread_id x
      %gdim_x = gpu.grid_dim x
      %bid = arith.index_castui %bid_x : index to i64
      %bdim = arith.index_castui %bdim_x : index to i64
      %tid = arith.index_castui %tid_x : index to i64
      %gdim = arith.index_castui %gdim_x : index to i64
      %gbase = arith.muli %bid, %bdim : i64
      %gid = arith.addi %gbase, %tid : i64
      %stride = arith.muli %gdim, %bdim : i64
";

// o_acc[e] = (o_acc[e] * 2^((la-m)log2e) + o_part[e] * 2^((lp-m)log2e)) / (sum of
// the two weights), which equals o_acc*exp(la-new) + o_part*exp(lp-new) with
// new = m + log(exp(la-m) + exp(lp-m)). A side whose lse is -inf contributes
// exactly 0 (its o values are never multiplied in, so garbage/NaN there is
// harmless). Rows whose both lse are -inf are left untouched. All four loads
// are issued before any arithmetic so their latencies overlap (only the store
// is conditional).
const LSE_MERGE_O_BODY: &str = r#"
%total = arith.muli %rows, %d : i64
%ninf = arith.constant 0xFF800000 : f32
%zero = arith.constant 0.000000e+00 : f32
%log2e = arith.constant 1.44269504 : f32
scf.for %e = %gid to %total step %stride : i64 {
  %r = arith.divui %e, %d : i64
  %pla = llvm.getelementptr inbounds %lse_acc[%r] : (!P, i64) -> !P, f32
  %la = llvm.load %pla : !P -> f32
  %plp = llvm.getelementptr inbounds %lse_part[%r] : (!P, i64) -> !P, f32
  %lp = llvm.load %plp : !P -> f32
  %poa = llvm.getelementptr inbounds %o_acc[%e] : (!P, i64) -> !P, f32
  %oa = llvm.load %poa : !P -> f32
  %pop = llvm.getelementptr inbounds %o_part[%e] : (!P, i64) -> !P, f32
  %op = llvm.load %pop : !P -> f32
  %m = arith.maximumf %la, %lp : f32
  %da = arith.subf %la, %m : f32
  %ta = arith.mulf %da, %log2e : f32
  %wa = llvm.call_intrinsic "EXP2"(%ta) : (f32) -> f32
  %dp = arith.subf %lp, %m : f32
  %tp = arith.mulf %dp, %log2e : f32
  %wp = llvm.call_intrinsic "EXP2"(%tp) : (f32) -> f32
  %s = arith.addf %wa, %wp : f32
  %a_dead = arith.cmpf oeq, %la, %ninf : f32
  %ca = arith.mulf %oa, %wa : f32
  %ca0 = arith.select %a_dead, %zero, %ca : f32
  %p_dead = arith.cmpf oeq, %lp, %ninf : f32
  %cp = arith.mulf %op, %wp : f32
  %cp0 = arith.select %p_dead, %zero, %cp : f32
  %num = arith.addf %ca0, %cp0 : f32
  %o = arith.divf %num, %s : f32
  %live = arith.cmpf une, %m, %ninf : f32
  scf.if %live {
    llvm.store %o, %poa : f32, !P
  }
}
"#;

// lse_acc[r] = m + log(exp(la-m) + exp(lp-m)), computed as
// m + ln2 * log2(2^((la-m)log2e) + 2^((lp-m)log2e)); unchanged if both -inf.
const LSE_MERGE_LSE_BODY: &str = r#"
%ninf = arith.constant 0xFF800000 : f32
%log2e = arith.constant 1.44269504 : f32
%ln2 = arith.constant 0.693147182 : f32
scf.for %r = %gid to %rows step %stride : i64 {
  %pla = llvm.getelementptr inbounds %lse_acc[%r] : (!P, i64) -> !P, f32
  %la = llvm.load %pla : !P -> f32
  %plp = llvm.getelementptr inbounds %lse_part[%r] : (!P, i64) -> !P, f32
  %lp = llvm.load %plp : !P -> f32
  %m = arith.maximumf %la, %lp : f32
  %live = arith.cmpf une, %m, %ninf : f32
  scf.if %live {
    %da = arith.subf %la, %m : f32
    %ta = arith.mulf %da, %log2e : f32
    %wa = llvm.call_intrinsic "EXP2"(%ta) : (f32) -> f32
    %dp = arith.subf %lp, %m : f32
    %tp = arith.mulf %dp, %log2e : f32
    %wp = llvm.call_intrinsic "EXP2"(%tp) : (f32) -> f32
    %s = arith.addf %wa, %wp : f32
    %lg = llvm.call_intrinsic "LOG2"(%s) : (f32) -> f32
    %ln = arith.mulf %lg, %ln2 : f32
    %new = arith.addf %m, %ln : f32
    llvm.store %new, %pla : f32, !P
  }
}
"#;

const ADD_F32_BODY: &str = r#"
scf.for %e = %gid to %n step %stride : i64 {
  %pa = llvm.getelementptr inbounds %acc[%e] : (!P, i64) -> !P, f32
  %a = llvm.load %pa : !P -> f32
  %pb = llvm.getelementptr inbounds %part[%e] : (!P, i64) -> !P, f32
  %b = llvm.load %pb : !P -> f32
  %s = arith.addf %a, %b : f32
  llvm.store %s, %pa : f32, !P
}
"#;

// acc[e] += f32(part[e]): the bf16 bits widened exactly (shifted into the high half).
const ADD_BF16_F32_BODY: &str = r#"
%c16 = arith.constant 16 : i32
scf.for %e = %gid to %n step %stride : i64 {
  %pa = llvm.getelementptr inbounds %acc[%e] : (!P, i64) -> !P, f32
  %a = llvm.load %pa : !P -> f32
  %pb = llvm.getelementptr inbounds %part[%e] : (!P, i64) -> !P, i16
  %h = llvm.load %pb : !P -> i16
  %w = arith.extui %h : i16 to i32
  %bits = arith.shli %w, %c16 : i32
  %b = arith.bitcast %bits : i32 to f32
  %s = arith.addf %a, %b : f32
  llvm.store %s, %pa : f32, !P
}
"#;

// Round to nearest even on the bit pattern: bits + 0x7FFF + ((bits >> 16) & 1),
// then keep the high half. NaN becomes a quiet NaN with the same sign and top
// mantissa bits (rounding could otherwise turn a NaN into an infinity).
// Overflow rounds to +-inf as IEEE requires. `bf16_constants!` go before the loop; inside
// it `store_bf16!` rounds the f32 `%x` and stores it at `%dst[%e]`.
macro_rules! bf16_constants {
    () => {
        "%c1 = arith.constant 1 : i32
%c16 = arith.constant 16 : i32
%c7fff = arith.constant 32767 : i32
%cquiet = arith.constant 64 : i32
"
    };
}
macro_rules! store_bf16 {
    () => {
        "  %bits = arith.bitcast %x : f32 to i32
  %hi = arith.shrui %bits, %c16 : i32
  %lsb = arith.andi %hi, %c1 : i32
  %bias = arith.addi %lsb, %c7fff : i32
  %rounded = arith.addi %bits, %bias : i32
  %rhi = arith.shrui %rounded, %c16 : i32
  %qnan = arith.ori %hi, %cquiet : i32
  %isnan = arith.cmpf uno, %x, %x : f32
  %res32 = arith.select %isnan, %qnan, %rhi : i32
  %res = arith.trunci %res32 : i32 to i16
  %pd = llvm.getelementptr inbounds %dst[%e] : (!P, i64) -> !P, i16
  llvm.store %res, %pd : i16, !P
"
    };
}

const CAST_F32_TO_BF16_BODY: &str = concat!(
    bf16_constants!(),
    "scf.for %e = %gid to %n step %stride : i64 {
  %ps = llvm.getelementptr inbounds %src[%e] : (!P, i64) -> !P, f32
  %x = llvm.load %ps : !P -> f32
",
    store_bf16!(),
    "}
"
);

/// The body of `mercury_sum_bf16`: `dst = bf16(sum of the first nparts parts)`. The parts
/// are widened to f32 and added in order (p0 + p1 + ...), then rounded to nearest even once,
/// NaN kept quiet as in [`CAST_F32_TO_BF16_BODY`]; a part past `nparts` is never read (each
/// of p1..p7 is loaded under an `scf.if` on `nparts`, uniform across threads).
static SUM_BF16_BODY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let mut b = String::from(bf16_constants!());
    for j in 1..8 {
        let _ = writeln!(b, "%j{j} = arith.constant {j} : i64");
        let _ = writeln!(b, "%k{j} = arith.cmpi sgt, %nparts, %j{j} : i64");
    }
    // Loads part j at %e widened to f32 as %x{j}.
    let load = |b: &mut String, j: usize, ind: &str| {
        let _ = write!(
            b,
            "{ind}%q{j} = llvm.getelementptr inbounds %p{j}[%e] : (!P, i64) -> !P, i16\n\
             {ind}%h{j} = llvm.load %q{j} : !P -> i16\n\
             {ind}%w{j} = arith.extui %h{j} : i16 to i32\n\
             {ind}%b{j} = arith.shli %w{j}, %c16 : i32\n\
             {ind}%x{j} = arith.bitcast %b{j} : i32 to f32\n"
        );
    };
    b.push_str("scf.for %e = %gid to %n step %stride : i64 {\n");
    load(&mut b, 0, "  ");
    let mut prev = "%x0".to_string();
    for j in 1..8 {
        // The last sum is `%x`, what `store_bf16!` rounds.
        let out = if j == 7 {
            "%x".to_string()
        } else {
            format!("%s{j}")
        };
        let _ = writeln!(b, "  {out} = scf.if %k{j} -> (f32) {{");
        load(&mut b, j, "    ");
        let _ = write!(
            b,
            "    %t{j} = arith.addf {prev}, %x{j} : f32\n    scf.yield %t{j} : f32\n  }} else {{\n    scf.yield {prev} : f32\n  }}\n"
        );
        prev = out;
    }
    b.push_str(store_bf16!());
    b.push_str("}\n");
    b
});

const CAST_BF16_TO_F32_BODY: &str = r#"
%c16 = arith.constant 16 : i32
scf.for %e = %gid to %n step %stride : i64 {
  %ps = llvm.getelementptr inbounds %src[%e] : (!P, i64) -> !P, i16
  %h = llvm.load %ps : !P -> i16
  %w = arith.extui %h : i16 to i32
  %bits = arith.shli %w, %c16 : i32
  %x = arith.bitcast %bits : i32 to f32
  %pd = llvm.getelementptr inbounds %dst[%e] : (!P, i64) -> !P, f32
  llvm.store %x, %pd : f32, !P
}
"#;

/// Both 2-D copies; `ELT` is the element type (`i16` or `i32`, see
/// [`DeviceKernel::copy_element`]).
const COPY_2D_BODY: &str = r#"
%total = arith.muli %rows, %cols : i64
scf.for %e = %gid to %total step %stride : i64 {
  %r = arith.divui %e, %cols : i64
  %c = arith.remui %e, %cols : i64
  %srow = arith.muli %r, %src_stride : i64
  %si = arith.addi %srow, %c : i64
  %drow = arith.muli %r, %dst_stride : i64
  %di = arith.addi %drow, %c : i64
  %ps = llvm.getelementptr inbounds %src[%si] : (!P, i64) -> !P, ELT
  %v = llvm.load %ps : !P -> ELT
  %pd = llvm.getelementptr inbounds %dst[%di] : (!P, i64) -> !P, ELT
  llvm.store %v, %pd : ELT, !P
}
"#;

const FILL_F32_BODY: &str = r#"
scf.for %e = %gid to %n step %stride : i64 {
  %pd = llvm.getelementptr inbounds %dst[%e] : (!P, i64) -> !P, f32
  llvm.store %value, %pd : f32, !P
}
"#;

// Work item e covers elements 4c..4c+3 of row r = e / (d / 4), with r = (bi * hq + h) * sq + s.
// Index arithmetic is in i32 (the host guarantees rows * d / 4 < 2^31 and d % 4 == 0, and
// 16-byte aligned accumulator rows); addresses in i64. Accumulator and part values move as one
// vector each (ld/st.global.v4.f32, ld.global.v4.u16). With la the accumulator's lse (-inf
// when overwrite != 0) and lp_i the parts': m = max(la, lp_0, ...), w = 2^((l - m) log2e) per
// side, o = (o_acc * wa + sum_i o_i * w_i) / (wa + sum_i w_i): for one part the merge of
// LSE_MERGE_O_BODY. A side with lse = -inf contributes exactly 0 (its o is not loaded); rows
// where every side is -inf are left untouched, or set to 0 with overwrite (a row that sees no
// key, as in `kernels::cpu::attention`).
const ATTN_MERGE_O_BODY: &str = r#"
%c4 = arith.constant 4 : i64
%c0 = arith.constant 0 : i64
%c1 = arith.constant 1 : i64
%d4 = arith.divui %d, %c4 : i64
%total = arith.muli %rows, %d4 : i64
%cpr = arith.trunci %d4 : i64 to i32
%sq32 = arith.trunci %sq : i64 to i32
%hq32 = arith.trunci %hq : i64 to i32
%ninf = arith.constant 0xFF800000 : f32
%zero = arith.constant 0.000000e+00 : f32
%one = arith.constant 1.000000e+00 : f32
%log2e = arith.constant 1.44269504 : f32
%keep_acc = arith.cmpi eq, %overwrite, %c0 : i64
%true = arith.constant true
%zerov = llvm.mlir.constant(dense<0.000000e+00> : vector<4xf32>) : vector<4xf32>
%sh16 = llvm.mlir.constant(dense<16> : vector<4xi32>) : vector<4xi32>
%undef = llvm.mlir.poison : vector<4xf32>
%lane0 = llvm.mlir.constant(0 : i32) : i32
scf.for %e = %gid to %total step %stride : i64 {
  %e32 = arith.trunci %e : i64 to i32
  %r = arith.divui %e32, %cpr : i32
  %rc = arith.muli %r, %cpr : i32
  %c = arith.subi %e32, %rc : i32
  %s = arith.remui %r, %sq32 : i32
  %bh = arith.divui %r, %sq32 : i32
  %h = arith.remui %bh, %hq32 : i32
  %bi = arith.divui %bh, %hq32 : i32
  %r64 = arith.extui %r : i32 to i64
  %c64 = arith.extui %c : i32 to i64
  %s64 = arith.extui %s : i32 to i64
  %h64 = arith.extui %h : i32 to i64
  %b64 = arith.extui %bi : i32 to i64
  %col = arith.muli %c64, %c4 : i64
  %ob = arith.muli %b64, %o_sb : i64
  %oh = arith.muli %h64, %o_sh : i64
  %os = arith.muli %s64, %o_sr : i64
  %o1 = arith.addi %ob, %oh : i64
  %o2 = arith.addi %o1, %os : i64
  %oidx = arith.addi %o2, %col : i64
  %lb = arith.muli %b64, %l_sb : i64
  %lh = arith.muli %h64, %l_sh : i64
  %l1 = arith.addi %lb, %lh : i64
  %lidx = arith.addi %l1, %s64 : i64
  %prow = arith.muli %r64, %d : i64
  %pidx = arith.addi %prow, %col : i64
  %la = scf.if %keep_acc -> (f32) {
    %pla = llvm.getelementptr inbounds %lse_acc[%lidx] : (!P, i64) -> !P, f32
    %la0 = llvm.load %pla : !P -> f32
    scf.yield %la0 : f32
  } else {
    scf.yield %ninf : f32
  }
  %m = scf.for %i = %c0 to %nparts step %c1 iter_args(%mm = %la) -> (f32) : i64 {
    %ioff = arith.muli %i, %part_l_stride : i64
    %li = arith.addi %ioff, %r64 : i64
    %plp = llvm.getelementptr inbounds %lse_part[%li] : (!P, i64) -> !P, f32
    %lp = llvm.load %plp : !P -> f32
    %mx = arith.maximumf %mm, %lp : f32
    scf.yield %mx : f32
  }
  %live = arith.cmpf une, %m, %ninf : f32
  %fresh = arith.xori %keep_acc, %true : i1
  %write = arith.ori %live, %fresh : i1
  scf.if %write {
    %poa = llvm.getelementptr inbounds %o_acc[%oidx] : (!P, i64) -> !P, f32
    %a_live = arith.cmpf une, %la, %ninf : f32
    %oa = scf.if %a_live -> (vector<4xf32>) {
      %va = llvm.load %poa {alignment = 16 : i64} : !P -> vector<4xf32>
      scf.yield %va : vector<4xf32>
    } else {
      scf.yield %zerov : vector<4xf32>
    }
    %da = arith.subf %la, %m : f32
    %ta = arith.mulf %da, %log2e : f32
    %wa = llvm.call_intrinsic "EXP2"(%ta) : (f32) -> f32
    %wa1 = llvm.insertelement %wa, %undef[%lane0 : i32] : vector<4xf32>
    %wav = llvm.shufflevector %wa1, %undef [0, 0, 0, 0] : vector<4xf32>
    %xa = llvm.fmul %oa, %wav : vector<4xf32>
    %acc:2 = scf.for %i = %c0 to %nparts step %c1 iter_args(%av = %xa, %sw = %wa) -> (vector<4xf32>, f32) : i64 {
      %ioff = arith.muli %i, %part_l_stride : i64
      %li = arith.addi %ioff, %r64 : i64
      %plp = llvm.getelementptr inbounds %lse_part[%li] : (!P, i64) -> !P, f32
      %lp = llvm.load %plp : !P -> f32
      %p_live = arith.cmpf une, %lp, %ninf : f32
      %ooff = arith.muli %i, %part_o_stride : i64
      %oi = arith.addi %ooff, %pidx : i64
      %pop = llvm.getelementptr inbounds %o_part[%oi] : (!P, i64) -> !P, i16
      %op = scf.if %p_live -> (vector<4xf32>) {
        %vh = llvm.load %pop {alignment = 8 : i64} : !P -> vector<4xi16>
        %vw = llvm.zext %vh : vector<4xi16> to vector<4xi32>
        %vs = llvm.shl %vw, %sh16 : vector<4xi32>
        %vf = llvm.bitcast %vs : vector<4xi32> to vector<4xf32>
        scf.yield %vf : vector<4xf32>
      } else {
        scf.yield %zerov : vector<4xf32>
      }
      %dp = arith.subf %lp, %m : f32
      %tp = arith.mulf %dp, %log2e : f32
      %wp = llvm.call_intrinsic "EXP2"(%tp) : (f32) -> f32
      %wp1 = llvm.insertelement %wp, %undef[%lane0 : i32] : vector<4xf32>
      %wpv = llvm.shufflevector %wp1, %undef [0, 0, 0, 0] : vector<4xf32>
      %xp = llvm.fmul %op, %wpv : vector<4xf32>
      %av2 = llvm.fadd %av, %xp : vector<4xf32>
      %sw2 = arith.addf %sw, %wp : f32
      scf.yield %av2, %sw2 : vector<4xf32>, f32
    }
    %inv = arith.divf %one, %acc#1 : f32
    %inv1 = llvm.insertelement %inv, %undef[%lane0 : i32] : vector<4xf32>
    %invv = llvm.shufflevector %inv1, %undef [0, 0, 0, 0] : vector<4xf32>
    %sumv = llvm.fmul %acc#0, %invv : vector<4xf32>
    %res = llvm.select %live, %sumv, %zerov : i1, vector<4xf32>
    llvm.store %res, %poa {alignment = 16 : i64} : vector<4xf32>, !P
  }
}
"#;

// lse_acc[row] = m + log(exp(la - m) + sum_i exp(lp_i - m)) over strided accumulator rows, with
// la = -inf when overwrite != 0; unchanged when every side is -inf (set to -inf with overwrite).
const ATTN_MERGE_LSE_BODY: &str = r#"
%c0 = arith.constant 0 : i64
%c1 = arith.constant 1 : i64
%ninf = arith.constant 0xFF800000 : f32
%log2e = arith.constant 1.44269504 : f32
%ln2 = arith.constant 0.693147182 : f32
%keep_acc = arith.cmpi eq, %overwrite, %c0 : i64
%true = arith.constant true
%sq32 = arith.trunci %sq : i64 to i32
%hq32 = arith.trunci %hq : i64 to i32
scf.for %r = %gid to %rows step %stride : i64 {
  %r32 = arith.trunci %r : i64 to i32
  %s = arith.remui %r32, %sq32 : i32
  %bh = arith.divui %r32, %sq32 : i32
  %h = arith.remui %bh, %hq32 : i32
  %bi = arith.divui %bh, %hq32 : i32
  %s64 = arith.extui %s : i32 to i64
  %h64 = arith.extui %h : i32 to i64
  %b64 = arith.extui %bi : i32 to i64
  %lb = arith.muli %b64, %l_sb : i64
  %lh = arith.muli %h64, %l_sh : i64
  %l1 = arith.addi %lb, %lh : i64
  %lidx = arith.addi %l1, %s64 : i64
  %pla = llvm.getelementptr inbounds %lse_acc[%lidx] : (!P, i64) -> !P, f32
  %la = scf.if %keep_acc -> (f32) {
    %la0 = llvm.load %pla : !P -> f32
    scf.yield %la0 : f32
  } else {
    scf.yield %ninf : f32
  }
  %m = scf.for %i = %c0 to %nparts step %c1 iter_args(%mm = %la) -> (f32) : i64 {
    %ioff = arith.muli %i, %part_l_stride : i64
    %li = arith.addi %ioff, %r : i64
    %plp = llvm.getelementptr inbounds %lse_part[%li] : (!P, i64) -> !P, f32
    %lp = llvm.load %plp : !P -> f32
    %mx = arith.maximumf %mm, %lp : f32
    scf.yield %mx : f32
  }
  %live = arith.cmpf une, %m, %ninf : f32
  %fresh = arith.xori %keep_acc, %true : i1
  %write = arith.ori %live, %fresh : i1
  scf.if %write {
    %da = arith.subf %la, %m : f32
    %ta = arith.mulf %da, %log2e : f32
    %wa = llvm.call_intrinsic "EXP2"(%ta) : (f32) -> f32
    %sum = scf.for %i = %c0 to %nparts step %c1 iter_args(%sw = %wa) -> (f32) : i64 {
      %ioff = arith.muli %i, %part_l_stride : i64
      %li = arith.addi %ioff, %r : i64
      %plp = llvm.getelementptr inbounds %lse_part[%li] : (!P, i64) -> !P, f32
      %lp = llvm.load %plp : !P -> f32
      %dp = arith.subf %lp, %m : f32
      %tp = arith.mulf %dp, %log2e : f32
      %wp = llvm.call_intrinsic "EXP2"(%tp) : (f32) -> f32
      %sw2 = arith.addf %sw, %wp : f32
      scf.yield %sw2 : f32
    }
    %lg = llvm.call_intrinsic "LOG2"(%sum) : (f32) -> f32
    %ln = arith.mulf %lg, %ln2 : f32
    %new = arith.addf %m, %ln : f32
    %out = arith.select %live, %new, %ninf : f32
    llvm.store %out, %pla : f32, !P
  }
}
"#;
