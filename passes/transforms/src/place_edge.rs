//! `place-edge{buffer=Q sharding=R,S(0),R,R}`: chooses where a buffer *between* two kernels of
//! a module lives. An edge (a buffer one kernel writes and a later kernel reads: docs/dialect.md,
//! "Modules of several kernels") is no contract with the module's caller, so its placement is a
//! schedule decision: the pass re-declares the buffer in that placement at every kernel that
//! declares it, the writer (which then delivers it there) and the readers (which then read it
//! there) alike, so the edge itself moves nothing. What a reader's schedule then reads
//! elsewhere, `reshard-edges` moves. Run it before the kernels' schedules (the graph-level
//! search writes it at the top of its module schedule).
//!
//! Refused, located at the buffer's first declaration: a buffer no kernel declares, a module
//! input (its first declaration reads it: the caller's placement), a module output (no kernel
//! reads what its last writer writes), a kernel already scheduled (a parallel or shifted loop, a
//! reshard: made for the old placement), and a placement that does not fit a declaring kernel's shape
//! and mesh.

use crate::reshard::parse_sharding_option;
use crate::util::*;
use mercury_commir::ops::BufferOp;
use mercury_commir::pass::kernel_mut;
use mercury_commir::{Placement, Role, Stmt};
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

/// The registration of `place-edge`.
pub static INFO: PassInfo = PassInfo {
    name: "place-edge",
    summary: "Choose the placement of a buffer between two kernels of a module (at its writer and readers alike)",
    options: &[
        PassOptionDef {
            name: "buffer",
            help: "the buffer an earlier kernel writes and a later one reads",
            default: None,
        },
        PassOptionDef {
            name: "sharding",
            help: "per dimension R or S(levels), comma separated (as reshard's)",
            default: None,
        },
    ],
    target: None,
    create: |o: &PassOptions| {
        let sharding = parse_sharding_option(o.get("sharding"))
            .map_err(|e| format!("option 'sharding': {e}"))?;
        Ok(Box::new(PlaceEdge {
            buffer: o.get("buffer").trim_start_matches('@').to_string(),
            sharding,
        }))
    },
};

/// `place-edge{buffer sharding}`: the buffer's placement at every kernel that declares it.
pub struct PlaceEdge {
    /// The edge buffer's name (without `@`).
    pub buffer: String,
    /// Its new placement, one entry per dimension.
    pub sharding: Placement,
}

impl Pass for PlaceEdge {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        let kernels = mercury_commir::kernels(module)?;
        let name = &self.buffer;
        let declaring: Vec<_> = kernels
            .iter()
            .filter_map(|k| k.buffer(name).map(|b| (k, b)))
            .collect();
        let Some(&(_, first)) = declaring.first() else {
            return Err(Diagnostic::error(
                module.loc.clone(),
                format!("place-edge: no kernel of the module declares '@{name}'"),
            ));
        };
        let refuse = |why: String| {
            Diagnostic::error(first.loc.clone(), format!("place-edge: '@{name}' {why}"))
        };
        if matches!(first.role, Role::In | Role::InOut) {
            return Err(refuse(
                "is an input of the module (its first kernel reads it): where it arrives is the caller's placement, not a schedule decision".into(),
            ));
        }
        let last_writer = declaring
            .iter()
            .rposition(|(_, b)| matches!(b.role, Role::Out | Role::InOut))
            .unwrap_or(0);
        if !declaring[last_writer + 1..]
            .iter()
            .any(|(_, b)| b.role == Role::In)
        {
            return Err(refuse(format!(
                "is an output of the module (no kernel reads it after '@{}' writes it): where it ends is the caller's placement, not a schedule decision",
                declaring[last_writer].0.name
            )));
        }
        for (k, b) in &declaring {
            let mut scheduled = k
                .loops()
                .iter()
                .any(|l| l.parallel.is_some() || l.shift.is_some());
            k.walk(&mut |s, _| scheduled |= matches!(s, Stmt::Reshard { .. }));
            if scheduled {
                return Err(Diagnostic::error(
                    b.loc.clone(),
                    format!(
                        "place-edge: the kernel '@{}' is already scheduled; place the edge '@{name}' before the kernels' schedules",
                        k.name
                    ),
                ));
            }
            mercury_commir::model::check_placement(name, &self.sharding, &k.shape(b), &k.mesh)
                .map_err(|e| Diagnostic::error(b.loc.clone(), format!("place-edge: {e}")))?;
        }
        for (k, _) in &declaring {
            let op = kernel_mut(module, &k.name);
            let buf = buffer_op_mut(op, name).expect("the model's buffer has its op");
            let mut view = BufferOp::cast(buf).expect("a buffer op");
            set_placement(&mut view, &self.sharding);
        }
        Ok(())
    }
}
