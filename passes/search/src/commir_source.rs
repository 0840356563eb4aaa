//! Candidate schedules generated from a CommIR operator (the design space of paper section 6).
//!
//! For every ordered factorisation of the topology's device count into mesh levels (8: `8`,
//! `2x4`, `4x2`, `2x2x2`), the operator's mesh is re-shaped (its sharded inputs and outputs stay
//! sharded the same way, now over all levels), then every assignment of a *role* to each level
//! is tried. A role is a small schedule for one level, written with the primitives:
//!
//! - attention (`Q[b, h, i, d]`, `K/V[b, hk, j, d]`): `heads` (all-to-all to head sharding and
//!   distribute the key/value heads), `groups` (grouped-query attention, `Q[b, hk * g, i, d]`:
//!   distribute the query heads of each group, `g`, each key/value head replicated over the
//!   ranks of its group: Ulysses with K/V head replication, for more ranks than key/value
//!   heads; tried only where the `heads` levels split every key/value head, so that each rank
//!   holds one), `ring` (distribute the queries, shift the keys/values),
//!   `gather` (distribute the queries, gather the keys/values), `tree` (distribute the
//!   keys/values, merge partial softmax results);
//! - GEMM (`A[m, k] x B[k, n]`): `m`, `n`, `k` (distribute that axis; the lowering gathers or
//!   reduces what it must), `n+ring(m)` (AsyncTP-like), `k+shift(m)` (shift-reduce),
//!   `k+shift-halves(m)` (shift-reduce in half blocks).
//!
//! The operator is the kernel's one attention or GEMM patch; a kernel that computes it with
//! tile ops instead is patched first (the `patch` pass, the first line of every candidate's
//! transform, which applies to the input as given).
//!
//! Placements of the inputs are the problem's and are never changed (`shard=false`): what a
//! schedule needs elsewhere, the lowering moves. Causal attention candidates with a ring level
//! are also tried with zigzag placements (`balance-causal`: the contiguous inputs permuted at
//! the start, the output back at the end); the cost model prices every rank's causal work. Illegal combinations are refused by the
//! primitives themselves and counted as pruned.

use crate::search::{Candidate, CandidateSource, SourceError};
use crate::topology::Topology;
use mercury_commir::{DimBinding, Kernel, Stmt};
use mercury_driver::{Compiler, Schedule};
use mercury_ir::{print_op, Diagnostic, Operation, PrintOptions};

/// Generates candidates for one kernel of a CommIR module.
pub struct CommirSource {
    origin: String,
    module: Operation,
    kernel: Kernel,
    compiler: Compiler,
    /// Meshes of at most this many levels (`None`: as many as [`ENUMERATION_BUDGET`] allows).
    max_levels: Option<usize>,
    /// What the last enumeration left out by its level bound (one line), when it did.
    left_out: Option<String>,
    /// Keep the operator's declared mesh (one factorisation: the text's) instead of
    /// enumerating every factorisation of the topology's devices.
    keep_mesh: bool,
    /// Candidates the primitives or the lowering refused in the last enumeration.
    pub pruned: Vec<String>,
    /// The kernel's name when the module holds other kernels too: every schedule's passes
    /// then transform this kernel alone (as `mercury-run --kernel` applies them).
    target: Option<String>,
    /// The passes that made `module` from the input as given, the first lines of every
    /// candidate's `transform_script` (`patch`, when the input computes its attention or GEMM
    /// with tile ops instead of naming the patch: the search needs the patch to know the
    /// operator, and the transform must apply to the input as given).
    prelude: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Attention,
    Gemm,
}

fn err(msg: impl Into<String>) -> SourceError {
    SourceError::new(msg)
}

impl CommirSource {
    pub fn from_text(
        text: &str,
        origin: &str,
        kernel: Option<&str>,
    ) -> Result<CommirSource, SourceError> {
        let compiler = Compiler::new();
        let module = compiler
            .parse(origin, text)
            .map_err(|d| SourceError::located(&d))?;
        let kernels = mercury_commir::kernels(&module).map_err(|d| SourceError::located(&d))?;
        let names = || mercury_commir::kernel_names(&kernels);
        let several = kernels.len() > 1;
        let kernel = match kernel {
            Some(k) => match kernels.iter().position(|x| x.name == k.trim_start_matches('@')) {
                Some(i) => kernels[i].clone(),
                None => {
                    return Err(err(format!(
                        "{origin}: no kernel '@{}' (the file has {})",
                        k.trim_start_matches('@'),
                        if kernels.is_empty() { "none".to_string() } else { names() }
                    )))
                }
            },
            None if kernels.len() == 1 => kernels[0].clone(),
            None if kernels.is_empty() => {
                return Err(err(format!("{origin}: expected one kernel, found 0")))
            }
            None => {
                return Err(err(format!(
                    "{origin}: expected one kernel, found {} ({}); name the one to tune (mercury-tune --kernel NAME)",
                    kernels.len(),
                    names()
                )))
            }
        };
        if !kernel.loops().is_empty() {
            return Err(err(format!(
                "{origin}: the kernel is already scheduled; give the local operator"
            )));
        }
        // Compute written with tile ops (naive attention, a plain matmul): recognised as the
        // library patch first, as `mercury-opt --patch` does.
        let (module, kernel, prelude) = if patches(&kernel).is_empty() {
            let pass = if several {
                format!("patch{{on={}}}", kernel.name)
            } else {
                "patch".to_string()
            };
            let mut patched = module.clone();
            let mut pm = compiler
                .pass_manager(&Schedule::pipeline(&format!("builtin.module({pass})")))
                .map_err(|e| err(format!("{origin}: {e}")))?;
            pm.run(&mut patched, &compiler.registry)
                .map_err(|d| SourceError::located(&d))?;
            let k = mercury_commir::pass::model(&patched, &kernel.name)
                .map_err(|d| SourceError::located(&d))?;
            (patched, k, vec![pass])
        } else {
            (module, kernel, vec![])
        };
        let target = several.then(|| kernel.name.clone());
        let src = CommirSource {
            origin: origin.to_string(),
            module,
            kernel,
            compiler,
            max_levels: None,
            left_out: None,
            keep_mesh: false,
            pruned: vec![],
            target,
            prelude,
        };
        // The operator must be one the generator knows, before anything is searched.
        src.op()?;
        Ok(src)
    }

    /// Enumerates only the operator's declared mesh (its shape as written; the search then
    /// refuses a topology with another device count). `mercury-tune` does this for `.mlir`
    /// operators unless `--refactor-mesh` is given.
    pub fn keep_declared_mesh(mut self) -> Self {
        self.keep_mesh = true;
        self
    }

    /// The operator module as given (before any schedule), as text: what a candidate's
    /// `transform_script` applies to.
    pub fn operator_text(&self) -> String {
        print_op(
            &self.compiler.registry,
            &self.module,
            PrintOptions::default(),
        )
    }

    /// The operator on one device (the `single-device` pass), lowered: the reference a
    /// measured candidate is checked against.
    pub fn reference_plan(&self) -> Result<mercury_plan::Plan, SourceError> {
        let mut m = self.module.clone();
        mercury_passes::mesh::single_device(&mut m);
        mercury_driver::lower(&m, Some(&self.kernel.name)).map_err(|d| {
            err(format!(
                "{}: single-device reference: {}",
                self.origin, d.message
            ))
        })
    }

    /// Enumerates only meshes of at most `levels` levels (the graph level prices many operator
    /// layouts and asks for the topology's own depth; `mercury-tune --max-mesh-levels`). This
    /// replaces the bound of [`ENUMERATION_BUDGET`].
    pub fn with_max_levels(mut self, levels: usize) -> Self {
        self.max_levels = Some(levels);
        self
    }

    /// The roles tried on each mesh level, in enumeration order (`groups` only for
    /// grouped-query attention, `ax[5]` the group axis; none naming `n` for a matrix-vector
    /// product, whose `ax[2]` is "").
    fn roles(op: Op, ax: &[String]) -> &'static [&'static str] {
        match op {
            Op::Gemm if ax.get(2).is_some_and(|n| n.is_empty()) => {
                &["m", "k", "k+shift(m)", "k+shift-halves(m)", "m+ring(k)"]
            }
            Op::Attention if ax.get(5).is_some_and(|g| !g.is_empty()) => {
                &["ring", "heads", "gather", "tree", "tree+shift(i)", "groups"]
            }
            Op::Attention => &["ring", "heads", "gather", "tree", "tree+shift(i)"],
            Op::Gemm => &[
                "m",
                "n",
                "k",
                "n+ring(m)",
                "k+shift(m)",
                "k+shift-halves(m)",
                "m+ring(n)",
                "m+ring(k)",
                "n+ring(k)",
                "k+shift(n)",
            ],
        }
    }

    fn op(&self) -> Result<(Op, Vec<String>), SourceError> {
        let found = patches(&self.kernel);
        let (name, inputs) = match found.as_slice() {
            [one] => one.clone(),
            _ => {
                let what = if found.is_empty() {
                    "it computes neither (the `patch` pass recognises no attention or GEMM in its tile ops)".to_string()
                } else {
                    format!(
                        "it has {} ({}{}; examples/schedules/mlp_*.sched are the schedules of two GEMMs in examples/mlp.mlir)",
                        found.len(),
                        found
                            .iter()
                            .map(|(k, _)| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        if self.prelude.is_empty() {
                            ""
                        } else {
                            ", after the `patch` pass"
                        }
                    )
                };
                let d = Diagnostic::error(
                    self.kernel.loc.clone(),
                    format!(
                        "mercury-tune generates the schedules of a kernel computing one attention or one GEMM; '@{}': {what}. Write its schedule by hand, a schedule script for mercury-run --schedule",
                        self.kernel.name
                    ),
                );
                return Err(SourceError::located(&d));
            }
        };
        // The buffers the patch reads, in operand order.
        let mut loads = Vec::new();
        self.kernel.walk(&mut |s, _| {
            if let Stmt::Load { result, access } = s {
                loads.push((*result, access.buffer.clone()));
            }
        });
        let bufs: Vec<String> = inputs
            .iter()
            .filter_map(|v| loads.iter().find(|(r, _)| r == v).map(|(_, b)| b.clone()))
            .collect();
        // Axis `dim` of operand `buf`; a missing one is refused at the buffer's declaration,
        // naming the operand layout the generator's schedules are written for.
        let axis_of = |buf: &str, dim: usize| -> Result<String, SourceError> {
            let b = self.kernel.buffer(buf);
            match b.and_then(|b| b.dims.get(dim)) {
                Some(DimBinding::Axes(a)) => Ok(a[0].clone()),
                found => {
                    let layout = match name.as_str() {
                        "gemm" => "a GEMM's operands as A[m, k] and B[k, n] or B[k] (a matrix-vector product)",
                        _ => "attention's operands as Q[b, h, i, d] and K, V[b, hk, j, d]",
                    };
                    let what = match (b, found) {
                        (Some(b), None) => format!(
                            "'@{buf}' has {} dimension(s), no dimension {dim}",
                            b.dims.len()
                        ),
                        _ => format!("dimension {dim} of '@{buf}' is not bound to an axis"),
                    };
                    let msg = format!(
                        "mercury-tune cannot generate the schedules of '@{}': {what}; its {name} schedules are written for {layout}. Write the schedule by hand (a schedule script for mercury-run --schedule), or use mercury-run --shift-shard",
                        self.kernel.name
                    );
                    Err(match b {
                        Some(b) => SourceError::located(&Diagnostic::error(b.loc.clone(), msg)),
                        None => err(format!("{}: {msg}", self.origin)),
                    })
                }
            }
        };
        match name.as_str() {
            "attention" if bufs.len() == 3 => {
                let q = &bufs[0];
                let k = &bufs[1];
                let rank = self.kernel.buffer(q).map_or(0, |b| b.dims.len());
                if rank != 4 {
                    return Err(err(format!(
                        "{}: attention operands must be [batch, heads, sequence, dim]",
                        self.origin
                    )));
                }
                // Grouped-query attention binds Q's head dimension to `@hk * @g`: the group
                // axis, or "" for multi-head attention.
                let group = match self.kernel.buffer(q).and_then(|b| b.dims.get(1)) {
                    Some(DimBinding::Axes(a)) if a.len() == 2 => a[1].clone(),
                    _ => String::new(),
                };
                Ok((
                    Op::Attention,
                    vec![
                        axis_of(k, 1)?,
                        axis_of(q, 2)?,
                        axis_of(k, 2)?,
                        q.clone(),
                        k.clone(),
                        group,
                    ],
                ))
            }
            // A matrix-vector product (B[k], C[m]) has no `n`: "" (its roles never name it).
            "gemm" if bufs.len() == 2 => Ok((
                Op::Gemm,
                vec![
                    axis_of(&bufs[0], 0)?,
                    axis_of(&bufs[0], 1)?,
                    if self.kernel.buffer(&bufs[1]).map(|b| b.dims.len()) == Some(1) {
                        axis_of(&bufs[1], 0)?;
                        String::new()
                    } else {
                        axis_of(&bufs[1], 1)?
                    },
                ],
            )),
            other => Err(err(format!(
                "{}: no candidate generator for patch '{other}'",
                self.origin
            ))),
        }
    }

    /// The module with its mesh re-shaped to `shape` (the `reshape-mesh` pass); every sharded
    /// dimension is sharded over all levels. `Err`: a placement the pass cannot re-express.
    fn reshaped(&self, shape: &[usize]) -> Result<Operation, Diagnostic> {
        let mut m = self.module.clone();
        mercury_passes::mesh::reshape_mesh(&mut m, shape, &self.kernel.name)?;
        Ok(m)
    }

    /// The kernel with its mesh re-shaped to `shape` as the `reshape-mesh` pass does (its
    /// buffers' declared placements re-expressed on the new levels); `None` if it cannot be
    /// read back.
    fn declared_on(&self, shape: &[usize]) -> Option<Kernel> {
        let m = if shape == self.kernel.mesh.shape.as_slice() {
            self.module.clone()
        } else {
            self.reshaped(shape).ok()?
        };
        mercury_commir::kernels(&m)
            .ok()?
            .into_iter()
            .find(|k| k.name == self.kernel.name)
    }

    /// `script` (schedule-script lines) after the [`CommirSource::prelude`]: what applies to
    /// the input as given.
    /// `s` limited to this source's kernel when the module has several.
    fn schedule(&self, s: Schedule) -> Schedule {
        Schedule {
            kernel: self.target.clone(),
            ..s
        }
    }

    /// The mesh shape candidates keep: the declared one (`Some`) unless the search re-factors
    /// the mesh (`None`: every factorisation of the topology's devices).
    ///
    /// # Errors
    /// A declared mesh of another device count than the topology's.
    fn declared_shape(&self, topo: &Topology) -> Result<Option<Vec<usize>>, SourceError> {
        if !self.keep_mesh {
            return Ok(None);
        }
        let declared = self.kernel.mesh.shape.clone();
        let n: usize = declared.iter().product();
        if n != topo.num_devices() {
            return Err(err(format!(
                "{}: the operator's mesh {declared:?} has {n} devices, topology '{}' has {}; re-factor the mesh to the topology with --refactor-mesh, or give a topology of {n} devices",
                self.origin,
                topo.name,
                topo.num_devices()
            )));
        }
        Ok(Some(declared))
    }

    /// The kernel's name when the module holds other kernels too (the schedules' passes
    /// transform it alone: apply a transform with `mercury-run --kernel NAME`).
    pub fn target_kernel(&self) -> Option<&str> {
        self.target.as_deref()
    }

    fn with_prelude(&self, script: &str) -> String {
        let mut out = String::new();
        for p in &self.prelude {
            out += p;
            out += "\n";
        }
        out + script
    }

    /// The kernel's mesh shape as written in the source text.
    pub fn mesh_shape(&self) -> Vec<usize> {
        self.kernel.mesh.shape.clone()
    }

    /// One named schedule: the module re-shaped to `mesh` (as [`CandidateSource::candidates`]
    /// does; `None` keeps the text's mesh), then `script` (a `.sched` file: one primitive per
    /// line, `#` comments) applied with [`mercury_passes::schedule_pipeline`], then lowered.
    pub fn scheduled(
        &self,
        name: &str,
        script: &str,
        mesh: Option<&[usize]>,
    ) -> Result<Candidate, SourceError> {
        let mut m = match mesh {
            Some(shape) if shape != self.kernel.mesh.shape.as_slice() => self
                .reshaped(shape)
                .map_err(|d| err(format!("{name}: {}", d.message)))?,
            _ => self.module.clone(),
        };
        let mut pm = self
            .compiler
            .pass_manager(&self.schedule(Schedule::script(script)))
            .map_err(|e| err(format!("{name}: {e}")))?;
        pm.run(&mut m, &self.compiler.registry)
            .map_err(|d| err(format!("{name}: {}", d.message)))?;
        let plan = mercury_driver::lower(&m, Some(&self.kernel.name))
            .map_err(|d| err(format!("{name}: {}", d.message)))?;
        Ok(Candidate {
            name: name.to_string(),
            transform_script: self.with_prelude(script),
            annotated_ir: print_op(&self.compiler.registry, &m, PrintOptions::default()),
            plan,
        })
    }

    /// Whether `plan` leaves every output where the operator declares it. Checked for outputs
    /// sharded along one dimension `d` over all mesh levels (the examples' placements, kept by
    /// [`Self::reshaped`]). Block `i` of `d` (whole in the other dimensions) is *held* by a
    /// rank when the pieces that rank writes cover it. A rank may cover no block or whole
    /// blocks only; a rank holding exactly one block must hold its own block `r`; every
    /// block must be held. A rank holding several blocks has a (partly) replicated result,
    /// e.g. after an all-reduce, which the plan writes from one of the ranks holding it:
    /// accepted. The lowering writes outputs from wherever the schedule computed them, so a
    /// schedule that distributes another axis (a GEMM's rows for a column-sharded output)
    /// silently returns a different layout; `Err` says which.
    pub fn check_output_layout(&self, plan: &mercury_plan::Plan) -> Result<(), String> {
        let n = plan.ranks.len();
        let levels = self.kernel.mesh.shape.len();
        for b in self
            .kernel
            .buffers
            .iter()
            .filter(|b| b.role != mercury_commir::Role::In)
        {
            if !b.placement().is_contiguous() {
                check_runs_held(&self.kernel, b, plan)?;
                continue;
            }
            let sharded: Vec<usize> = (0..b.sharding.len())
                .filter(|&d| !b.sharding[d].is_empty())
                .collect();
            let [d] = sharded.as_slice() else { continue };
            let d = *d;
            if b.sharding[d] != (0..levels).collect::<Vec<_>>() {
                continue;
            }
            let Some(gi) = plan.buffers.iter().position(|g| g.name == b.name) else {
                return Err(format!("the plan has no output '{}'", b.name));
            };
            let shape = &plan.buffers[gi].shape;
            if !shape[d].is_multiple_of(n) {
                continue;
            }
            let block = shape[d] / n;
            let whole: usize = shape.iter().product::<usize>() / n;
            let mut held = vec![false; n];
            for r in &plan.ranks {
                let pieces: Vec<&mercury_plan::Region> = r
                    .outputs
                    .iter()
                    .filter(|o| o.buffer == gi)
                    .map(|o| &o.region)
                    .collect();
                let mut mine = Vec::new();
                for (i, h) in held.iter_mut().enumerate() {
                    // Volume of block i the rank's pieces cover (pieces do not overlap).
                    let covered: usize = pieces
                        .iter()
                        .map(|p| {
                            (0..shape.len())
                                .map(|k| {
                                    let (lo, hi) = if k == d {
                                        (i * block, (i + 1) * block)
                                    } else {
                                        (0, shape[k])
                                    };
                                    let a = p.offset[k].max(lo);
                                    (p.offset[k] + p.extent[k]).min(hi).saturating_sub(a)
                                })
                                .product::<usize>()
                        })
                        .sum();
                    if covered == whole {
                        mine.push(i);
                        *h = true;
                    } else if covered > 0 {
                        return Err(format!(
                            "rank {} writes {:.0}% of block {i} of '@{}' (declared sharded in dimension {d}): the output is split another way",
                            r.rank,
                            100.0 * covered as f64 / whole as f64,
                            b.name
                        ));
                    }
                }
                if let [i] = mine.as_slice() {
                    if *i != r.rank {
                        return Err(format!(
                            "rank {} holds block {i} of '@{}', declared block {}",
                            r.rank, b.name, r.rank
                        ));
                    }
                }
            }
            if let Some(i) = held.iter().position(|w| !w) {
                return Err(format!("no rank writes block {i} of '@{}'", b.name));
            }
        }
        Ok(())
    }

    /// The schedule script for one role per mesh level.
    fn script(&self, op: Op, ax: &[String], shape: &[usize], roles: &[&str]) -> Vec<String> {
        let mut s = Vec::new();
        let k = shape.len();
        match op {
            Op::Attention => {
                let (h, i, j, g) = (&ax[0], &ax[1], &ax[2], &ax[5]);
                let heads: Vec<usize> = (0..k).filter(|l| roles[*l] == "heads").collect();
                let groups: Vec<usize> = (0..k).filter(|l| roles[*l] == "groups").collect();
                // The levels that split the query heads: key/value heads first (the most
                // significant part of `@hk * @g`), then the groups.
                let head_levels: Vec<usize> = heads.iter().chain(&groups).copied().collect();
                let join = |v: &[usize]| {
                    v.iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join("|")
                };
                if !head_levels.is_empty() {
                    // Move the head levels from the sequence dimension to the head dimension;
                    // key/value buffers (whose head dimension has no group axis) only to
                    // the `heads` levels: replicated over the `groups` levels.
                    let rest: Vec<usize> = (0..k).filter(|l| !head_levels.contains(l)).collect();
                    let seq = if rest.is_empty() {
                        "R".to_string()
                    } else {
                        format!("S({})", join(&rest))
                    };
                    let all = format!("S({})", join(&(0..k).collect::<Vec<_>>()));
                    for b in self.kernel.buffers.iter().filter(|b| {
                        b.sharding.get(2).is_some_and(|x| !x.is_empty()) && b.dims.len() == 4
                    }) {
                        let grouped =
                            matches!(b.dims.get(1), Some(DimBinding::Axes(a)) if a.len() == 2);
                        let split = join(if grouped { &head_levels } else { &heads });
                        let hd = if split.is_empty() {
                            "R".to_string()
                        } else {
                            format!("S({split})")
                        };
                        s.push(format!(
                            "reshard{{buffer={} sharding=R,{hd},{seq},R}}",
                            b.name
                        ));
                    }
                    // One parallel loop per level: `axis` tiled level by level.
                    let mut split_over = |axis: &String, levels: &[usize]| {
                        for (n, l) in levels.iter().enumerate() {
                            let cur = if n == 0 {
                                axis.clone()
                            } else {
                                format!("{axis}_r{}", n - 1)
                            };
                            let inner = if n + 1 == levels.len() {
                                format!("{axis}_t")
                            } else {
                                format!("{axis}_r{n}")
                            };
                            s.push(format!(
                                "tile{{axis={cur} factor={} outer={axis}{l} inner={inner}}}",
                                shape[*l]
                            ));
                            s.push(format!(
                                "parallelize{{axis={axis}{l} level={l} shard=false}}"
                            ));
                        }
                    };
                    split_over(h, &heads);
                    split_over(g, &groups);
                    // Outputs end in their declared placement (contiguous, zigzag or
                    // striped), as re-expressed on this mesh.
                    let declared = self.declared_on(shape);
                    for b in self.kernel.buffers.iter().filter(|b| {
                        b.role != mercury_commir::Role::In
                            && b.sharding.get(2).is_some_and(|x| !x.is_empty())
                    }) {
                        let to = declared
                            .as_ref()
                            .and_then(|k| k.buffer(&b.name))
                            .map(|d| sharding_option(&d.placement()))
                            .unwrap_or_else(|| format!("R,R,{all},R"));
                        s.push(format!("reshard{{buffer={} sharding={to} at=end}}", b.name));
                    }
                }
                let seq_levels: Vec<usize> = (0..k)
                    .filter(|l| roles[*l] == "ring" || roles[*l] == "gather")
                    .collect();
                for (n, l) in seq_levels.iter().enumerate() {
                    let cur = if n == 0 {
                        i.clone()
                    } else {
                        format!("{i}_r{}", n - 1)
                    };
                    let more = roles.contains(&"tree+shift(i)");
                    let inner = if n + 1 == seq_levels.len() && !more {
                        format!("{i}_t")
                    } else {
                        format!("{i}_r{n}")
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={i}{l} inner={inner}}}",
                        shape[*l]
                    ));
                    s.push(format!("parallelize{{axis={i}{l} level={l} shard=false}}"));
                }
                let kv_levels: Vec<usize> = (0..k)
                    .filter(|l| matches!(roles[*l], "ring" | "tree" | "tree+shift(i)"))
                    .collect();
                for (n, l) in kv_levels.iter().enumerate() {
                    let cur = if n == 0 {
                        j.clone()
                    } else {
                        format!("{j}_r{}", n - 1)
                    };
                    let inner = if n + 1 == kv_levels.len() {
                        format!("{j}_t")
                    } else {
                        format!("{j}_r{n}")
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={j}{l} inner={inner}}}",
                        shape[*l]
                    ));
                    if roles[*l] == "ring" {
                        s.push(format!("shift{{axis={j}{l} by={i}{l}}}"));
                    } else {
                        s.push(format!("parallelize{{axis={j}{l} level={l} shard=false}}"));
                    }
                }
                // Shift-reduce of partial outputs: the key/value blocks stay, the query blocks
                // visit every rank of the level and their partial outputs (with the
                // log-sum-exp) travel to their owners; `offset=1` leaves the own block last.
                let qshift: Vec<usize> = (0..k).filter(|l| roles[*l] == "tree+shift(i)").collect();
                let done = seq_levels.len();
                for (n, l) in qshift.iter().enumerate() {
                    let cur = if done + n == 0 {
                        i.clone()
                    } else {
                        format!("{i}_r{}", done + n - 1)
                    };
                    s.push(format!(
                        "tile{{axis={cur} factor={} outer={i}{l} inner={i}_r{}}}",
                        shape[*l],
                        done + n
                    ));
                    s.push(format!("shift{{axis={i}{l} by={j}{l} offset=1}}"));
                }
            }
            Op::Gemm => {
                let (m, kk, n) = (&ax[0], &ax[1], &ax[2]);
                let mut count = std::collections::HashMap::new();
                // Tiles what is left of `axis` by `factor` into the loop `outer` (returned).
                let mut tile_by =
                    |s: &mut Vec<String>, axis: &String, outer: String, factor: usize| -> String {
                        let c = count.entry(axis.clone()).or_insert(0usize);
                        let cur = if *c == 0 {
                            axis.clone()
                        } else {
                            format!("{axis}_r{}", *c - 1)
                        };
                        s.push(format!(
                            "tile{{axis={cur} factor={factor} outer={outer} inner={axis}_r{c}}}"
                        ));
                        *c += 1;
                        outer
                    };
                // Parallel loops first (outermost), then the shifted ones inside them.
                let mut shifts = Vec::new();
                for (l, role) in roles.iter().enumerate().take(k) {
                    // `X` distributes axis X; `X+ring(Y)` / `X+shift(Y)` also shifts Y by
                    // it (inputs travel around the ring; with X the reduction, partial
                    // outputs travel to their owners).
                    let axis = |c: &str| match c {
                        "m" => m,
                        "n" => n,
                        _ => kk,
                    };
                    // `X+shift-halves(Y)`: as `X+shift(Y)`, each piece of Y computed in two
                    // halves (shift_reduce_halves.sched).
                    let (par, shifted, halves) = match role.split_once('+') {
                        None => (axis(role), None, false),
                        Some((p, rest)) => {
                            let halves = rest.starts_with("shift-halves(");
                            let y = rest
                                .trim_start_matches("ring(")
                                .trim_start_matches("shift-halves(")
                                .trim_start_matches("shift(")
                                .trim_end_matches(')');
                            (axis(p), Some(axis(y)), halves)
                        }
                    };
                    let p = tile_by(&mut s, par, format!("{par}{l}"), shape[l]);
                    s.push(format!("parallelize{{axis={p} level={l} shard=false}}"));
                    if let Some(x) = shifted {
                        // Shift-reduce (partials of m travel to their owners): the own piece
                        // last, so that every transfer overlaps a computation.
                        shifts.push((x, l, p, usize::from(par == kk), halves));
                    }
                }
                for (x, l, p, offset, halves) in shifts {
                    let name = tile_by(&mut s, x, format!("{x}{l}"), shape[l]);
                    if halves {
                        tile_by(&mut s, x, format!("{x}h{l}"), 2);
                    }
                    s.push(format!("shift{{axis={name} by={p} offset={offset}}}"));
                }
            }
        }
        s
    }

    /// Whether K/V head replication (`groups` levels) fits `roles` on `shape`: the `heads`
    /// levels must split every key/value head, one per rank. With fewer, a rank would hold
    /// several key/value heads and part of the groups of each, not the whole-group blocks
    /// its placement of `@hk * @g` names. True without `groups` levels.
    fn replication_fits(&self, ax: &[String], shape: &[usize], roles: &[&str]) -> bool {
        let split: usize = (0..shape.len())
            .filter(|l| roles[*l] == "heads")
            .map(|l| shape[l])
            .product();
        !roles.contains(&"groups") || Some(split) == self.kernel.axis(&ax[0]).map(|a| a.extent)
    }

    fn attempt(
        &self,
        shape: &[usize],
        roles: &[&str],
        op: Op,
        ax: &[String],
        zigzag: bool,
    ) -> Result<Candidate, String> {
        if op == Op::Attention && !self.replication_fits(ax, shape, roles) {
            return Err(format!(
                "K/V head replication ('groups') needs the 'heads' levels to split all {} key/value heads of '@{}', one per rank",
                self.kernel.extent(&ax[0]),
                ax[0]
            ));
        }
        // The script applies to the operator as given: a re-factored mesh is its first line.
        let mut m = self.module.clone();
        let mut script = Vec::new();
        if shape != self.kernel.mesh.shape.as_slice() {
            script.push(format!(
                "reshape-mesh{{shape={}}}",
                shape
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join("x")
            ));
        }
        script.extend(self.script(op, ax, shape, roles));
        if zigzag {
            script.push("balance-causal".to_string());
        }
        let mut pm = self
            .compiler
            .pass_manager(&self.schedule(Schedule::pipeline(&format!(
                "builtin.module({})",
                script.join(",")
            ))))
            .map_err(|e| e.to_string())?;
        pm.run(&mut m, &self.compiler.registry)
            .map_err(|d| d.message)?;
        let plan = mercury_driver::lower(&m, Some(&self.kernel.name)).map_err(|d| d.message)?;
        let mesh = shape
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("x");
        let name = format!(
            "mesh {mesh}: {}{}",
            roles
                .iter()
                .enumerate()
                .map(|(l, r)| format!("L{l}={r}"))
                .collect::<Vec<_>>()
                .join(" "),
            if zigzag { " zigzag" } else { "" }
        );
        let header = format!(
            "# {name}\n# mesh shape [{}] (levels slowest first)\n",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Candidate {
            name,
            transform_script: header + &self.with_prelude(&(script.join("\n") + "\n")),
            annotated_ir: print_op(&self.compiler.registry, &m, PrintOptions::default()),
            plan,
        })
    }
}

/// The `commir.patch` statements of a kernel: library kernel and operands, in order.
fn patches(k: &Kernel) -> Vec<(String, Vec<mercury_ir::ValueId>)> {
    let mut out = Vec::new();
    k.walk(&mut |s, _| {
        if let Stmt::Patch { kernel, inputs, .. } = s {
            out.push((kernel.clone(), inputs.clone()));
        }
    });
    out
}

/// A placement in the `sharding=` option syntax of `reshard` (`R,R,S(zigzag(0)|zigzag(1)),R`:
/// levels of a dimension joined by `|`, a striped block after `;`).
fn sharding_option(p: &mercury_commir::Placement) -> String {
    use mercury_commir::Split;
    (0..p.levels.len())
        .map(|d| {
            let ls = p.dim(d);
            if ls.is_empty() {
                return "R".to_string();
            }
            let items: Vec<String> = ls
                .iter()
                .map(|(l, s)| match s {
                    Split::Block => l.to_string(),
                    Split::Zigzag => format!("zigzag({l})"),
                    Split::Striped(b) => format!("striped({l};{b})"),
                })
                .collect();
            format!("S({})", items.join("|"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether every rank of `plan` writes exactly its part of output `b` under `b`'s zigzag or
/// striped placement (the runs of positions it holds in each dimension). `Err` says which rank
/// writes what else.
fn check_runs_held(
    k: &mercury_commir::Kernel,
    b: &mercury_commir::Buffer,
    plan: &mercury_plan::Plan,
) -> Result<(), String> {
    let Some(gi) = plan.buffers.iter().position(|g| g.name == b.name) else {
        return Err(format!("the plan has no output '{}'", b.name));
    };
    let p = b.placement();
    let shape = k.shape(b);
    for r in &plan.ranks {
        let runs: Vec<Vec<(usize, usize)>> = (0..shape.len())
            .map(|d| {
                mercury_commir::placement::dim_runs(shape[d], &p.dim(d), &k.mesh.shape, &r.coords)
            })
            .collect();
        let want: usize = runs
            .iter()
            .map(|v| v.iter().map(|x| x.1).sum::<usize>())
            .product();
        let mut inside = 0;
        let mut total = 0;
        for o in r.outputs.iter().filter(|o| o.buffer == gi) {
            total += o.region.numel();
            inside += (0..shape.len())
                .map(|d| {
                    let (lo, hi) = (o.region.offset[d], o.region.offset[d] + o.region.extent[d]);
                    runs[d]
                        .iter()
                        .map(|(s, l)| (s + l).min(hi).saturating_sub((*s).max(lo)))
                        .sum::<usize>()
                })
                .product::<usize>();
        }
        if inside != want || total != want {
            return Err(format!(
                "rank {} writes {total} elements of '@{}', {inside} of them in its {want} under {}",
                r.rank,
                b.name,
                p.to_custom()
            ));
        }
    }
    Ok(())
}

/// How much the search enumerates when it re-factors the mesh: meshes of `L` levels at most,
/// `L` the largest number of levels whose candidates (every role on every level, before the
/// primitives refuse any), times the square of the topology's devices, stay within this budget
/// (meshes of one level always). Lowering, verifying and simulating one candidate costs about
/// the square of the devices (every rank of a ring has a stage per rank: 3 ms a candidate on 16
/// devices, 9 ms on 32, 44 ms on 64 in a debug build). The budget keeps every mesh of up to 16
/// devices (a GEMM on 16: 13,310 candidates); attention on 32 GPUs: 4 levels (3,355 of 6,480
/// candidates); 64: 2 levels (130 of 38,880); 512: 1 level (5 of 8.4 million). What is left
/// out is reported ([`CandidateSource::left_out`]); [`CommirSource::with_max_levels`]
/// (`mercury-tune --max-mesh-levels N`) sets the bound instead.
pub const ENUMERATION_BUDGET: usize = 1 << 22;

/// The largest level count whose meshes of `shapes` (`per_shape` candidates each) times the
/// square of `devices` stay within [`ENUMERATION_BUDGET`]; at least 1.
fn level_bound(
    shapes: &[Vec<usize>],
    per_shape: impl Fn(&Vec<usize>) -> usize,
    devices: usize,
) -> usize {
    let deepest = shapes.iter().map(|s| s.len()).max().unwrap_or(1);
    let mut total = 0usize;
    let mut bound = 1;
    for levels in 1..=deepest {
        total = shapes
            .iter()
            .filter(|s| s.len() == levels)
            .fold(total, |t, s| t.saturating_add(per_shape(s)));
        let cost = total.saturating_mul(devices).saturating_mul(devices);
        if levels > 1 && cost > ENUMERATION_BUDGET {
            break;
        }
        bound = levels;
    }
    bound
}

/// Ordered factorisations of `n` into factors of at least 2 (and `[n]`).
pub fn factorisations(n: usize) -> Vec<Vec<usize>> {
    if n <= 1 {
        return vec![vec![1]];
    }
    let mut out = Vec::new();
    fn go(n: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if n == 1 {
            out.push(cur.clone());
            return;
        }
        for f in 2..=n {
            if n.is_multiple_of(f) {
                cur.push(f);
                go(n / f, cur, out);
                cur.pop();
            }
        }
    }
    go(n, &mut Vec::new(), &mut out);
    out
}

fn assignments<'a>(roles: &[&'a str], k: usize) -> Vec<Vec<&'a str>> {
    let mut out = vec![vec![]];
    for _ in 0..k {
        out = out
            .into_iter()
            .flat_map(|p| roles.iter().map(move |r| [p.clone(), vec![*r]].concat()))
            .collect();
    }
    out
}

impl CandidateSource for CommirSource {
    fn describe(&self) -> String {
        format!("CommIR kernel @{} from {}", self.kernel.name, self.origin)
    }

    /// The operator as the cache key sees it: the module as the search reads it (printed in
    /// generic form: the mesh, every axis, buffer, placement, sharding level and split, and
    /// the body; not the file's name, comments, spacing or value names), the kernel tuned, the passes that
    /// made the module from the input, and what bounds the candidates: the declared mesh kept
    /// or re-factored, the most mesh levels. Two inputs with one signature take the same
    /// schedules. (Before 2026-12-02 it held each buffer's sharded dimensions only, not the
    /// mesh or the levels: `examples/attention_2x4.mlir` got `attention.mlir`'s flat-8 entry.)
    fn signature(&self) -> String {
        let module = mercury_ir::print_op(
            &mercury_driver::registry(false),
            &self.module,
            mercury_ir::PrintOptions {
                generic: true,
                numbered: true,
                ..Default::default()
            },
        );
        let mut s = format!(
            "commir2:{};keep_mesh={};max_levels={:?}",
            self.target.as_deref().unwrap_or(&self.kernel.name),
            self.keep_mesh,
            self.max_levels
        );
        // An input patched here takes transforms that start with `patch`: not the entries of
        // the hand-patched operator (whose transforms would not patch this input).
        for p in &self.prelude {
            s += &format!(";prelude:{p}");
        }
        s + ";module:" + &module
    }

    fn candidates<'a>(
        &'a mut self,
        topo: &'a Topology,
    ) -> Result<Box<dyn Iterator<Item = Result<Candidate, SourceError>> + 'a>, SourceError> {
        let (op, ax) = self.op()?;
        let roles = Self::roles(op, &ax);
        let max = self.max_levels.unwrap_or(usize::MAX);
        self.left_out = None;

        // Causal attention around a ring is tried with zigzag placements too.
        let causal = mercury_passes::balance::causal_attention(&self.kernel).is_some();
        let (shapes, max) = match self.declared_shape(topo)? {
            // The declared mesh is the user's: enumerated whole.
            Some(declared) => (vec![declared], max),
            None => {
                let shapes = factorisations(topo.num_devices());
                let per_shape = |s: &Vec<usize>| {
                    (roles.len().saturating_pow(s.len() as u32)).saturating_mul(1 + causal as usize)
                };
                let bound = self
                    .max_levels
                    .unwrap_or_else(|| level_bound(&shapes, per_shape, topo.num_devices()));
                let (out, n_out): (Vec<&Vec<usize>>, usize) = shapes
                    .iter()
                    .filter(|s| s.len() > bound)
                    .fold((vec![], 0), |(mut v, n), s| {
                        let k = per_shape(s);
                        v.push(s);
                        (v, n.saturating_add(k))
                    });
                self.left_out = (!out.is_empty()).then(|| {
                    let why = match self.max_levels {
                        Some(_) => "as asked".to_string(),
                        None => format!(
                            "the search enumerates at most {ENUMERATION_BUDGET} candidates x devices^2, here {} devices",
                            topo.num_devices()
                        ),
                    };
                    format!(
                        "meshes of more than {bound} level(s) were not tried ({why}): {n_out} candidate(s) on {} mesh shape(s) left out, e.g. {}; --max-mesh-levels N tries meshes of up to N levels",
                        out.len(),
                        out[0].iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")
                    )
                });
                (shapes, bound)
            }
        };
        let mut work = Vec::new();
        for shape in shapes.into_iter().filter(|s| s.len() <= max) {
            for r in assignments(roles, shape.len()) {
                if op == Op::Attention && !self.replication_fits(&ax, &shape, &r) {
                    continue;
                }
                // Causal attention: every schedule is tried with zigzag placements too
                // (`balance-causal` refuses those it cannot balance: counted as skipped).
                if causal {
                    work.push((shape.clone(), r.clone(), true));
                }
                work.push((shape.clone(), r, false));
            }
        }
        self.pruned.clear();
        let this: &CommirSource = self;
        Ok(Box::new(work.into_iter().map(move |(shape, r, zigzag)| {
            this.attempt(&shape, &r, op, &ax, zigzag).map_err(|e| {
                let mesh = shape
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join("x");
                err(format!("mesh {mesh} {r:?}: {e}"))
            })
        })))
    }

    fn left_out(&self) -> Option<String> {
        self.left_out.clone()
    }

    /// The first role that lowers with that role on every level of the mesh the search keeps
    /// (the declared one, unless re-factoring: then one level of every device):
    /// `mesh 8: L0=ring` for attention (the collective-library ring, contiguous: the baseline
    /// a tuner improves on), `mesh 8: L0=m` for a GEMM; on a declared `[2, 4]`,
    /// `mesh 2x4: L0=ring L1=ring` and `mesh 2x4: L0=m L1=m`.
    fn default_candidate(&mut self, topo: &Topology) -> Result<Candidate, SourceError> {
        let (op, ax) = self.op()?;
        let shape = self
            .declared_shape(topo)?
            .unwrap_or_else(|| vec![topo.num_devices()]);
        let mut why = Vec::new();
        for r in Self::roles(op, &ax) {
            match self.attempt(&shape, &vec![*r; shape.len()], op, &ax, false) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(format!("{r}: {e}")),
            }
        }
        Err(err(format!(
            "{}: no role lowers on mesh {}: {}",
            self.origin,
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            why.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The level bound keeps every mesh of up to 16 devices (a GEMM's 10 roles on 16: all 4
    /// levels; causal grouped-query attention) and bounds the large ones: attention's 5 roles on 32 devices to 4 levels, on 64
    /// to 2, on 512 to 1.
    #[test]
    fn level_bound_keeps_small_meshes_and_bounds_large_ones() {
        let bound = |n: usize, roles: usize| {
            level_bound(&factorisations(n), |s| roles.pow(s.len() as u32), n)
        };
        assert_eq!(bound(16, 10), 4);
        // Causal grouped-query attention: 6 roles, each schedule also zigzag.
        let gqa = level_bound(&factorisations(16), |s| 2 * 6usize.pow(s.len() as u32), 16);
        assert_eq!(gqa, 4);
        assert_eq!(bound(8, 10), 3);
        assert_eq!(bound(32, 5), 4);
        assert_eq!(bound(64, 5), 2);
        assert_eq!(bound(512, 5), 1);
    }

    /// A bounded enumeration says what it left out; an unbounded one says nothing.
    #[test]
    fn left_out_meshes_are_reported() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/attention.mlir"
        ))
        .unwrap();
        let topo = Topology::preset("h100-2x4").unwrap().unwrap();
        let mut all = CommirSource::from_text(&text, "attention.mlir", None).unwrap();
        let n_all = all.candidates(&topo).unwrap().count();
        assert_eq!(n_all, 5 + 2 * 25 + 125);
        assert_eq!(all.left_out(), None);
        let mut one = CommirSource::from_text(&text, "attention.mlir", None)
            .unwrap()
            .with_max_levels(1);
        assert_eq!(one.candidates(&topo).unwrap().count(), 5);
        let w = one.left_out().unwrap();
        assert!(
            w.starts_with("meshes of more than 1 level(s) were not tried (as asked): 175 candidate(s) on 3 mesh shape(s)"),
            "{w}"
        );
    }

    #[test]
    fn factorisations_of_8() {
        assert_eq!(
            factorisations(8),
            vec![vec![2, 2, 2], vec![2, 4], vec![4, 2], vec![8]]
        );
    }

    #[test]
    fn attention_candidates_lower_and_include_ring_and_ulysses() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/attention.mlir"
        ))
        .unwrap();
        let mut src = CommirSource::from_text(&text, "attention.mlir", None).unwrap();
        let topo = Topology::preset("h100-2x4").unwrap().unwrap();
        let (mut ok, mut bad) = (Vec::new(), 0);
        for c in src.candidates(&topo).unwrap() {
            match c {
                Ok(c) => ok.push(c),
                Err(_) => bad += 1,
            }
        }
        assert!(
            ok.len() >= 20,
            "only {} candidates ({bad} refused)",
            ok.len()
        );
        assert!(ok.iter().any(|c| c.name == "mesh 8: L0=ring"));
        assert!(ok.iter().any(|c| c.name == "mesh 8: L0=heads"));
        assert!(ok.iter().any(|c| c.name == "mesh 2x4: L0=ring L1=heads"));
        for c in &ok {
            mercury_plan::verify(&c.plan).unwrap();
            assert_eq!(c.plan.num_ranks(), 8);
        }
    }

    /// The GEMM candidates `k+shift(m)` and `k+shift-halves(m)` are the plans of
    /// shift_reduce.sched and shift_reduce_halves.sched (their templates).
    #[test]
    fn shift_reduce_candidates_are_their_known_schedules() {
        let read = |f: &str| {
            std::fs::read_to_string(format!("{}/../../examples/{f}", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
        };
        let text = read("gemm_rs.mlir");
        let mut src = CommirSource::from_text(&text, "gemm_rs.mlir", None).unwrap();
        let topo = Topology::preset("h200-1x8").unwrap().unwrap();
        let ok: Vec<Candidate> = src.candidates(&topo).unwrap().flatten().collect();
        let compiler = mercury_driver::Compiler::new();
        for (name, sched) in [
            ("mesh 8: L0=k+shift(m)", "shift_reduce.sched"),
            ("mesh 8: L0=k+shift-halves(m)", "shift_reduce_halves.sched"),
        ] {
            let c = ok
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("{name} missing"));
            let mut m = compiler.parse("gemm_rs.mlir", &text).unwrap();
            let script = read(&format!("schedules/{sched}"));
            compiler
                .schedule(&mut m, &mercury_driver::Schedule::script(&script))
                .unwrap();
            let plan = mercury_conversion::lower_module(&m, None).unwrap();
            assert_eq!(plan.num_stages(), c.plan.num_stages(), "{name}");
            assert_eq!(
                plan.bytes_sent_per_rank(),
                c.plan.bytes_sent_per_rank(),
                "{name}"
            );
            assert!(
                crate::templates::template_of(name).is_some_and(|t| t.contains(sched)),
                "{name}"
            );
        }
    }

    /// The naive attention (tile ops) is patched first: the same candidates and plans as the
    /// hand-patched example, transforms that start with `patch`, another cache signature.
    #[test]
    fn naive_attention_is_patched_first() {
        let read = |f: &str| {
            std::fs::read_to_string(format!("{}/../../examples/{f}", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
        };
        let mut naive =
            CommirSource::from_text(&read("attention_naive.mlir"), "naive.mlir", None).unwrap();
        let mut patched =
            CommirSource::from_text(&read("attention.mlir"), "attention.mlir", None).unwrap();
        let topo = Topology::preset("h100-1x8").unwrap().unwrap();
        let a = naive.default_candidate(&topo).unwrap();
        let b = patched.default_candidate(&topo).unwrap();
        assert_eq!(a.name, b.name);
        assert_eq!(a.plan, b.plan);
        let lines: Vec<&str> = a.transform_script.lines().collect();
        assert_eq!(lines[2], "patch", "{}", a.transform_script);
        assert_eq!(
            lines[3..],
            b.transform_script.lines().collect::<Vec<_>>()[2..]
        );
        assert_ne!(naive.signature(), patched.signature());
    }

    /// Causal attention: the search tries the ring with zigzag placements too, and the cost
    /// model, which prices every rank's causal work, ranks it faster than the contiguous ring
    /// (where rank 7 works at every step while rank 0 idles after its first).
    #[test]
    fn zigzag_ring_is_a_candidate_and_priced_faster_for_causal_attention() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/attention_causal.mlir"
        ))
        .unwrap();
        let src = CommirSource::from_text(&text, "attention_causal.mlir", None).unwrap();
        let topo = Topology::preset("h200-1x8").unwrap().unwrap();
        let (op, ax) = src.op().unwrap();
        let predict = |zigzag: bool| {
            let c = src.attempt(&[8], &["ring"], op, &ax, zigzag).unwrap();
            if zigzag {
                assert_eq!(c.name, "mesh 8: L0=ring zigzag");
                assert!(c.transform_script.contains("balance-causal"));
            }
            src.check_output_layout(&c.plan).unwrap();
            crate::search::evaluate(c, &topo).predicted_s.unwrap()
        };
        let (zigzag, contiguous) = (predict(true), predict(false));
        assert!(
            zigzag < 0.8 * contiguous,
            "zigzag ring {zigzag} s, contiguous ring {contiguous} s"
        );
    }
}
