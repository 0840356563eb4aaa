//! `mercury._mercury`: the native module of the `mercury` Python package, a thin layer over
//! the library face (`mercury`, api/): compile an operator, read its reports and buffers, run
//! it on the CPU reference executor on the caller's data. Everything a user calls is in the
//! Python package (`python/mercury/`); this module is its private implementation.

use mercury::{AutoOptions, Error, Operator, ScheduleSpec};
use mercury_plan::{DType, GlobalBuffer};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::collections::HashMap;

create_exception!(
    _mercury,
    CompileError,
    PyValueError,
    "A located CommIR diagnostic (`file:line:col: error: ...`, the source line and a caret): what the parser, the verifier, a pass or the lowering refused."
);

/// The Python exception of a face error: a located diagnostic is a `CompileError` (a
/// `ValueError`), bad input a `ValueError`, no device or a failed check a `RuntimeError`.
fn py_err(e: Error) -> PyErr {
    let m = e.message().trim_end().to_string();
    match e {
        Error::Located(_) => CompileError::new_err(m),
        Error::Input(_) => PyValueError::new_err(m),
        Error::Check(_) | Error::NoDevice(_) | Error::Device(_) => PyRuntimeError::new_err(m),
    }
}

/// The plan's dtype of a torch dtype's text (`torch.float32`), if it has one.
fn dtype_of(text: &str) -> Option<DType> {
    match text.trim_start_matches("torch.") {
        "float64" | "double" => Some(DType::F64),
        "float32" | "float" => Some(DType::F32),
        "float16" | "half" => Some(DType::F16),
        "bfloat16" => Some(DType::BF16),
        _ => None,
    }
}

/// `(name, dtype, shape)` of a buffer, the dtype as torch names it (`float32`).
fn describe(b: &GlobalBuffer) -> (String, String, Vec<usize>) {
    (
        b.name.clone(),
        mercury::cpu::torch_name(b.dtype)
            .trim_start_matches("torch.")
            .to_string(),
        b.shape.clone(),
    )
}

/// A compiled operator (`mercury.compile`'s result wraps it).
#[pyclass(name = "Operator", module = "mercury._mercury", frozen)]
struct PyOperator {
    op: Operator,
}

/// An operator's executor on one GPU (`Operator.cuda_runner`): its buffers are bound to the
/// caller's tensors and each run is enqueued on the caller's stream.
#[cfg(feature = "cuda")]
#[pyclass(name = "Runner", module = "mercury._mercury", frozen)]
struct PyRunner {
    runner: std::sync::Mutex<mercury::cuda::DeviceRunner>,
    buffers: Vec<(String, bool)>,
}

#[cfg(feature = "cuda")]
impl PyRunner {
    fn new(runner: mercury::cuda::DeviceRunner) -> PyRunner {
        let buffers = runner
            .buffers()
            .into_iter()
            .map(|(_, name, role)| (name, role == mercury_plan::Role::Output))
            .collect();
        PyRunner {
            runner: std::sync::Mutex::new(runner),
            buffers,
        }
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, mercury::cuda::DeviceRunner>> {
        self.runner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a previous use of this executor panicked"))
    }
}

#[cfg(feature = "cuda")]
#[pymethods]
impl PyRunner {
    /// `[(name, is_output)]` of the global buffers, in the order `launch` takes addresses.
    #[getter]
    fn buffers(&self) -> Vec<(String, bool)> {
        self.buffers.clone()
    }

    /// Sets the document boundaries of the next launches: `[(name, prefix sums)]`, every
    /// boundaries input the plan reads (waits for a launched run first).
    fn set_documents(&self, py: Python<'_>, docs: Vec<(String, Vec<usize>)>) -> PyResult<()> {
        py.detach(|| self.lock()?.set_documents(&docs).map_err(py_err))
    }

    /// Sets the layout of buffer `index`'s memory: `[(offsets, extents, element strides)]`,
    /// one per region of the buffer the caller's memory holds.
    fn set_layout(
        &self,
        index: usize,
        regions: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)>,
    ) -> PyResult<()> {
        self.lock()?.set_layout(index, regions).map_err(py_err)
    }

    /// Binds the buffers to `ptrs` (one device address per region of the layouts, buffers in
    /// order) and enqueues a run after the work on `stream` (PyTorch's `cuda_stream`), which
    /// then waits for the run. Returns without waiting for the device; faults the device has
    /// reported of earlier runs are raised here.
    ///
    /// The addresses must hold the regions as laid out, on this executor's GPU, in the
    /// buffers' dtypes (outputs dense and not aliased), and stay valid until `stream` has
    /// passed the run: the Python package passes `data_ptr()`s of tensors it checked and
    /// allocated on that stream.
    fn launch(&self, py: Python<'_>, ptrs: Vec<u64>, stream: u64) -> PyResult<()> {
        py.detach(|| {
            let mut r = self.lock()?;
            // SAFETY: per the doc comment (the Python package's contract).
            unsafe { r.launch(&ptrs, stream) }.map_err(py_err)
        })
    }

    /// Host time of the executor's last launch in microseconds (what a call costs below the
    /// Python package: the direct bindings decided and the run enqueued).
    #[getter]
    fn last_enqueue_us(&self) -> PyResult<f64> {
        Ok(self.lock()?.last_enqueue_us())
    }

    /// Waits for the last launched run (faults raised) and returns its device time in ms.
    fn wait(&self, py: Python<'_>) -> PyResult<f64> {
        py.detach(|| self.lock()?.wait().map_err(py_err))
    }
}

/// The NCCL communicator of this process in a process group (`GroupComm(id, rank, size,
/// ordinal)`): joins it, blocking until every process of the group has (the GIL released).
#[cfg(feature = "cuda")]
#[pyclass(name = "GroupComm", module = "mercury._mercury", frozen)]
struct PyGroupComm {
    comm: std::sync::Mutex<mercury::cuda::GroupComm>,
}

#[cfg(feature = "cuda")]
#[pymethods]
impl PyGroupComm {
    #[new]
    fn new(py: Python<'_>, id: &str, rank: usize, size: usize, ordinal: usize) -> PyResult<Self> {
        mercury::cuda::check_group(id, rank, size).map_err(py_err)?;
        let comm = py
            .detach(|| mercury::cuda::GroupComm::new(id, rank, size, ordinal))
            .map_err(py_err)?;
        Ok(PyGroupComm {
            comm: std::sync::Mutex::new(comm),
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!("{:?}", *self.lock()?))
    }
}

#[cfg(feature = "cuda")]
impl PyGroupComm {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, mercury::cuda::GroupComm>> {
        self.comm
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a previous use of this communicator panicked"))
    }
}

/// A fresh NCCL unique id (256 hex digits) for a group's rank 0 to broadcast, from the NCCL
/// this process uses ([`nccl_library`]).
#[cfg(feature = "cuda")]
#[pyfunction]
fn nccl_unique_id(py: Python<'_>) -> PyResult<String> {
    py.detach(mercury::cuda::GroupComm::unique_id)
        .map_err(py_err)
}

/// The path of the NCCL library this process uses: `$MERCURY_NCCL_LIB`, else the one already
/// loaded (torch's), else the dynamic loader's `libnccl.so.2`.
#[cfg(feature = "cuda")]
#[pyfunction]
fn nccl_library() -> PyResult<String> {
    mercury::cuda::nccl_library().map_err(py_err)
}

#[pymethods]
impl PyOperator {
    /// The schedule that ran, as a schedule script ("" when none).
    #[getter]
    fn schedule(&self) -> String {
        self.op.schedule.clone()
    }

    /// How `schedule="auto"` chose the schedule (one line), or None for a given schedule.
    #[getter]
    fn decision(&self) -> Option<String> {
        self.op.chosen.as_ref().map(|c| c.describe())
    }

    /// The communication plan report (mercury-opt --commir-print-comm-plan).
    #[getter]
    fn comm_plan(&self) -> String {
        self.op.comm_plan()
    }

    /// The memory report.
    #[getter]
    fn memory(&self) -> String {
        self.op.memory()
    }

    /// The kernel's name.
    #[getter]
    fn kernel(&self) -> String {
        self.op.compiled.kernel.clone()
    }

    /// Ranks of the plan.
    #[getter]
    fn ranks(&self) -> usize {
        self.op.plan.num_ranks()
    }

    /// The plan as JSON (mercury-opt --emit=plan).
    fn plan_json(&self) -> String {
        self.op.plan.to_json()
    }

    /// `[(name, dtype, shape)]` of the input buffers, in declaration order.
    #[getter]
    fn inputs(&self) -> Vec<(String, String, Vec<usize>)> {
        self.op.inputs().into_iter().map(describe).collect()
    }

    /// `[(name, dtype, shape)]` of the output buffers, in declaration order.
    #[getter]
    fn outputs(&self) -> Vec<(String, String, Vec<usize>)> {
        self.op.outputs().into_iter().map(describe).collect()
    }

    /// `[(name, positions)]` of the run-time document boundaries inputs
    /// (`commir.documents`: prefix sums over `positions` tokens), in declaration order.
    #[getter]
    fn documents(&self) -> Vec<(String, usize)> {
        self.op
            .plan
            .documents
            .iter()
            .map(|d| (d.name.clone(), d.positions))
            .collect()
    }

    /// Checks `inputs` (`[(name, dtype text, shape)]`) against the input buffers: every input
    /// bound once, each of its buffer's dtype and shape (`ValueError` naming both).
    fn check_inputs(&self, inputs: Vec<(String, String, Vec<usize>)>) -> PyResult<()> {
        let given: Vec<(String, mercury::cpu::TensorDesc)> = inputs
            .into_iter()
            .map(|(name, dtype_text, shape)| {
                (
                    name,
                    mercury::cpu::TensorDesc {
                        dtype: dtype_of(&dtype_text),
                        dtype_text,
                        shape,
                    },
                )
            })
            .collect();
        mercury::cpu::check_inputs(&self.op.plan, &given).map_err(py_err)
    }

    /// The plan's executor on GPU `ordinal` (every rank a virtual rank there), built with the
    /// device kernels `ptx`, its global buffers bound to the caller's memory at each launch.
    #[cfg(feature = "cuda")]
    fn cuda_runner(&self, py: Python<'_>, ordinal: usize, ptx: &str) -> PyResult<PyRunner> {
        let plan = &self.op.plan;
        let runner = py
            .detach(|| mercury::cuda::DeviceRunner::new(plan, ordinal, ptx))
            .map_err(py_err)?;
        Ok(PyRunner::new(runner))
    }

    /// The plan's executor over GPUs `devices` of this process (rank r on
    /// `devices[r % len(devices)]`, the tensors on `devices[0]`; an ordinal may repeat),
    /// built with the device kernels `ptx`.
    #[cfg(feature = "cuda")]
    fn cuda_placed_runner(
        &self,
        py: Python<'_>,
        devices: Vec<usize>,
        ptx: &str,
    ) -> PyResult<PyRunner> {
        let plan = &self.op.plan;
        let runner = py
            .detach(|| mercury::cuda::DeviceRunner::placed(plan, &devices, ptx))
            .map_err(py_err)?;
        Ok(PyRunner::new(runner))
    }

    /// The plan's executor for this process of `group`: its rank (the group rank) on the
    /// group's GPU, the other ranks in the group's other processes, over NCCL. Every process
    /// of the group must build it at the same point (collective).
    #[cfg(feature = "cuda")]
    fn cuda_group_runner(
        &self,
        py: Python<'_>,
        group: &PyGroupComm,
        ptx: &str,
    ) -> PyResult<PyRunner> {
        let plan = &self.op.plan;
        let runner = py.detach(|| {
            let g = group.lock()?;
            mercury::cuda::DeviceRunner::in_group(plan, &g, ptx).map_err(py_err)
        })?;
        Ok(PyRunner::new(runner))
    }

    /// Runs the plan on the CPU reference executor (f64). `inputs`: `[(name, address,
    /// elements)]` of contiguous float64 host memory holding each input buffer row-major
    /// (checked first with [`Self::check_inputs`]); `documents`: `[(name, prefix sums)]`, one
    /// per document boundaries input (`ValueError` naming it when missing, unknown, or not
    /// `0 = c[0] <= ... <= c[n] <= positions`); `outputs`: `[(name, address, elements)]`
    /// of contiguous float64 host memory, one per output buffer, written with the outputs
    /// rounded to their buffers' dtypes. The GIL is released while it runs.
    ///
    /// The addresses must stay valid, unaliased by the outputs, for the call: the Python
    /// package passes `data_ptr()`s of tensors it holds.
    fn run_cpu(
        &self,
        py: Python<'_>,
        inputs: Vec<(String, usize, usize)>,
        documents: Vec<(String, Vec<usize>)>,
        outputs: Vec<(String, usize, usize)>,
    ) -> PyResult<()> {
        let plan = &self.op.plan;
        let mut data = HashMap::new();
        for (name, b) in documents {
            let Some(d) = plan.documents.iter().find(|d| d.name == name) else {
                return Err(PyValueError::new_err(format!(
                    "'{name}' is not a document boundaries input of @{}",
                    plan.name
                )));
            };
            mercury_plan::mask::Boundaries::new(b.clone(), d.positions)
                .map_err(|m| PyValueError::new_err(format!("document boundaries '{name}': {m}")))?;
            data.insert(name, b.into_iter().map(|x| x as f64).collect());
        }
        if let Some(d) = plan.documents.iter().find(|d| !data.contains_key(&d.name)) {
            return Err(PyValueError::new_err(format!(
                "document boundaries '{}' are missing (prefix sums over its {} positions)",
                d.name, d.positions
            )));
        }
        for (name, addr, n) in inputs {
            let want = plan
                .buffers
                .iter()
                .find(|b| b.name == name)
                .map(|b| b.shape.iter().product::<usize>());
            if want != Some(n) || addr == 0 {
                return Err(PyValueError::new_err(format!(
                    "input '{name}': {n} elements at {addr:#x}, the buffer holds {want:?}"
                )));
            }
            // SAFETY: the caller (the Python package) passes the data_ptr() of a contiguous
            // float64 CPU tensor of `n` elements that it keeps alive for this call.
            let v = unsafe { std::slice::from_raw_parts(addr as *const f64, n) }.to_vec();
            data.insert(name, v);
        }
        for (name, _, n) in &outputs {
            let want = self
                .op
                .outputs()
                .into_iter()
                .find(|b| &b.name == name)
                .map(|b| b.shape.iter().product::<usize>());
            if want != Some(*n) {
                return Err(PyValueError::new_err(format!(
                    "output '{name}': {n} elements, the buffer holds {want:?}"
                )));
            }
        }
        let got = py
            .detach(|| mercury::cpu::run(plan, &data))
            .map_err(py_err)?;
        for (name, addr, n) in outputs {
            let vals = got
                .get(&name)
                .ok_or_else(|| PyRuntimeError::new_err(format!("no output '{name}' came back")))?;
            // SAFETY: the caller passes the data_ptr() of a contiguous float64 CPU tensor of
            // `n` elements (checked above against the buffer) that nothing else reads or
            // writes during this call.
            let out = unsafe { std::slice::from_raw_parts_mut(addr as *mut f64, n) };
            out.copy_from_slice(vals);
        }
        Ok(())
    }
}

/// Compiles CommIR `text` (named `name` in diagnostics) with `schedule` (`"auto"`, `"none"`,
/// a pass name, a schedule script, a pipeline or a `.sched`/`.transform` path). `"auto"`
/// prices on `topology` (a preset or a TOML file; default: one node of the mesh's devices,
/// of `gpu`'s kind) through the schedule cache `cache` (a directory; None: none).
#[pyfunction]
#[pyo3(signature = (text, name, *, kernel=None, schedule="auto", topology=None, cache=None, gpu=None))]
#[allow(clippy::too_many_arguments)]
fn compile(
    py: Python<'_>,
    text: &str,
    name: &str,
    kernel: Option<&str>,
    schedule: &str,
    topology: Option<&str>,
    cache: Option<&str>,
    gpu: Option<&str>,
) -> PyResult<PyOperator> {
    let spec = ScheduleSpec::parse(schedule).map_err(py_err)?;
    let topology = match topology {
        Some(t) => Some(mercury_search::Topology::load(t).map_err(|e| match e {
            mercury_search::topology::TopologyError::Located(d) => {
                CompileError::new_err(d.render())
            }
            e => PyValueError::new_err(format!("topology: {e}")),
        })?),
        None => None,
    };
    let opts = AutoOptions {
        topology,
        gpu: gpu.map(String::from),
        cache: cache.map(std::path::PathBuf::from),
    };
    let op = py
        .detach(|| Operator::compile(name, text, kernel, &spec, &opts))
        .map_err(py_err)?;
    Ok(PyOperator { op })
}

/// The CommIR text of attention for a shape (see `mercury::ops::AttentionSpec`): the forward
/// (with `lse`, its log-sum-exp kept in an output `L`), or with `backward` its backward, and
/// the backward's schedule (`"none"` at world size 1). `kv_seq` defaults to `seq`; `window`
/// is flash-attn's `window_size`; `documents` is `"none"`, `"shared"` (boundaries `D` for
/// queries and keys) or `"split"` (`Dq` and `Dk`, aligned at each document's end).
#[pyfunction]
#[pyo3(signature = (*, batch, heads, kv_heads, seq, head_dim, v_head_dim, causal, scale, dtype, world, zigzag, lse=false, backward=false, kv_seq=None, window=None, documents="none", zigzag_chunk=None))]
#[allow(clippy::too_many_arguments)]
fn attention_commir(
    batch: usize,
    heads: usize,
    kv_heads: usize,
    seq: usize,
    head_dim: usize,
    v_head_dim: usize,
    causal: bool,
    scale: Option<f64>,
    dtype: &str,
    world: usize,
    zigzag: bool,
    lse: bool,
    backward: bool,
    kv_seq: Option<usize>,
    window: Option<(i64, i64)>,
    documents: &str,
    zigzag_chunk: Option<usize>,
) -> PyResult<(String, String)> {
    let dtype = dtype_of(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("attention: dtype {dtype} is not a floating-point type mercury computes in (float64, float32, float16, bfloat16)")))?;
    let documents = match documents {
        "none" => mercury::ops::Documents::None,
        "shared" => mercury::ops::Documents::Shared,
        "split" => mercury::ops::Documents::Split,
        d => {
            return Err(PyValueError::new_err(format!(
                "attention: documents must be 'none', 'shared' or 'split', not '{d}'"
            )))
        }
    };
    let spec = mercury::ops::AttentionSpec {
        batch,
        heads,
        kv_heads,
        seq,
        kv_seq: kv_seq.unwrap_or(seq),
        window,
        documents,
        head_dim,
        v_head_dim,
        causal,
        scale,
        dtype,
        world,
        zigzag,
        zigzag_chunk,
        lse,
    };
    let text = if backward {
        spec.backward_commir()
    } else {
        spec.commir()
    };
    Ok((text.map_err(py_err)?, spec.backward_schedule().to_string()))
}

/// An order of packed documents (`lengths`, tokens each, packed from position 0 of a sequence
/// of `positions`) that balances attention work over `ranks` sequence shards (contiguous, or
/// zigzag, over chunks of `chunk` positions when given), as `mercury_plan::balance::balance_documents`: `(order, before, after)`, the
/// document indices in packing order and the busiest rank's work over the mean before and after.
/// `ValueError` when the shards do not split `positions` evenly or the documents overflow it.
#[pyfunction]
#[pyo3(signature = (lengths, *, positions, ranks, zigzag, causal, left=None, right=None, chunk=None))]
#[allow(clippy::too_many_arguments)]
fn balance_documents(
    py: Python<'_>,
    lengths: Vec<usize>,
    positions: usize,
    ranks: usize,
    zigzag: bool,
    causal: bool,
    left: Option<usize>,
    right: Option<usize>,
    chunk: Option<usize>,
) -> PyResult<(Vec<usize>, f64, f64)> {
    use mercury_plan::balance;
    let layout = match chunk {
        Some(c) if zigzag => balance::Layout::zigzag_chunks(positions, ranks, c),
        Some(_) => Err("a chunk size needs the zigzag layout".to_string()),
        None => balance::Layout::new(positions, ranks, zigzag),
    }
    .map_err(PyValueError::new_err)?;
    let mask = balance::RowMask {
        causal,
        left,
        right,
    };
    let b = py
        .detach(|| balance::balance_documents(&lengths, &layout, mask))
        .map_err(PyValueError::new_err)?;
    Ok((b.order, b.before, b.after))
}

/// The CommIR text of AsyncTP's GEMMs (`kind`: "all_gather" or "reduce_scatter") for
/// `[m, k] @ [k, n]` over `world` ranks (see `mercury::ops::GemmSpec`).
#[pyfunction]
#[pyo3(signature = (*, kind, m, k, n, dtype, world))]
fn gemm_commir(
    kind: &str,
    m: usize,
    k: usize,
    n: usize,
    dtype: &str,
    world: usize,
) -> PyResult<String> {
    let kind = match kind {
        "all_gather" => mercury::ops::GemmKind::AllGather,
        "reduce_scatter" => mercury::ops::GemmKind::ReduceScatter,
        k => return Err(PyValueError::new_err(format!("unknown GEMM kind '{k}'"))),
    };
    let dtype = dtype_of(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("matmul: dtype {dtype} is not a floating-point type mercury computes in (float64, float32, float16, bfloat16)")))?;
    mercury::ops::GemmSpec {
        kind,
        m,
        k,
        n,
        dtype,
        world,
    }
    .commir()
    .map_err(py_err)
}

/// PyTorch's caching allocator, through the Python callables the package passes
/// (`torch.cuda.caching_allocator_alloc` / `caching_allocator_delete`): the executors' slots,
/// scratch and workspaces come from torch's pool, which `torch.cuda.memory_allocated` counts.
#[cfg(feature = "cuda")]
struct TorchAllocator {
    alloc: Py<PyAny>,
    free: Py<PyAny>,
    /// Set at interpreter exit: later frees are skipped (the process is ending) and
    /// allocations refused.
    closed: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "cuda")]
impl mercury_kernels::cuda::DeviceAllocator for TorchAllocator {
    fn alloc(&self, ordinal: usize, bytes: usize, stream: usize) -> Result<u64, String> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err("the Python interpreter is exiting".into());
        }
        Python::attach(|py| {
            self.alloc
                .call1(py, (bytes, ordinal, stream))
                .and_then(|p| p.extract::<u64>(py))
                .map_err(|e| format!("torch's caching allocator: {e}"))
        })
    }

    fn free(&self, _ordinal: usize, ptr: u64) {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        Python::attach(|py| {
            if let Err(e) = self.free.call1(py, (ptr,)) {
                tracing::warn!("torch's caching allocator refused to free {ptr:#x}: {e}");
            }
        });
    }
}

#[cfg(feature = "cuda")]
static TORCH_ALLOCATOR: std::sync::Mutex<Option<std::sync::Arc<TorchAllocator>>> =
    std::sync::Mutex::new(None);

/// Makes every later device allocation of Mercury-rs in this process go through `alloc(bytes,
/// device, stream) -> address` and `free(address)` (PyTorch's caching allocator), or with
/// `None` back to the CUDA driver's; the allocator replaced is closed (its frees skipped: what
/// the package does at interpreter exit).
#[cfg(feature = "cuda")]
#[pyfunction]
#[pyo3(signature = (alloc=None, free=None))]
fn use_allocator(alloc: Option<Py<PyAny>>, free: Option<Py<PyAny>>) -> PyResult<()> {
    let mut slot = TORCH_ALLOCATOR
        .lock()
        .map_err(|_| PyRuntimeError::new_err("the allocator lock is poisoned"))?;
    if let Some(old) = slot.take() {
        old.closed.store(true, std::sync::atomic::Ordering::Release);
    }
    let new = match (alloc, free) {
        (Some(alloc), Some(free)) => Some(std::sync::Arc::new(TorchAllocator {
            alloc,
            free,
            closed: std::sync::atomic::AtomicBool::new(false),
        })),
        (None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "use_allocator takes both alloc and free, or neither",
            ))
        }
    };
    mercury_kernels::cuda::set_allocator(
        new.clone()
            .map(|a| a as std::sync::Arc<dyn mercury_kernels::cuda::DeviceAllocator>),
    );
    *slot = new;
    Ok(())
}

/// The names of the embedded topology presets.
#[pyfunction]
fn topology_presets() -> Vec<&'static str> {
    mercury_search::Topology::preset_names()
}

#[pymodule]
fn _mercury(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CompileError", m.py().get_type::<CompileError>())?;
    m.add_class::<PyOperator>()?;
    #[cfg(feature = "cuda")]
    m.add_class::<PyRunner>()?;
    #[cfg(feature = "cuda")]
    m.add_class::<PyGroupComm>()?;
    #[cfg(feature = "cuda")]
    m.add_function(wrap_pyfunction!(nccl_unique_id, m)?)?;
    #[cfg(feature = "cuda")]
    m.add_function(wrap_pyfunction!(nccl_library, m)?)?;
    #[cfg(feature = "cuda")]
    m.add_function(wrap_pyfunction!(use_allocator, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(attention_commir, m)?)?;
    m.add_function(wrap_pyfunction!(gemm_commir, m)?)?;
    m.add_function(wrap_pyfunction!(balance_documents, m)?)?;
    m.add_function(wrap_pyfunction!(topology_presets, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
