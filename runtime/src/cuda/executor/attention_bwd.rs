//! The attention backward's patch check when an executor is built: every `attention_bwd`
//! block must be one cuDNN's fused backward computes (its plan is built and cached then, so
//! none is built while the schedule runs); there is no other GPU implementation.

use super::attention::cudnn_patch;
use super::{AttnBackend, DeviceRes, ExecOptions};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::ops::{self, ComputeLaunch};

/// Checks the attention backward blocks of one rank's `stages` on `dev` (see the module docs);
/// the error names the shape and why (cuDNN's refusal, or why no cuDNN is loaded).
pub(super) fn check_attention_bwd(
    dev: &DeviceRes,
    stages: &[Vec<ComputeLaunch>],
    opts: &ExecOptions,
) -> Result<()> {
    for op in stages.iter().flatten() {
        let ComputeLaunch::AttentionBwd(l) = op else {
            continue;
        };
        let why = match &dev.cudnn {
            Some(c) => match ops::attention_bwd_support(c, l) {
                Ok(()) => continue,
                Err(e) => e,
            },
            None if opts.attention == AttnBackend::Nvrtc => format!(
                "attention_bwd {}: {}: cuDNN is not used (--attention nvrtc) and the NVRTC \
                 kernel has no backward",
                l.shape(),
                ops::ATTENTION_BWD_REFUSED
            ),
            None => format!(
                "attention_bwd {}: {}: no cuDNN: {}",
                l.shape(),
                ops::ATTENTION_BWD_REFUSED,
                cudnn_patch(&dev.ctx)
                    .err()
                    .unwrap_or_else(|| "not loaded".into())
            ),
        };
        return Err(RuntimeError::Unsupported(why));
    }
    Ok(())
}
