//! `commir.store`: the tile is copied into the rank's slot of that output tile.

use crate::compute::StageCx;
use crate::context::{err, key, Event, Lowering};
use mercury_ir::Diagnostic;
use mercury_plan::{ComputeOp, DType, SlotInit};

impl Lowering<'_> {
    /// Lowers one store event of `cx`'s rank and stage.
    pub(crate) fn lower_store(&mut self, cx: &mut StageCx, e: &Event) -> Result<(), Diagnostic> {
        let Event::Store {
            value,
            buffer,
            bx,
            loc,
        } = e
        else {
            return Ok(());
        };
        let rb = &mut self.ranks[cx.r];
        let src = cx
            .values
            .get(value)
            .cloned()
            .ok_or_else(|| err(loc, "stored value is not available"))?;
        let s = match rb.stored.get(&(buffer.clone(), key(bx))) {
            Some((_, s)) => *s,
            None => {
                let s = rb.slot(
                    format!("{buffer}.out"),
                    DType::F32,
                    bx.extent.clone(),
                    SlotInit::Uninit,
                );
                rb.stored.insert((buffer.clone(), key(bx)), (bx.clone(), s));
                s
            }
        };
        let dst = rb.whole(s);
        rb.stage(cx.ps).compute.push(ComputeOp::Copy { src, dst });
        Ok(())
    }
}
