//! Running a plan on the CPU reference executor (f64) on the caller's data: the size limit and
//! the binding of full (unsharded) tensors to the plan's input buffers.

use crate::error::Error;
use mercury_plan::{DType, Plan, Role};
use std::collections::HashMap;

/// Elements the CPU executor accepts per run (all ranks' slots together).
pub const LIMIT: usize = 1 << 26;

/// Refuses a plan too large for the CPU executor ([`LIMIT`] elements over all ranks' slots).
pub fn check_size(plan: &Plan) -> Result<(), Error> {
    let elements: usize = plan
        .ranks
        .iter()
        .flat_map(|r| &r.slots)
        .map(|s| s.shape.iter().product::<usize>())
        .sum();
    if elements > LIMIT {
        return Err(Error::Input(format!(
            "the plan holds {elements} elements over its ranks, too many for the CPU executor (limit {LIMIT}); use small shapes or the GPU (mercury-run --backend cuda)"
        )));
    }
    Ok(())
}

/// A caller's tensor as the binding sees it: its element type (`None`: a type no buffer can
/// have, such as an integer type) and the name the caller knows it by, and its shape.
#[derive(Debug, Clone)]
pub struct TensorDesc {
    /// The plan's dtype of the tensor's element type, if it has one.
    pub dtype: Option<DType>,
    /// The element type as the caller writes it (`torch.float32`).
    pub dtype_text: String,
    /// Its shape.
    pub shape: Vec<usize>,
}

/// Checks that `given` (by buffer name) binds every input buffer of `plan` and nothing else,
/// each tensor of its buffer's dtype and shape.
///
/// # Errors
/// [`Error::Input`] naming the buffer and both sides: a missing input, a name that is no input
/// (with the inputs' names), another dtype, another shape.
pub fn check_inputs(plan: &Plan, given: &[(String, TensorDesc)]) -> Result<(), Error> {
    let inputs: Vec<_> = plan
        .buffers
        .iter()
        .filter(|b| b.role == Role::Input)
        .collect();
    let names = || {
        inputs
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (name, _) in given {
        if !inputs.iter().any(|b| &b.name == name) {
            return Err(Error::Input(format!(
                "'{name}' is not an input of @{} (its inputs: {})",
                plan.name,
                names()
            )));
        }
    }
    for b in &inputs {
        let Some((_, t)) = given.iter().find(|(n, _)| *n == b.name) else {
            return Err(Error::Input(format!(
                "input '{}' is missing (the inputs of @{}: {})",
                b.name,
                plan.name,
                names()
            )));
        };
        if t.dtype != Some(b.dtype) {
            return Err(Error::Input(format!(
                "input '{}': the tensor is {} but buffer @{} is {} (cast it: .to({}))",
                b.name,
                t.dtype_text,
                b.name,
                b.dtype.name(),
                torch_name(b.dtype)
            )));
        }
        if t.shape != b.shape {
            return Err(Error::Input(format!(
                "input '{}': the tensor has shape {:?} but buffer @{} is {:?}",
                b.name, t.shape, b.name, b.shape
            )));
        }
    }
    Ok(())
}

/// PyTorch's name of a dtype (`torch.bfloat16`).
pub fn torch_name(d: DType) -> &'static str {
    match d {
        DType::F64 => "torch.float64",
        DType::F32 => "torch.float32",
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
    }
}

/// Runs `plan` on the CPU reference executor in f64 on `inputs` (full tensors by buffer name,
/// row-major, already checked by [`check_inputs`]); returns the full outputs by name, each
/// rounded to its buffer's dtype (what a device would store). An element no rank writes is
/// NaN (the executor poisons what nothing delivered).
pub fn run(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
) -> Result<HashMap<String, Vec<f64>>, Error> {
    check_size(plan)?;
    let mut out =
        mercury_runtime::cpu::execute(plan, inputs).map_err(|e| Error::Input(e.to_string()))?;
    for b in plan.buffers.iter().filter(|b| b.role == Role::Output) {
        if let Some(v) = out.get_mut(&b.name) {
            v.iter_mut()
                .for_each(|x| *x = mercury_runtime::cpu::round_to(b.dtype, *x));
        }
    }
    Ok(out)
}
