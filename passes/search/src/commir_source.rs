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

mod layout;
mod script;
#[cfg(test)]
mod tests;

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
    /// The attention backward (`attention_bwd`): attention's roles on Q[b, h, i, d] and
    /// K, V[b, hk, j, d], with O, dO, LSE placed as Q, dQ as Q, dK, dV as K; and `ring+carry`.
    AttentionBwd,
    Gemm,
}

impl Op {
    /// Attention, forward or backward.
    fn attention(self) -> bool {
        matches!(self, Op::Attention | Op::AttentionBwd)
    }
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
        let bwd = name == "attention_bwd";
        match name.as_str() {
            "attention" | "attention_bwd" if bufs.len() == if bwd { 6 } else { 3 } => {
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
                    if bwd { Op::AttentionBwd } else { Op::Attention },
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

    fn attempt(
        &self,
        shape: &[usize],
        roles: &[&str],
        op: Op,
        ax: &[String],
        zigzag: bool,
    ) -> Result<Candidate, String> {
        if op.attention() && !self.replication_fits(ax, shape, roles) {
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
                if op.attention() && !self.replication_fits(&ax, &shape, &r) {
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
