//! Host data: [`HostData`], and the executor's uploads of inputs and downloads of buffers.

use super::CudaExecutor;
use crate::cuda::error::{Result, RuntimeError};
use mercury_plan::{DType, Role};

/// Host copy of a global buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// bf16 or f16 bit patterns.
    Bits16(Vec<u16>),
}

impl HostData {
    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
            HostData::Bits16(v) => v.len(),
        }
    }

    /// Values as f64 (bf16/f16 decoded according to `dtype`).
    pub fn to_f64(&self, dtype: DType) -> Vec<f64> {
        use rayon::prelude::*;
        match self {
            HostData::F32(v) => v.par_iter().map(|x| *x as f64).collect(),
            HostData::F64(v) => v.clone(),
            HostData::Bits16(v) => match dtype {
                DType::F16 => v
                    .par_iter()
                    .map(|x| half::f16::from_bits(*x).to_f64())
                    .collect(),
                // A bf16 is the high half of an f32.
                _ => v
                    .par_iter()
                    .map(|x| f32::from_bits((*x as u32) << 16) as f64)
                    .collect(),
            },
        }
    }

    /// `values` converted to the device representation of `dtype` (bf16/f16 round to nearest).
    pub fn from_f64(values: &[f64], dtype: DType) -> HostData {
        use rayon::prelude::*;
        match dtype {
            DType::F64 => HostData::F64(values.to_vec()),
            DType::F32 => HostData::F32(values.par_iter().map(|x| *x as f32).collect()),
            DType::BF16 => HostData::Bits16(
                values
                    .par_iter()
                    .map(|x| half::bf16::from_f64(*x).to_bits())
                    .collect(),
            ),
            DType::F16 => HostData::Bits16(
                values
                    .par_iter()
                    .map(|x| half::f16::from_f64(*x).to_bits())
                    .collect(),
            ),
        }
    }
}

/// A host buffer with its dtype: what [`CudaExecutor::upload_input`] takes and
/// [`CudaExecutor::download`] gives, readable value by value as f64 without an f64 copy of
/// the whole buffer (a 512K-token attention tensor holds 2^31 values: 4 GiB in bf16, 16 GiB
/// in f64).
#[derive(Debug, Clone, PartialEq)]
pub struct HostBuffer {
    /// The buffer's element type (decodes `data`'s 16-bit patterns).
    pub dtype: DType,
    /// The values, in the device representation of `dtype`.
    pub data: HostData,
}

impl HostBuffer {
    /// [`crate::cpu::random_inputs`]'s values for every input buffer of `plan`, drawn
    /// straight into the device representation (same numbers, no f64 copy).
    pub fn random_inputs(
        plan: &mercury_plan::Plan,
        seed: u64,
    ) -> std::collections::HashMap<String, HostBuffer> {
        use crate::cpu::draw_input;
        plan.buffers
            .iter()
            .filter(|b| b.role == Role::Input)
            .enumerate()
            .map(|(k, b)| {
                let n = b.shape.iter().product::<usize>();
                let data = match b.dtype {
                    DType::F64 => {
                        let mut v = vec![0f64; n];
                        draw_input(seed, k, &mut v, |x| x);
                        HostData::F64(v)
                    }
                    DType::F32 => {
                        let mut v = vec![0f32; n];
                        draw_input(seed, k, &mut v, |x| x as f32);
                        HostData::F32(v)
                    }
                    DType::BF16 => {
                        let mut v = vec![0u16; n];
                        draw_input(seed, k, &mut v, |x| half::bf16::from_f64(x).to_bits());
                        HostData::Bits16(v)
                    }
                    DType::F16 => {
                        let mut v = vec![0u16; n];
                        draw_input(seed, k, &mut v, |x| half::f16::from_f64(x).to_bits());
                        HostData::Bits16(v)
                    }
                };
                (
                    b.name.clone(),
                    HostBuffer {
                        dtype: b.dtype,
                        data,
                    },
                )
            })
            .collect()
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the buffer holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` as f64 (exact: every device type widens exactly). Panics past the end.
    #[inline]
    pub fn at(&self, i: usize) -> f64 {
        match &self.data {
            HostData::F32(v) => v[i] as f64,
            HostData::F64(v) => v[i],
            HostData::Bits16(v) => match self.dtype {
                DType::F16 => half::f16::from_bits(v[i]).to_f64(),
                _ => f32::from_bits((v[i] as u32) << 16) as f64,
            },
        }
    }

    /// Values `start .. start + len` as f64. Panics past the end.
    pub fn slice_f64(&self, start: usize, len: usize) -> Vec<f64> {
        (start..start + len).map(|i| self.at(i)).collect()
    }
}

impl CudaExecutor {
    /// Declares input `buffer` written by the caller directly on the device (e.g. a random
    /// fill enqueued on [`CudaExecutor::upload_stream`]).
    pub fn mark_input_written(&mut self, buffer: usize) -> Result<()> {
        let g = self
            .globals
            .get_mut(buffer)
            .ok_or_else(|| RuntimeError::Io(format!("no global buffer #{buffer}")))?;
        if g.role != Role::Input {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is not an input"
            )));
        }
        g.ready = true;
        Ok(())
    }

    /// Uploads global input `buffer` (host data in the buffer's device representation).
    pub fn upload_input(&mut self, buffer: usize, data: &HostData) -> Result<()> {
        let g = self.global(buffer)?;
        if g.role != Role::Input {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is not an input"
            )));
        }
        let ok = matches!(
            (data, g.dtype),
            (HostData::F32(_), DType::F32)
                | (HostData::F64(_), DType::F64)
                | (HostData::Bits16(_), DType::BF16 | DType::F16)
        );
        if !ok || data.len() != g.numel() {
            return Err(RuntimeError::Io(format!(
                "buffer #{buffer} is {} x {:?}; got {} host values of another type or count",
                g.dtype.name(),
                g.shape,
                data.len()
            )));
        }
        let ptr = g.own_ptr(&self.plan.buffers[buffer].name)?;
        self.bind_main()?;
        self.hub
            .synchronize()
            .map_err(RuntimeError::driver("synchronize before upload"))?;
        // SAFETY: `ptr` is the buffer's allocation (main device, whose context is current),
        // sized for exactly `data.len()` elements of the host type (checked above); the copy
        // is synchronous.
        let r = unsafe {
            match data {
                HostData::F32(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
                HostData::F64(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
                HostData::Bits16(v) => cudarc::driver::result::memcpy_htod_sync(ptr, v),
            }
        };
        r.map_err(RuntimeError::driver("upload input"))?;
        self.globals[buffer].ready = true;
        Ok(())
    }

    /// Uploads global input `buffer` from f64 values (converted to the buffer's dtype).
    pub fn upload_input_f64(&mut self, buffer: usize, values: &[f64]) -> Result<()> {
        let dtype = self.global(buffer)?.dtype;
        self.upload_input(buffer, &HostData::from_f64(values, dtype))
    }

    /// Downloads global buffer `buffer` (after [`CudaExecutor::run`]). Under a launcher only
    /// the pieces of this process's ranks are written (the rest reads as NaN).
    pub fn download(&self, buffer: usize) -> Result<HostData> {
        let g = self.global(buffer)?;
        self.synchronize_all("synchronize before download")?;
        let n = g.numel();
        let ptr = g.own_ptr(&self.plan.buffers[buffer].name)?;
        // SAFETY: the allocation holds `n` elements of the buffer's dtype, on the main
        // device, whose context is current.
        let r = unsafe {
            match g.dtype {
                DType::F32 => {
                    let mut v = vec![0f32; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, ptr).map(|_| HostData::F32(v))
                }
                DType::F64 => {
                    let mut v = vec![0f64; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, ptr).map(|_| HostData::F64(v))
                }
                DType::BF16 | DType::F16 => {
                    let mut v = vec![0u16; n];
                    cudarc::driver::result::memcpy_dtoh_sync(&mut v, ptr)
                        .map(|_| HostData::Bits16(v))
                }
            }
        };
        r.map_err(RuntimeError::driver("download"))
    }

    /// Downloads global buffer `buffer` with its dtype (see [`CudaExecutor::download`]).
    pub fn download_buffer(&self, buffer: usize) -> Result<HostBuffer> {
        Ok(HostBuffer {
            dtype: self.global(buffer)?.dtype,
            data: self.download(buffer)?,
        })
    }

    /// Downloads global buffer `buffer` as f64 (see [`CudaExecutor::download`]).
    pub fn download_f64(&self, buffer: usize) -> Result<Vec<f64>> {
        let dtype = self.global(buffer)?.dtype;
        Ok(self.download(buffer)?.to_f64(dtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_driver::{Compiler, Schedule};

    #[test]
    fn host_inputs_hold_the_cpu_inputs_in_their_dtype() {
        let text = "commir.mesh @m shape [1]
commir.kernel @g on @m {
  commir.axis @i = 300 spatial
  commir.axis @j = 700 managed
  commir.buffer @A : [@i, @j] bf16 in
  commir.buffer @B : [@j] f16 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<bf16>
  %b = commir.load @B[@j] : !commir.tile<f16>
  %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<bf16>, !commir.tile<f16>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
";
        let plan = Compiler::new()
            .compile("g.mlir", text, &Schedule::default())
            .unwrap();
        let want = crate::cpu::random_inputs(&plan, 9);
        let got = HostBuffer::random_inputs(&plan, 9);
        assert_eq!(got.len(), 2);
        for (name, w) in &want {
            let g = &got[name];
            assert_eq!(g.len(), w.len());
            assert_eq!(&g.slice_f64(0, g.len()), w, "{name}");
            assert_eq!(g.data.to_f64(g.dtype), *w, "{name}");
            assert_eq!(HostData::from_f64(w, g.dtype), g.data, "{name}");
        }
    }
}
