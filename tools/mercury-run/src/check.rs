//! Comparison of outputs with a reference: [`compare`] (from the runtime) and what each rank
//! is held to.

pub use mercury_runtime::check::{compare, Compared, Values};

/// The outputs of `declared` (the unscheduled kernel) with, per rank, the positions its
/// declared placement gives the rank: what `--check` holds each rank's pieces to. Ranks are
/// numbered row-major over the declared mesh, as the plan numbers them; `Err` when the plan
/// runs on another number of ranks.
pub fn declared_outputs(
    declared: &mercury_commir::Kernel,
    num_ranks: usize,
) -> Result<Vec<mercury_runtime::check::DeclaredOutput>, String> {
    use mercury_commir::Role;
    let mesh = &declared.mesh.shape;
    let n: usize = mesh.iter().product();
    if n != num_ranks {
        return Err(format!(
            "the plan runs on {num_ranks} ranks but the declared mesh {mesh:?} has {n}"
        ));
    }
    Ok(declared
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::Out | Role::InOut))
        .map(|b| {
            let shape = declared.shape(b);
            let placement = b.placement();
            let runs = (0..n)
                .map(|r| {
                    let coords = mercury_plan::coords_of(mesh, r);
                    shape
                        .iter()
                        .enumerate()
                        .map(|(d, &size)| {
                            mercury_commir::placement::dim_runs(
                                size,
                                &placement.dim(d),
                                mesh,
                                &coords,
                            )
                        })
                        .collect()
                })
                .collect();
            mercury_runtime::check::DeclaredOutput {
                name: b.name.clone(),
                shape,
                runs,
            }
        })
        .collect())
}
