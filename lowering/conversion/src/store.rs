//! `commir.store`: the tile is copied into the rank's slot of that output tile, or written there
//! directly by the elementwise program that computes it.

use crate::compute::StageCx;
use crate::context::{err, key, partition_conflict, to_dtype, Event, Lowering, PARTITION_RULE};
use crate::tile::{uses, uses_after};
use mercury_commir::Role;
use mercury_ir::Diagnostic;
use mercury_plan::{ComputeOp, DType, SlotInit, TileOp};

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
        // A temp buffer keeps its element type (the tile a later load reads, e.g. a bf16 GEMM
        // operand); outputs are stored in f32 and converted later: a bf16 output on its holder
        // before an end reshard or a delivery send moves it (`epilogue.rs`, `deliver.rs`),
        // otherwise by the final copy into the output.
        let dtype = match self.k.buffer(buffer) {
            Some(b) if b.role == Role::Temp => to_dtype(&b.dtype),
            _ => DType::F32,
        };
        let single = uses(cx, *value) == 1;
        let temp = self.k.buffer(buffer).is_some_and(|b| b.role == Role::Temp);
        let rb = &mut self.ranks[cx.r];
        // A skipped value (computed from a fully masked causal block that the body leaves out,
        // `mask.rs`) stored into a temp skips its loads of that tile too. The mask rules
        // followed it through the temp (a load of another tile, or before the store, is
        // refused there); into an output it cannot be skipped and has been refused.
        if let Some(clash) = partition_conflict(rb, cx.r, buffer, bx, None) {
            return Err(err(
                loc,
                format!("this store writes {bx} of '@{buffer}' on rank {}, which {clash}: {PARTITION_RULE}", cx.r),
            ));
        }
        let Some(src) = cx
            .operands(std::slice::from_ref(value), loc)?
            .map(|mut v| v.remove(0))
        else {
            if temp {
                rb.skipped.insert((buffer.clone(), key(bx)), bx.clone());
                return Ok(());
            }
            return Err(err(loc, "stored value is not available"));
        };
        rb.skipped.remove(&(buffer.clone(), key(bx)));
        let s = match rb.stored.get(&(buffer.clone(), key(bx))) {
            Some((_, s)) => *s,
            None => {
                let s = rb.slot(
                    format!("{buffer}.out"),
                    dtype,
                    bx.extent.clone(),
                    SlotInit::Uninit,
                );
                rb.stored.insert((buffer.clone(), key(bx)), (bx.clone(), s));
                s
            }
        };
        let dst = rb.whole(s);
        // A value loaded from this tile before and read after this store (`%t = load T; store
        // f(%t) into T; ... %t`) is a view of the slot the store overwrites: it is copied
        // aside first, or it would read the new contents (a twelfth new-user pass: Y = X * X
        // for Y = exp(X), exit 0, and --check agreed, its reference lowered alike).
        let live: Vec<(mercury_ir::ValueId, mercury_plan::View)> = cx
            .values
            .iter()
            .filter(|(v, view)| view.slot == s && uses_after(cx, **v) > 0)
            .map(|(v, view)| (*v, view.clone()))
            .collect();
        let saved = !live.is_empty();
        for (v, view) in live {
            let copy = rb.slot(
                format!("{buffer}.saved"),
                rb.slots[s].dtype,
                view.region.extent.clone(),
                SlotInit::Uninit,
            );
            let whole = rb.whole(copy);
            rb.stage(cx.ps).compute.push(ComputeOp::Copy {
                src: view,
                dst: whole.clone(),
            });
            cx.values.insert(v, whole);
        }
        // The elementwise program that computed the value writes the stored tile itself (not
        // when a value was just copied aside from it: the copy reads the tile as it was).
        if let (
            false,
            Some(ComputeOp::Tile {
                tile: TileOp::Elementwise { .. },
                output,
                ..
            }),
        ) = (saved, rb.stage(cx.ps).compute.last_mut())
        {
            if single && *output == src && output.region.extent == dst.region.extent {
                *output = dst;
                return Ok(());
            }
        }
        // A tile stored back where it was loaded from (`%t = load T; store %t into T`) is there.
        if src != dst {
            rb.stage(cx.ps).compute.push(ComputeOp::Copy { src, dst });
        }
        Ok(())
    }
}
