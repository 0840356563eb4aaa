//! `replicate{buffer=K axis=j}`: makes buffer K replicated along the dimension bound to axis j
//! (every dimension without `axis`). A replicated read needs no transfer inside the loop nest
//! (the lowering gathers it first when it starts sharded). An output's declared placement is a
//! contract: replicating an output declared sharded is refused (see `parallelize`).

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `replicate`.
    pub struct Replicate = "replicate", "Replicate a buffer along an axis' dimension (or entirely)", {
        buffer: String => "the buffer",
        axis: String = "" => "the axis whose dimension is replicated (default: all)",
    }
}

impl KernelPass for Replicate {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let buf = m.buffer(&self.buffer).ok_or_else(|| {
            err_at(
                &m.loc,
                format!(
                    "replicate: '@{}' is not a buffer of '@{}'",
                    self.buffer, m.name
                ),
            )
        })?;
        let mut s = buf.sharding.clone();
        if self.axis.is_empty() {
            s.iter_mut().for_each(Vec::clear);
        } else {
            let d = buf.dim_of_axis(&self.axis).ok_or_else(|| {
                err_at(
                    &buf.loc,
                    format!(
                        "replicate: '@{}' is not bound to axis '@{}'",
                        self.buffer, self.axis
                    ),
                )
            })?;
            s[d].clear();
        }
        // An output's declared placement is the operator's contract: refuse to change it.
        let to = mercury_commir::Placement::new(s.clone(), buf.placement().splits);
        keep_output_contract("replicate", buf, &to)?;
        let k = kernel_mut(module, &m.name);
        let op = buffer_op_mut(k, &self.buffer).and_then(BufferOp::cast);
        set_sharding(&mut op.expect("buffer"), &s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `replicate` without its `keep_output_contract`: the pass a newcomer writes from the
    /// worked example when they leave the check out.
    struct Careless;

    impl KernelPass for Careless {
        fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
            let k = kernel_mut(module, &m.name);
            let op = buffer_op_mut(k, "C").and_then(BufferOp::cast);
            set_sharding(&mut op.expect("buffer"), &[vec![], vec![]]);
            Ok(())
        }
    }

    #[test]
    fn the_adapter_refuses_a_pass_that_re_places_an_output() {
        let text = "commir.mesh @m shape [2]
commir.kernel @g on @m {
  commir.axis @i = 4 spatial
  commir.axis @j = 4 spatial
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @C : [@i, @j] f32 out sharding [S(0), R]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  commir.store %a into @C[@i, @j] : !commir.tile<f32>
}
";
        let reg = mercury_commir::registry();
        let mut module = mercury_ir::parse_str(&reg, "t.mlir", text).expect("parses");
        let e = Careless.apply_to(&mut module, "g").expect_err("refused");
        assert!(
            e.message
                .contains("the pass changed the declared placement of the output '@C'"),
            "{}",
            e.message
        );
    }
}
