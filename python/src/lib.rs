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
    /// The executor of each GPU this operator ran on (built on first use, then reused).
    #[cfg(feature = "cuda")]
    runners: std::sync::Mutex<HashMap<usize, mercury::cuda::DeviceRunner>>,
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

    /// Runs the plan on GPU `ordinal` (every rank a virtual rank there) on device memory:
    /// `inputs` and `outputs` are `[(name, address)]` of dense row-major buffers in their
    /// dtypes, ordered after the work on `stream` (torch's `cuda_stream`), which then waits
    /// for the outputs. The executor is built on the first call of each GPU (with the device
    /// kernels `ptx`) and reused. Returns the run's device time in milliseconds.
    ///
    /// The addresses must be device memory of the buffers' sizes on that GPU, kept alive by
    /// the caller until its stream has passed the outputs (the Python package passes the
    /// `data_ptr()`s of tensors it holds and records them on the stream).
    #[cfg(feature = "cuda")]
    fn run_cuda(
        &self,
        py: Python<'_>,
        inputs: Vec<(String, u64)>,
        outputs: Vec<(String, u64)>,
        stream: u64,
        ordinal: usize,
        ptx: &str,
    ) -> PyResult<f64> {
        let plan = &self.op.plan;
        py.detach(|| {
            let mut runners = self
                .runners
                .lock()
                .map_err(|_| Error::Device("a previous run panicked".into()))?;
            let runner = match runners.entry(ordinal) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(mercury::cuda::DeviceRunner::new(plan, ordinal, ptx)?)
                }
            };
            // SAFETY: the Python package passes data_ptr()s of CUDA tensors of the buffers'
            // dtypes and sizes on GPU `ordinal` that it keeps alive (see the doc comment).
            unsafe { runner.run(&inputs, &outputs, stream) }
        })
        .map_err(py_err)
    }

    /// Runs the plan on the CPU reference executor (f64). `inputs`: `[(name, address,
    /// elements)]` of contiguous float64 host memory holding each input buffer row-major
    /// (checked first with [`Self::check_inputs`]); `outputs`: `[(name, address, elements)]`
    /// of contiguous float64 host memory, one per output buffer, written with the outputs
    /// rounded to their buffers' dtypes. The GIL is released while it runs.
    ///
    /// The addresses must stay valid, unaliased by the outputs, for the call: the Python
    /// package passes `data_ptr()`s of tensors it holds.
    fn run_cpu(
        &self,
        py: Python<'_>,
        inputs: Vec<(String, usize, usize)>,
        outputs: Vec<(String, usize, usize)>,
    ) -> PyResult<()> {
        let plan = &self.op.plan;
        let mut data = HashMap::new();
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
    Ok(PyOperator {
        op,
        #[cfg(feature = "cuda")]
        runners: Default::default(),
    })
}

/// The CommIR text of attention for a shape (see `mercury::ops::AttentionSpec`).
#[pyfunction]
#[pyo3(signature = (*, batch, heads, kv_heads, seq, head_dim, v_head_dim, causal, scale, dtype, world, zigzag))]
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
) -> PyResult<String> {
    let dtype = dtype_of(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("attention: dtype {dtype} is not a floating-point type mercury computes in (float64, float32, float16, bfloat16)")))?;
    mercury::ops::AttentionSpec {
        batch,
        heads,
        kv_heads,
        seq,
        head_dim,
        v_head_dim,
        causal,
        scale,
        dtype,
        world,
        zigzag,
    }
    .commir()
    .map_err(py_err)
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

/// The names of the embedded topology presets.
#[pyfunction]
fn topology_presets() -> Vec<&'static str> {
    mercury_search::Topology::preset_names()
}

#[pymodule]
fn _mercury(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CompileError", m.py().get_type::<CompileError>())?;
    m.add_class::<PyOperator>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(attention_commir, m)?)?;
    m.add_function(wrap_pyfunction!(gemm_commir, m)?)?;
    m.add_function(wrap_pyfunction!(topology_presets, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
