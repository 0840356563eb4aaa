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
    /// The axis a `par(..)` candidate distributes; `None` for the operator search's.
    pub axis: Option<String>,
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
        script: format!(
            "tile{{kernel={name} axis={axis} factor={n} outer={axis}_p inner={axis}_t}}\nparallelize{{kernel={name} axis={axis}_p level=0}}\n"
        ),
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

/// The out modes of kernel `k`: `declared`, `replicated`, and `by(AXIS)` for every axis of
/// `axes` that leads a dimension of some edge output (`edge_outs`); duplicates (the same
/// placements under another name) are dropped, as are placements the buffer's extents or the
/// mesh cannot take.
pub fn out_modes(k: &Kernel, edge_outs: &[String], axes: &[String]) -> Vec<OutMode> {
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
    for a in axes {
        let mut any = false;
        let placements: Vec<(String, Placement)> = edge_outs
            .iter()
            .filter_map(|b| {
                let x = k.buffer(b)?;
                Some(match leading_dim(&x.dims, a) {
                    Some(d) => {
                        any = true;
                        let mut levels = vec![vec![]; x.dims.len()];
                        levels[d] = vec![0];
                        (b.clone(), Placement::from(levels))
                    }
                    None => (b.clone(), x.placement()),
                })
            })
            .collect();
        if any {
            add(format!("by({a})"), placements, &mut modes);
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
