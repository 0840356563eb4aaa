//! What the layer search chooses from, per kernel of a module: its schedules ([`KernelCandidate`])
//! and where it leaves the buffers later kernels read ([`OutMode`]).

use crate::commir_source::CommirSource;
use crate::search::CandidateSource;
use crate::topology::Topology;
use mercury_commir::{AxisKind, DimBinding, Kernel, Placement, Role};

/// One schedule of one kernel: schedule-script lines that name the kernel (`kernel=NAME`), so
/// that they apply inside a module schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCandidate {
    /// `par(i)` (the axis distributed over the mesh), or the operator search's name
    /// (`mesh 8: L0=ring`).
    pub name: String,
    /// The axis a `par(..)` candidate distributes (over mesh level 0 of a two-level mesh);
    /// `None` for the operator search's.
    pub axis: Option<String>,
    /// On a two-level mesh, the axis distributed over level 1 (the same as `axis` when one
    /// axis spans both levels); `None` on a one-level mesh and for the operator search's.
    pub axis1: Option<String>,
    pub script: String,
}

/// Where a kernel leaves the buffers that later kernels read (its *edge outputs*).
#[derive(Debug, Clone, PartialEq)]
pub struct OutMode {
    /// `declared` (as the module writes them), `replicated`, or `by(AXIS)` (each edge output
    /// indexed by the axis sharded along it over the mesh, the others as declared).
    pub name: String,
    /// The placement of every edge output.
    pub placements: Vec<(String, Placement)>,
}

/// The mesh dimension (and its position) that `axis` indexes as the leading axis of a
/// buffer dimension: `Q[@b, @hk * @g, @i, 128]` is indexed by `@hk` at dimension 1 (a split of
/// dimension 1 over the mesh gives each rank whole `@hk` blocks), not by `@g`.
pub fn leading_dim(dims: &[DimBinding], axis: &str) -> Option<usize> {
    dims.iter().position(|d| match d {
        DimBinding::Axes(a) => a.first().map(String::as_str) == Some(axis),
        DimBinding::Fixed(_) => false,
    })
}

/// The axes a `par(..)` candidate may distribute over a one-level mesh of `n` devices: spatial
/// or managed, extent a multiple of `n`.
pub fn parallel_axes(k: &Kernel, n: usize) -> Vec<String> {
    k.axes
        .iter()
        .filter(|a| a.kind != AxisKind::Reduction && a.extent >= n && a.extent % n == 0)
        .map(|a| a.name.clone())
        .collect()
}

/// `par(axis)`: the axis tiled by `n` and its outer loop distributed over mesh level 0, inputs
/// indexed by it sharded along it (`parallelize`'s default); what the kernel reads elsewhere
/// the lowering gathers, what it writes is delivered as declared.
pub fn par_candidate(k: &Kernel, axis: &str, n: usize) -> KernelCandidate {
    let name = &k.name;
    KernelCandidate {
        name: format!("par({axis})"),
        axis: Some(axis.to_string()),
        axis1: None,
        script: format!(
            "tile{{kernel={name} axis={axis} factor={n} outer={axis}_p inner={axis}_t}}\nparallelize{{kernel={name} axis={axis}_p level=0}}\n"
        ),
    }
}

/// On a two-level mesh `[n0, n1]`: `a` tiled by `n0` and distributed over level 0, `b` by
/// `n1` over level 1 (`par(a@L0, b@L1)`: Megatron's context parallelism over level 0 and tensor
/// parallelism over level 1 when `a` is the tokens and `b` the heads); with `a == b` the axis
/// spans both levels (`par(a)`, level 0 major), as [`par_candidate`] on a one-level mesh.
pub fn par2_candidate(k: &Kernel, a: &str, b: &str, n0: usize, n1: usize) -> KernelCandidate {
    let name = &k.name;
    let outer = format!(
        "tile{{kernel={name} axis={a} factor={n0} outer={a}_p inner={a}_t}}\nparallelize{{kernel={name} axis={a}_p level=0}}\n"
    );
    let (label, inner) = if a == b {
        (
            format!("par({a})"),
            format!(
                "tile{{kernel={name} axis={a}_t factor={n1} outer={a}_q inner={a}_u}}\nparallelize{{kernel={name} axis={a}_q level=1}}\n"
            ),
        )
    } else {
        (
            format!("par({a}@L0, {b}@L1)"),
            format!(
                "tile{{kernel={name} axis={b} factor={n1} outer={b}_p inner={b}_t}}\nparallelize{{kernel={name} axis={b}_p level=1}}\n"
            ),
        )
    };
    KernelCandidate {
        name: label,
        axis: Some(a.to_string()),
        axis1: Some(b.to_string()),
        script: outer + &inner,
    }
}

/// The operator search's candidates for `k` when it is an attention or GEMM kernel
/// ([`CommirSource`] on the module's declared mesh), with every pass naming the kernel; empty
/// when the generator does not know the kernel. Candidates the primitives refuse are left out.
pub fn operator_candidates(
    text: &str,
    origin: &str,
    k: &Kernel,
    topo: &Topology,
) -> Vec<KernelCandidate> {
    let Ok(src) = CommirSource::from_text(text, origin, Some(&k.name)) else {
        return Vec::new();
    };
    let mut src = src.keep_declared_mesh();
    let Ok(it) = src.candidates(topo) else {
        return Vec::new();
    };
    it.flatten()
        .map(|c| KernelCandidate {
            name: c.name.clone(),
            axis: None,
            axis1: None,
            script: name_kernel(&c.transform_script, &k.name),
        })
        .collect()
}

/// `script` with `kernel=NAME` added to every pass that names no kernel (`kernel=`, `on=`).
pub fn name_kernel(script: &str, kernel: &str) -> String {
    let mut out = String::new();
    for line in script.lines() {
        let code = &line[..mercury_ir::pass::schedule_comment_start(line).unwrap_or(line.len())];
        let t = code.trim();
        if t.is_empty() {
            continue;
        }
        let named = t.contains("kernel=") || t.contains("on=");
        let pass = match (named, t.find('{')) {
            (true, _) => t.to_string(),
            (false, Some(b)) => {
                let inner = t[b + 1..].trim_end_matches('}').trim();
                let sep = if inner.is_empty() { "" } else { " " };
                format!("{}{{kernel={kernel}{sep}{inner}}}", &t[..b])
            }
            (false, None) => format!("{t}{{kernel={kernel}}}"),
        };
        out += &pass;
        out.push('\n');
    }
    out
}

/// How an out mode splits: each axis with the mesh levels it is split over.
pub type Split = Vec<(String, Vec<usize>)>;

/// The splits of a one-level mesh: each axis of `axes` over level 0.
pub fn splits1(axes: &[String]) -> Vec<(String, Split)> {
    axes.iter()
        .map(|a| (format!("by({a})"), vec![(a.clone(), vec![0])]))
        .collect()
}

/// The splits of a two-level mesh: each pair of `axes0` (level 0) and `axes1` (level 1),
/// `by(a@L0, b@L1)`, and each axis of `both` over both levels, `by(a)`.
pub fn splits2(axes0: &[String], axes1: &[String], both: &[String]) -> Vec<(String, Split)> {
    let mut out: Vec<(String, Split)> = both
        .iter()
        .map(|a| (format!("by({a})"), vec![(a.clone(), vec![0, 1])]))
        .collect();
    for a in axes0 {
        for b in axes1.iter().filter(|b| *b != a) {
            out.push((
                format!("by({a}@L0, {b}@L1)"),
                vec![(a.clone(), vec![0]), (b.clone(), vec![1])],
            ));
        }
    }
    out
}

/// The out modes of kernel `k`: `declared`, `replicated`, and one per split of `splits` (an
/// axis with its mesh levels, [`splits1`], [`splits2`]) whose axes lead a dimension of some
/// edge output (`edge_outs`); duplicates (the same placements under another name) are dropped,
/// as are placements the buffer's extents or the mesh cannot take.
pub fn out_modes(k: &Kernel, edge_outs: &[String], splits: &[(String, Split)]) -> Vec<OutMode> {
    let decl = |b: &str| k.buffer(b).map(|x| x.placement());
    let mut modes = vec![OutMode {
        name: "declared".into(),
        placements: edge_outs
            .iter()
            .filter_map(|b| Some((b.clone(), decl(b)?)))
            .collect(),
    }];
    if edge_outs.is_empty() {
        return modes;
    }
    let fits = |b: &str, p: &Placement| {
        k.buffer(b).is_some_and(|x| {
            mercury_commir::model::check_placement(b, p, &k.shape(x), &k.mesh).is_ok()
        })
    };
    let add = |name: String, placements: Vec<(String, Placement)>, modes: &mut Vec<OutMode>| {
        if placements.iter().all(|(b, p)| fits(b, p))
            && !modes.iter().any(|m| m.placements == placements)
        {
            modes.push(OutMode { name, placements });
        }
    };
    for (name, split) in splits {
        let mut any = false;
        let placements: Vec<(String, Placement)> = edge_outs
            .iter()
            .filter_map(|b| {
                let x = k.buffer(b)?;
                let mut levels = vec![vec![]; x.dims.len()];
                let mut led = false;
                for (a, ls) in split {
                    if let Some(d) = leading_dim(&x.dims, a) {
                        levels[d] = ls.clone();
                        led = true;
                    }
                }
                any |= led;
                Some(if led {
                    (b.clone(), Placement::from(levels))
                } else {
                    (b.clone(), x.placement())
                })
            })
            .collect();
        if any {
            add(name.clone(), placements, &mut modes);
        }
    }
    let replicated: Vec<(String, Placement)> = edge_outs
        .iter()
        .filter_map(|b| {
            let x = k.buffer(b)?;
            Some((b.clone(), Placement::from(vec![vec![]; x.dims.len()])))
        })
        .collect();
    add("replicated".into(), replicated, &mut modes);
    modes
}

/// The out buffers of kernel `at` that a later kernel of `kernels` reads before another kernel
/// writes them again.
pub fn edge_outputs(kernels: &[Kernel], at: usize) -> Vec<String> {
    kernels[at]
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        .filter(|b| {
            for later in &kernels[at + 1..] {
                match later.buffer(&b.name).map(|x| x.role) {
                    Some(Role::In) | Some(Role::InOut) => return true,
                    Some(Role::Out) => return false,
                    _ => {}
                }
            }
            false
        })
        .map(|b| b.name.clone())
        .collect()
}
