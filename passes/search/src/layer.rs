//! Graph-level search over a module of several kernels (paper section 7.4, a Llama layer):
//! every kernel's schedule and every edge's placement chosen together, priced by the
//! simulator the operator search uses, with the weights charged to memory per rank.
//!
//! **What is chosen.** Per kernel, a schedule ([`KernelCandidate`]): `par(AXIS)` for every axis
//! the mesh can distribute (on a two-level mesh also `par(A@L0, B@L1)`, one axis per level),
//! plus the operator search's candidates for an attention or GEMM kernel ([`crate::commir_source::CommirSource`] on the declared mesh: ring, heads,
//! gather, tree, ...); and where it leaves the buffers later kernels read ([`OutMode`]: as
//! declared, replicated, or sharded along one of its axes), written as `place-edge` passes.
//! What a kernel's schedule then reads in another placement, `reshard-edges` moves at its start,
//! so every edge's reshard is part of the reader's plan and priced with it. The module's inputs
//! and its last outputs keep their declared placements (the layer boundary: a layer's output
//! leaves as its input came).
//!
//! **Pricing.** A kernel's choice is priced by lowering the kernel inside the module (the
//! writers' edge placements, its schedule, `reshard-edges`) and simulating its plan
//! ([`crate::sim::simulate`]): the layer's time is the sum over its kernels, which run in module
//! order. Memory per rank ([`crate::memory`]): the slots of the module's *weights* (inputs that
//! no kernel writes and that no batch or token axis indexes, see [`LayerSearch::weights`]) count
//! `layers` times, summed over the kernels (every layer of the model keeps its weights); every
//! other slot counts while its kernel runs, with the buffers alive across that kernel (written
//! before it and read after it, as their writer leaves them: the residual stream); a choice's
//! bytes are the weights plus the largest kernel's.
//!
//! **Selection.** Exact: dynamic programming in module order whose state is the out modes of
//! the kernels whose outputs are still to be read, keeping per state the Pareto front of
//! (time, weight bytes, largest activation bytes), so that the memory cap (the topology's usable
//! HBM) is applied exactly at the end. The result is one schedule script for the module
//! ([`LayerPick::script`]), run by `mercury-run FILE --module --schedule PICK.sched`.

mod baselines;
mod candidates;
#[cfg(test)]
mod tests;

pub use baselines::{baselines, Baseline};
pub use candidates::{KernelCandidate, OutMode};

use crate::memory::memory_report;
use crate::sim::{simulate, SimOptions};
use crate::topology::Topology;
use candidates::{
    edge_outputs, operator_candidates, out_modes, par2_candidate, par_candidate, parallel_axes,
    splits1, splits2,
};
use mercury_commir::{DimBinding, Kernel, Placement, Role};
use mercury_driver::{Compiler, Schedule};
use mercury_ir::{print_op, Operation, PrintOptions};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Why a module cannot be searched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayerError {
    /// The text does not parse or verify (a rendered, located diagnostic).
    #[error("{0}")]
    Input(String),
    /// The module is not one the layer search takes (the message says why).
    #[error("{0}")]
    Unsupported(String),
    /// No combination of the kernels' choices lowers and fits in memory.
    #[error("no combination of the kernels' schedules fits in {usable_gb:.1} GB per device (the smallest needs {smallest_gb:.1} GB)")]
    Infeasible { usable_gb: f64, smallest_gb: f64 },
}

/// One kernel's choice, priced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priced {
    /// Predicted seconds of the kernel's plan (its edge reshards included).
    pub seconds: f64,
    /// Bytes of the weights' slots on the rank holding the most.
    pub weight_bytes: u64,
    /// Bytes of every other slot on the rank holding the most.
    pub activation_bytes: u64,
}

/// A kernel's choice: indices into its candidates and out modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Choice {
    pub candidate: usize,
    pub out: usize,
}

/// A schedule of the whole module, priced.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPick {
    /// One choice per kernel, in module order.
    pub choices: Vec<Choice>,
    /// Each kernel's price under the choice.
    pub priced: Vec<Priced>,
    /// Predicted seconds of the module (sum over its kernels).
    pub seconds: f64,
    /// Bytes per rank: `layers` x the weights + the largest kernel's other slots.
    pub memory_bytes: u64,
}

/// The search over one module on one topology.
pub struct LayerSearch {
    origin: String,
    compiler: Compiler,
    module: Operation,
    kernels: Vec<Kernel>,
    topo: Topology,
    /// Layers of the model whose weights stay resident (1: this module's only).
    pub layers: u64,
    /// Per kernel: its schedules.
    pub candidates: Vec<Vec<KernelCandidate>>,
    /// Per kernel: where it may leave its edge outputs.
    pub outs: Vec<Vec<OutMode>>,
    /// Per kernel: (buffer, writer kernel) of every input an earlier kernel writes.
    inputs: Vec<Vec<(String, usize)>>,
    /// Per kernel: whether a later kernel reads one of its outputs.
    read_later: Vec<bool>,
    /// The module's weights (see [`LayerSearch::weights`]).
    weights: BTreeSet<String>,
    /// Per kernel: the buffers alive while it runs that it does not declare (written before
    /// it, or module inputs other than weights, and read after it), with their writer.
    live: Vec<Vec<(String, Option<usize>)>>,
    prices: RefCell<HashMap<String, Option<Priced>>>,
}

impl LayerSearch {
    /// Reads `text` (a module of several kernels on one mesh of one or two levels) and
    /// generates every kernel's candidates and out modes for `topo` (on two levels `[n0, n1]`:
    /// pairs of axes, one over each level, [`candidates::par2_candidate`]).
    ///
    /// # Errors
    /// A parse or verify error; kernels on several meshes, a mesh of more than two levels, or
    /// one whose device count differs from the topology's; a kernel already scheduled.
    pub fn new(text: &str, origin: &str, topo: &Topology) -> Result<LayerSearch, LayerError> {
        let compiler = Compiler::new();
        let module = compiler
            .parse(origin, text)
            .map_err(|d| LayerError::Input(d.render()))?;
        let kernels =
            mercury_commir::kernels(&module).map_err(|d| LayerError::Input(d.render()))?;
        let unsupported = |m: String| LayerError::Unsupported(format!("{origin}: {m}"));
        let Some(first) = kernels.first() else {
            return Err(unsupported("the module has no commir.kernel".into()));
        };
        let mesh = first.mesh.shape.clone();
        if let Some(k) = kernels.iter().find(|k| k.mesh.shape != mesh) {
            return Err(unsupported(format!(
                "the kernel '@{}' is on a mesh of shape {:?} and '@{}' on {mesh:?}: a module's kernels share one mesh",
                k.name, k.mesh.shape, first.name
            )));
        }
        if mesh.is_empty() || mesh.len() > 2 {
            return Err(unsupported(format!(
                "the layer search takes a mesh of one or two levels (the module's is {mesh:?})"
            )));
        }
        let n: usize = mesh.iter().product();
        if n != topo.num_devices() {
            return Err(unsupported(format!(
                "the module's mesh has {n} devices, topology '{}' has {}",
                topo.name,
                topo.num_devices()
            )));
        }
        if let Some(k) = kernels.iter().find(|k| {
            k.loops()
                .iter()
                .any(|l| l.parallel.is_some() || l.shift.is_some())
        }) {
            return Err(unsupported(format!(
                "the kernel '@{}' is already scheduled; give the module as written",
                k.name
            )));
        }
        let mut candidates = Vec::new();
        let mut outs = Vec::new();
        let mut inputs = Vec::new();
        let mut read_later = Vec::new();
        for (at, k) in kernels.iter().enumerate() {
            let both = parallel_axes(k, n);
            let (mut c, splits): (Vec<KernelCandidate>, _) = match mesh[..] {
                [_] => (
                    both.iter().map(|a| par_candidate(k, a, n)).collect(),
                    splits1(&both),
                ),
                [n0, n1] => {
                    let (axes0, axes1) = (parallel_axes(k, n0), parallel_axes(k, n1));
                    let mut c: Vec<KernelCandidate> = both
                        .iter()
                        .map(|a| par2_candidate(k, a, a, n0, n1))
                        .collect();
                    for a in &axes0 {
                        for b in axes1.iter().filter(|b| *b != a) {
                            c.push(par2_candidate(k, a, b, n0, n1));
                        }
                    }
                    (c, splits2(&axes0, &axes1, &both))
                }
                _ => unreachable!("checked above: one or two levels"),
            };
            c.extend(operator_candidates(text, origin, k, topo));
            candidates.push(c);
            let edges = edge_outputs(&kernels, at);
            read_later.push(!edges.is_empty());
            outs.push(out_modes(k, &edges, &splits));
            inputs.push(
                k.buffers
                    .iter()
                    .filter(|b| matches!(b.role, Role::In | Role::InOut))
                    .filter_map(|b| {
                        let w = kernels[..at].iter().rposition(|p| {
                            p.buffer(&b.name)
                                .is_some_and(|x| matches!(x.role, Role::Out | Role::InOut))
                        })?;
                        Some((b.name.clone(), w))
                    })
                    .collect(),
            );
        }
        let weights = Self::weights(&kernels);
        let live = (0..kernels.len())
            .map(|at| {
                let mut names: BTreeSet<&str> = BTreeSet::new();
                for later in &kernels[at + 1..] {
                    for b in later.buffers.iter().filter(|b| b.role != Role::Out) {
                        names.insert(&b.name);
                    }
                }
                names
                    .into_iter()
                    .filter(|n| kernels[at].buffer(n).is_none() && !weights.contains(*n))
                    .filter_map(|n| {
                        let writer = kernels[..at].iter().rposition(|p| {
                            p.buffer(n)
                                .is_some_and(|x| matches!(x.role, Role::Out | Role::InOut))
                        });
                        // A module input read first after this kernel is not loaded yet.
                        let read_before = kernels[..at].iter().any(|p| p.buffer(n).is_some());
                        (writer.is_some() || read_before).then(|| (n.to_string(), writer))
                    })
                    .collect()
            })
            .collect();
        Ok(LayerSearch {
            origin: origin.to_string(),
            compiler,
            module,
            kernels,
            topo: topo.clone(),
            layers: 1,
            candidates,
            outs,
            inputs,
            read_later,
            weights,
            live,
            prices: RefCell::new(HashMap::new()),
        })
    }

    /// The module's weights: buffers that no kernel writes, read by some kernel, none of whose
    /// dimensions is led by an axis that also leads one of the first kernel's first input's
    /// dimensions other than its last (the batch and token axes of `X[@b, @i, @e]`): `Wq`,
    /// `Wn1`, not `X` or the RoPE tables `Cos[@i, d]`.
    pub fn weights(kernels: &[Kernel]) -> BTreeSet<String> {
        let lead = |d: &DimBinding| match d {
            DimBinding::Axes(a) => a.first().cloned(),
            DimBinding::Fixed(_) => None,
        };
        let token_axes: BTreeSet<String> = kernels
            .first()
            .and_then(|k| k.buffers.iter().find(|b| b.role == Role::In))
            .map(|b| {
                let n = b.dims.len().saturating_sub(1);
                b.dims[..n].iter().filter_map(lead).collect()
            })
            .unwrap_or_default();
        let written: BTreeSet<&str> = kernels
            .iter()
            .flat_map(|k| k.buffers.iter())
            .filter(|b| matches!(b.role, Role::Out | Role::InOut))
            .map(|b| b.name.as_str())
            .collect();
        kernels
            .iter()
            .flat_map(|k| k.buffers.iter())
            .filter(|b| b.role == Role::In && !written.contains(b.name.as_str()))
            .filter(|b| {
                !b.dims
                    .iter()
                    .filter_map(lead)
                    .any(|a| token_axes.contains(&a))
            })
            .map(|b| b.name.clone())
            .collect()
    }

    /// The kernels, in module order.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// The levels of the module's mesh (1 or 2): the 3D-parallel configurations that apply
    /// ([`Baseline::levels`]).
    pub fn mesh_levels(&self) -> usize {
        self.kernels.first().map_or(1, |k| k.mesh.shape.len())
    }

    /// The topology the search prices on.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The placements kernel `at` reads its edge inputs in, as their writers leave them under
    /// `outs_of` (a writer's out mode by kernel index).
    fn arriving(&self, at: usize, outs_of: &dyn Fn(usize) -> usize) -> Vec<(String, Placement)> {
        self.inputs[at]
            .iter()
            .filter_map(|(b, w)| {
                self.outs[*w][outs_of(*w)]
                    .placements
                    .iter()
                    .find(|(x, _)| x == b)
                    .cloned()
            })
            .collect()
    }

    /// Bytes per rank of the buffers alive while kernel `at` runs that it does not declare
    /// (see [`LayerSearch::live`]), their writers' out modes given by `outs_of`; module inputs
    /// in their declared placement. The ranks hold equal shards (block placements).
    fn live_bytes(&self, at: usize, outs_of: &dyn Fn(usize) -> usize) -> u64 {
        self.live[at]
            .iter()
            .map(|(name, writer)| {
                let (k, b) = match writer {
                    Some(w) => (&self.kernels[*w], self.kernels[*w].buffer(name)),
                    None => match self.kernels.iter().find_map(|k| Some((k, k.buffer(name)?))) {
                        Some((k, b)) => (k, Some(b)),
                        None => return 0,
                    },
                };
                let Some(b) = b else { return 0 };
                let placement = writer
                    .and_then(|w| {
                        self.outs[w][outs_of(w)]
                            .placements
                            .iter()
                            .find(|(x, _)| x == name)
                            .map(|(_, p)| p.clone())
                    })
                    .unwrap_or_else(|| b.placement());
                let mut bytes = k
                    .shape(b)
                    .iter()
                    .fold(Kernel::elem_bytes(b) as u64, |a, &d| {
                        a.saturating_mul(d as u64)
                    });
                for levels in &placement.levels {
                    for l in levels {
                        bytes /= k.mesh.shape.get(*l).copied().unwrap_or(1).max(1) as u64;
                    }
                }
                bytes
            })
            .sum()
    }

    /// `place-edge` lines for `placements` where they differ from the module's declaration.
    fn place_lines(&self, placements: &[(String, Placement)]) -> String {
        let mut s = String::new();
        for (b, p) in placements {
            let declared = self
                .kernels
                .iter()
                .find_map(|k| k.buffer(b))
                .map(|x| x.placement());
            if declared.as_ref() != Some(p) {
                s += &format!("place-edge{{buffer={b} sharding={}}}\n", sharding_option(p));
            }
        }
        s
    }

    /// Kernel `at` under `choice`, with its edge inputs arriving in `arriving`: lowered inside
    /// the module and simulated; `None` where a primitive or the lowering refuses it, or the
    /// simulator cannot price it. Memoised.
    pub fn price(
        &self,
        at: usize,
        choice: Choice,
        arriving: &[(String, Placement)],
    ) -> Option<Priced> {
        let key = format!("{at}/{}/{}/{arriving:?}", choice.candidate, choice.out);
        if let Some(p) = self.prices.borrow().get(&key) {
            return *p;
        }
        let p = self.price_uncached(at, choice, arriving);
        self.prices.borrow_mut().insert(key, p);
        p
    }

    fn price_uncached(
        &self,
        at: usize,
        choice: Choice,
        arriving: &[(String, Placement)],
    ) -> Option<Priced> {
        let k = &self.kernels[at];
        let mut script = self.place_lines(arriving);
        script += &self.place_lines(&self.outs[at][choice.out].placements);
        script += &self.candidates[at][choice.candidate].script;
        script += &format!("reshard-edges{{kernel={}}}\n", k.name);
        let mut m = self.module.clone();
        let mut pm = self
            .compiler
            .pass_manager(&Schedule::script(&script))
            .ok()?;
        pm.run(&mut m, &self.compiler.registry).ok()?;
        let plan = mercury_driver::lower(&m, Some(&k.name)).ok()?;
        mercury_plan::verify(&plan).ok()?;
        let sim = simulate(&plan, &self.topo, SimOptions::default()).ok()?;
        if !sim.latency.is_finite() {
            return None;
        }
        let mem = memory_report(&plan, &self.topo);
        let weight_of = |slot: &str| {
            let buf = slot.split('.').next().unwrap_or(slot);
            self.weights.contains(buf)
        };
        let (mut wmax, mut amax) = (0u64, 0u64);
        for r in &plan.ranks {
            let mut w = 0u64;
            for s in &r.slots {
                let b = s.shape.iter().fold(s.dtype.size_bytes() as u64, |a, &d| {
                    a.saturating_mul(d as u64)
                });
                if weight_of(&s.name) {
                    w = w.saturating_add(b);
                }
            }
            wmax = wmax.max(w);
            amax = amax.max(mem.per_rank[r.rank.min(mem.per_rank.len() - 1)].saturating_sub(w));
        }
        Some(Priced {
            seconds: sim.latency,
            weight_bytes: wmax,
            activation_bytes: amax,
        })
    }

    /// Prices a full choice (one per kernel): `None` where a kernel's choice does not lower.
    pub fn evaluate(&self, choices: &[Choice]) -> Option<LayerPick> {
        let mut priced = Vec::with_capacity(choices.len());
        for (at, c) in choices.iter().enumerate() {
            let arriving = self.arriving(at, &|w| choices[w].out);
            priced.push(self.price(at, *c, &arriving)?);
        }
        Some(self.pick(choices.to_vec(), priced))
    }

    fn pick(&self, choices: Vec<Choice>, priced: Vec<Priced>) -> LayerPick {
        let seconds = priced.iter().map(|p| p.seconds).sum();
        let memory_bytes = self.memory(&choices, &priced);
        LayerPick {
            choices,
            priced,
            seconds,
            memory_bytes,
        }
    }

    /// Bytes per rank of a whole choice: `layers` x the weights, and the largest of every
    /// kernel's other slots plus the buffers alive across it.
    fn memory(&self, choices: &[Choice], priced: &[Priced]) -> u64 {
        let w: u64 = priced.iter().map(|p| p.weight_bytes).sum();
        let a = priced
            .iter()
            .enumerate()
            .map(|(at, p)| {
                p.activation_bytes
                    .saturating_add(self.live_bytes(at, &|x| choices[x].out))
            })
            .max()
            .unwrap_or(0);
        w.saturating_mul(self.layers).saturating_add(a)
    }

    /// The Pareto front of whole-module choices over (predicted seconds, bytes per rank),
    /// fastest first: exact dynamic programming in module order (see the module docs). Choices
    /// over `cap` bytes per rank are dropped as they appear.
    pub fn frontier(&self, cap: u64) -> Vec<LayerPick> {
        self.frontier_where(cap, &|_, _, _| true)
    }

    /// [`LayerSearch::frontier`] over the choices `allow` keeps (kernel index, candidate, out
    /// mode): the baselines' restriction.
    pub fn frontier_where(
        &self,
        cap: u64,
        allow: &dyn Fn(usize, &KernelCandidate, &OutMode) -> bool,
    ) -> Vec<LayerPick> {
        // State: out mode of every kernel whose outputs are still to be read.
        type State = BTreeMap<usize, usize>;
        #[derive(Clone)]
        struct Entry {
            seconds: f64,
            weights: u64,
            acts: u64,
            choices: Vec<Choice>,
            priced: Vec<Priced>,
        }
        let last_reader: Vec<usize> = (0..self.kernels.len())
            .map(|w| {
                (0..self.kernels.len())
                    .filter(|&r| self.inputs[r].iter().any(|(_, x)| *x == w))
                    .max()
                    .unwrap_or(w)
            })
            .collect();
        let mut states: BTreeMap<State, Vec<Entry>> = BTreeMap::new();
        states.insert(
            State::new(),
            vec![Entry {
                seconds: 0.0,
                weights: 0,
                acts: 0,
                choices: vec![],
                priced: vec![],
            }],
        );
        for at in 0..self.kernels.len() {
            let mut next: BTreeMap<State, Vec<Entry>> = BTreeMap::new();
            for (state, entries) in &states {
                let arriving = self.arriving(at, &|w| state[&w]);
                let live = self.live_bytes(at, &|w| state[&w]);
                for c in 0..self.candidates[at].len() {
                    for o in 0..self.outs[at].len() {
                        if !allow(at, &self.candidates[at][c], &self.outs[at][o]) {
                            continue;
                        }
                        let choice = Choice {
                            candidate: c,
                            out: o,
                        };
                        let Some(p) = self.price(at, choice, &arriving) else {
                            continue;
                        };
                        let mut s = state.clone();
                        if self.read_later[at] {
                            s.insert(at, o);
                        }
                        s.retain(|w, _| last_reader[*w] > at);
                        for e in entries {
                            let n = Entry {
                                seconds: e.seconds + p.seconds,
                                weights: e.weights + p.weight_bytes,
                                acts: e.acts.max(p.activation_bytes.saturating_add(live)),
                                choices: [e.choices.clone(), vec![choice]].concat(),
                                priced: [e.priced.clone(), vec![p]].concat(),
                            };
                            if n.weights.saturating_mul(self.layers).saturating_add(n.acts) > cap {
                                continue;
                            }
                            let front = next.entry(s.clone()).or_default();
                            let dominated = |a: &Entry, b: &Entry| {
                                a.seconds <= b.seconds && a.weights <= b.weights && a.acts <= b.acts
                            };
                            if front.iter().any(|f| dominated(f, &n)) {
                                continue;
                            }
                            front.retain(|f| !dominated(&n, f));
                            front.push(n);
                        }
                    }
                }
            }
            states = next;
        }
        let mut all: Vec<LayerPick> = states
            .into_values()
            .flatten()
            .map(|e| self.pick(e.choices, e.priced))
            .collect();
        all.sort_by(|a, b| {
            a.seconds
                .total_cmp(&b.seconds)
                .then(a.memory_bytes.cmp(&b.memory_bytes))
        });
        let mut front: Vec<LayerPick> = Vec::new();
        for p in all {
            if front.last().is_none_or(|f| p.memory_bytes < f.memory_bytes) {
                front.push(p);
            }
        }
        front
    }

    /// The fastest choice that fits in the topology's usable HBM per device.
    ///
    /// # Errors
    /// [`LayerError::Infeasible`] when nothing fits (with the smallest footprint).
    pub fn best(&self) -> Result<LayerPick, LayerError> {
        let usable = self.topo.usable_hbm_bytes();
        if let Some(p) = self.frontier(usable).into_iter().next() {
            return Ok(p);
        }
        let smallest = self
            .frontier(u64::MAX)
            .last()
            .map(|p| p.memory_bytes)
            .unwrap_or(0);
        Err(LayerError::Infeasible {
            usable_gb: usable as f64 / 1e9,
            smallest_gb: smallest as f64 / 1e9,
        })
    }

    /// Finds a kernel's choice by names: its candidate (`par(i)`, `mesh 8: L0=ring`) and its
    /// out mode (`declared`, `by(hk)`, `replicated`).
    pub fn choice(&self, at: usize, candidate: &str, out: &str) -> Option<Choice> {
        Some(Choice {
            candidate: self.candidates[at]
                .iter()
                .position(|c| c.name == candidate)?,
            out: self.outs[at].iter().position(|o| o.name == out)?,
        })
    }

    /// The module schedule of `pick`: the `place-edge` passes of its edges, then every
    /// kernel's schedule; `mercury-run FILE --module --schedule` runs it (and `reshard-edges`).
    pub fn script(&self, pick: &LayerPick) -> String {
        let mut s = format!(
            "# The layer search's pick for {} on {}: predicted {:.3} ms, {:.2} GB per device.\n",
            self.origin,
            self.topo.name,
            pick.seconds * 1e3,
            pick.memory_bytes as f64 / 1e9
        );
        for (at, c) in pick.choices.iter().enumerate() {
            s += &self.place_lines(&self.outs[at][c.out].placements);
        }
        for (at, c) in pick.choices.iter().enumerate() {
            s += &format!(
                "# @{}: {}, outputs {} ({:.3} ms)\n",
                self.kernels[at].name,
                self.candidates[at][c.candidate].name,
                self.outs[at][c.out].name,
                pick.priced[at].seconds * 1e3
            );
            s += &self.candidates[at][c.candidate].script;
        }
        s
    }

    /// Prices a schedule script of the whole module as `mercury-run --module` applies it (the
    /// script on every kernel, then `reshard-edges`), kernel by kernel with the same simulator:
    /// each kernel's predicted seconds, in module order. What [`LayerSearch::script`] writes
    /// prices to its pick's times; a hand-written layer schedule prices beside it.
    ///
    /// # Errors
    /// A pass or the lowering refusing the script (the message), or a plan the simulator
    /// cannot price.
    pub fn price_script(&self, script: &str) -> Result<Vec<f64>, String> {
        let mut m = self.module.clone();
        let script = format!("{script}\nreshard-edges\n");
        let mut pm = self
            .compiler
            .pass_manager(&Schedule::script(&script))
            .map_err(|e| e.to_string())?;
        pm.run(&mut m, &self.compiler.registry)
            .map_err(|d| d.message.clone())?;
        self.kernels
            .iter()
            .map(|k| {
                let plan = mercury_driver::lower(&m, Some(&k.name)).map_err(|d| d.message)?;
                let sim = simulate(&plan, &self.topo, SimOptions::default())
                    .map_err(|e| e.to_string())?;
                Ok(sim.latency)
            })
            .collect()
    }

    /// One line per kernel: `@name: candidate, outputs mode (ms)`.
    pub fn describe(&self, pick: &LayerPick) -> Vec<String> {
        pick.choices
            .iter()
            .enumerate()
            .map(|(at, c)| {
                format!(
                    "@{}: {}, outputs {} ({:.3} ms)",
                    self.kernels[at].name,
                    self.candidates[at][c.candidate].name,
                    self.outs[at][c.out].name,
                    pick.priced[at].seconds * 1e3
                )
            })
            .collect()
    }

    /// The module as read, printed (what [`LayerSearch::script`] applies to).
    pub fn module_text(&self) -> String {
        print_op(
            &self.compiler.registry,
            &self.module,
            PrintOptions::default(),
        )
    }
}

/// A placement as `reshard`'s and `place-edge`'s `sharding=` option: `R,S(0),R`.
pub fn sharding_option(p: &Placement) -> String {
    let custom = p.to_custom();
    custom
        .trim_start_matches('[')
        .trim_end_matches(']')
        .replace(' ', "")
}
