//! The 3D-parallel configurations a Megatron-LM user sets up for a decoder layer, expressed as
//! choices of the same layer search (so the same model prices them): each restricts every
//! kernel to the schedules the configuration uses and takes the fastest that fits.
//!
//! The axes are named as in `examples/llama3_layer.mlir`: tokens `@i`, batch `@b`, key/value
//! heads `@hk`, query heads `@h` (the output projection), the MLP's hidden dim `@f`.

use super::{KernelCandidate, LayerPick, LayerSearch, OutMode};
use mercury_commir::{Kernel, Stmt};

/// One configuration: a name and, per kernel, which choices it allows.
pub struct Baseline {
    /// `TP+SP (Megatron)`, `CP ring`, ...
    pub name: &'static str,
    /// What a Megatron-LM user sets (`--tensor-model-parallel-size 8 --sequence-parallel`).
    pub how: &'static str,
    /// The mesh levels of the module it applies to: 1 (every configuration over all the
    /// devices), 2 (a product: context parallelism over level 0, tensor parallelism over
    /// level 1, as Megatron-LM's `--context-parallel-size n0 --tensor-model-parallel-size n1`).
    pub levels: usize,
    allow: fn(&KernelCandidate, &OutMode, &Kernel) -> bool,
}

fn axis_is(c: &KernelCandidate, a: &str) -> bool {
    c.axis.as_deref() == Some(a) && c.axis1.is_none()
}

/// On a two-level mesh: `a` over level 0 and `b` over level 1 (`a == b`: over both).
fn axes_are(c: &KernelCandidate, a: &str, b: &str) -> bool {
    c.axis.as_deref() == Some(a) && c.axis1.as_deref() == Some(b)
}

/// The tensor-parallel axis of a kernel: the first of `hk`, `h`, `f` it has.
fn tensor_axis(k: &Kernel) -> Option<&'static str> {
    ["hk", "h", "f"].into_iter().find(|a| k.axis(a).is_some())
}

/// Tensor parallelism over level 1 times context parallelism over level 0 (Megatron-LM's
/// `--tensor-model-parallel-size n1 --context-parallel-size n0 --sequence-parallel`): a kernel
/// with a tensor axis splits the tokens over level 0 and that axis over level 1, leaving its
/// edge outputs so split (`by(i@L0, X@L1)`) or as declared (the row-parallel projections
/// reduce-scatter onto the tokens); attention takes the operator search's two-level candidate
/// with `role` over level 0 and the heads over level 1 (`ring`: a ring over the context-parallel
/// ranks of each tensor-parallel rank's heads, zigzag for the causal mask where faster) or, for
/// `gather`, the keys and values all-gathered over level 0 (`par(i@L0, hk@L1)`); kernels with
/// no tensor axis (norms, residuals) split the tokens over both levels.
fn tensor_context(c: &KernelCandidate, o: &OutMode, k: &Kernel, role: &str) -> bool {
    let Some(x) = tensor_axis(k) else {
        return axes_are(c, "i", "i") && o.name == "declared";
    };
    let out_ok = o.name == "declared" || o.name == format!("by(i@L0, {x}@L1)");
    if is_attention(k) && role != "gather" {
        return c.axis.is_none()
            && c.name.contains(&format!(" L0={role}"))
            && c.name.contains(" L1=heads")
            && out_ok;
    }
    axes_are(c, "i", x) && out_ok
}

/// Tensor parallelism: the first of `hk`, `h`, `f` the kernel can split, its edge outputs left
/// split along it where they are indexed by it (Q/K/V and O by heads, Z by the hidden dim),
/// else as declared (the row-parallel projections reduce-scatter onto the tokens); kernels
/// with none of them (norms, residuals) split the tokens (sequence parallelism).
fn tensor(c: &KernelCandidate, o: &OutMode, k: &Kernel) -> bool {
    match tensor_axis(k) {
        Some(a) => axis_is(c, a) && (o.name == format!("by({a})") || o.name == "declared"),
        None => axis_is(c, "i") && o.name == "declared",
    }
}

/// Every kernel on its tokens (`par(i)`), edges as declared (sequence-sharded); attention by
/// the operator search's one-level candidate of `role` (`ring`, `gather`, `heads`; for a causal
/// mask also its zigzag-placed variant).
fn context(c: &KernelCandidate, o: &OutMode, k: &Kernel, role: &str) -> bool {
    if o.name != "declared" {
        return false;
    }
    if is_attention(k) {
        c.axis.is_none() && c.name.contains(&format!(": L0={role}")) && !c.name.contains(" L1=")
    } else {
        axis_is(c, "i")
    }
}

/// Whether the kernel computes the attention patch.
fn is_attention(k: &Kernel) -> bool {
    let mut found = false;
    k.walk(&mut |s, _| {
        found |= matches!(s, Stmt::Patch { kernel, .. } if kernel == "attention");
    });
    found
}

/// The configurations, in the order the tables print them.
pub fn baselines() -> Vec<Baseline> {
    vec![
        Baseline {
            name: "TP+SP",
            how: "Megatron-LM --tensor-model-parallel-size 8 --sequence-parallel",
            levels: 1,
            allow: tensor,
        },
        Baseline {
            name: "CP ring",
            how: "Megatron-LM --context-parallel-size 8 (ring attention, p2p)",
            levels: 1,
            allow: |c, o, a| context(c, o, a, "ring"),
        },
        Baseline {
            name: "CP all-gather",
            how: "context parallelism with the keys/values all-gathered (Llama 3's)",
            levels: 1,
            allow: |c, o, a| context(c, o, a, "gather"),
        },
        Baseline {
            name: "Ulysses",
            how: "DeepSpeed-Ulysses, sequence parallel size 8 (all-to-all to heads for attention)",
            levels: 1,
            allow: |c, o, a| context(c, o, a, "heads"),
        },
        Baseline {
            name: "DP",
            how: "data parallelism (the batch split; needs a batch divisible by the devices)",
            levels: 1,
            // Activations stay batch-split between kernels (`by(b)`), as a data-parallel
            // model keeps them; the module's own output leaves as declared.
            allow: |c, o, _| axis_is(c, "b") && (o.name == "declared" || o.name == "by(b)"),
        },
        Baseline {
            name: "TPxCP ring",
            how: "Megatron-LM --tensor-model-parallel-size n1 --context-parallel-size n0 --sequence-parallel (ring attention)",
            levels: 2,
            allow: |c, o, a| tensor_context(c, o, a, "ring"),
        },
        Baseline {
            name: "TPxCP all-gather",
            how: "tensor parallelism n1 x context parallelism n0 with the keys/values all-gathered (Llama 3's)",
            levels: 2,
            allow: |c, o, a| tensor_context(c, o, a, "gather"),
        },
    ]
}

impl LayerSearch {
    /// The fastest choice of `b` that fits in `cap` bytes per device; `None` where none lowers
    /// or fits (a batch the devices do not divide, for DP), or where the module's mesh has
    /// another number of levels than `b` takes.
    pub fn baseline(&self, b: &Baseline, cap: u64) -> Option<LayerPick> {
        if self.mesh_levels() != b.levels {
            return None;
        }
        let allow =
            |at: usize, c: &KernelCandidate, o: &OutMode| (b.allow)(c, o, &self.kernels[at]);
        self.frontier_where(cap, &allow).into_iter().next()
    }
}
