//! The contracts of patches and passes, end to end: operators of the kinds that used to give
//! wrong numbers, panic or lose their layout either compute what their unscheduled form
//! computes on the CPU executor (fresh random inputs, several schedules each), or are refused
//! with a located diagnostic that names the cause.

use mercury_ir::pass::{PassManager, PassRegistry};
use mercury_ir::{parse_str, Operation, Registry};
use mercury_runtime::cpu::{execute, random_inputs, relative_error};

fn registries() -> (Registry, PassRegistry) {
    let mut passes = PassRegistry::new();
    mercury_passes::register_all(&mut passes);
    (mercury_commir::registry(), passes)
}

fn schedule(
    reg: &Registry,
    passes: &PassRegistry,
    m: &mut Operation,
    steps: &str,
) -> Result<(), String> {
    if steps.is_empty() {
        return Ok(());
    }
    let mut pm = PassManager::new();
    pm.add_pipeline(passes, &format!("builtin.module({steps})"))?;
    pm.run(m, reg).map_err(|d| d.render())
}

/// Lowers `text` unscheduled and under `steps`, runs both on the same inputs and returns the
/// relative error of the scheduled outputs.
fn error_under(text: &str, steps: &str, seed: u64) -> Result<f64, String> {
    let (reg, passes) = registries();
    let module = parse_str(&reg, "op.mlir", text).map_err(|d| d.render())?;
    let base = mercury_conversion::lower_module(&module, None).map_err(|d| d.render())?;
    let mut m = module.clone();
    schedule(&reg, &passes, &mut m, steps)?;
    let plan = mercury_conversion::lower_module(&m, None).map_err(|d| d.render())?;
    let inputs = random_inputs(&base, seed);
    let want = execute(&base, &inputs).map_err(|e| e.to_string())?;
    let got = execute(&plan, &inputs).map_err(|e| e.to_string())?;
    Ok(relative_error(&got, &want))
}

fn assert_computes(what: &str, text: &str, schedules: &[&str]) {
    for (i, s) in schedules.iter().enumerate() {
        match error_under(text, s, 7 + i as u64) {
            Ok(e) => assert!(e < 1e-9, "{what} under [{s}]: relative error {e}"),
            Err(m) => panic!("{what} under [{s}] was refused:\n{m}"),
        }
    }
}

fn assert_refused(what: &str, text: &str, steps: &str, message: &str) {
    match error_under(text, steps, 1) {
        Ok(e) => panic!("{what} under [{steps}] was accepted (relative error {e})"),
        Err(m) => {
            assert!(
                m.contains(message),
                "{what} under [{steps}]: expected '{message}' in\n{m}"
            );
            assert!(
                m.contains("op.mlir:"),
                "{what}: the refusal is not located:\n{m}"
            );
        }
    }
}

/// Attention on `[heads, sequence, head_dim]` tiles (no batch dimension), 3 heads, 48
/// positions, head dim 4, value head dim `dv`, on a mesh of `mesh`.
fn attention_3d(mesh: &str, causal: bool, dv: usize) -> String {
    format!(
        "commir.mesh @mesh shape {mesh}
commir.kernel @a3 on @mesh {{
  commir.axis @h = 3 spatial
  commir.axis @s = 48 spatial
  commir.axis @t = 48 managed
  commir.buffer @Q : [@h, @s, 4] f64 in
  commir.buffer @K : [@h, @t, 4] f64 in
  commir.buffer @V : [@h, @t, {dv}] f64 in
  commir.buffer @O : [@h, @s, {dv}] f64 out
  %q = commir.load @Q[@h, @s] : !commir.tile<f64>
  %k = commir.load @K[@h, @t] : !commir.tile<f64>
  %v = commir.load @V[@h, @t] : !commir.tile<f64>
  %o, %l = commir.patch \"attention\" (%q, %k, %v) {{causal = {causal}}} : (!commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>) -> (!commir.tile<f64>, !commir.tile<f64>)
  commir.reduce lse_merge %o, %l into @O[@h, @s] : !commir.tile<f64>, !commir.tile<f64>
}}
"
    )
}

const RING3: &str = "tile{axis=s factor=3 outer=s0 inner=s_t}, parallelize{axis=s0 level=0}, tile{axis=t factor=3 outer=t0 inner=t_t}, shift{axis=t0 by=s0}, shard{buffer=K axis=t0}, shard{buffer=V axis=t0}";
const TREE3: &str = "tile{axis=t factor=3 outer=t0 inner=t_t}, parallelize{axis=t0 level=0}";
const BLOCKS: &str =
    "tile{axis=s factor=4 outer=s0 inner=s_t}, tile{axis=t factor=6 outer=t0 inner=t_t}";

#[test]
fn causal_attention_on_3d_tiles_masks_by_sequence_position() {
    let text = attention_3d("[3]", true, 4);
    assert_computes(
        "causal [h, s, d] attention",
        &text,
        &["shift-shard", RING3, TREE3, BLOCKS],
    );
}

#[test]
fn value_head_dim_may_differ_from_query_head_dim() {
    for causal in [false, true] {
        let text = attention_3d("[3]", causal, 6);
        assert_computes(
            "attention with dv 6, d 4",
            &text,
            &["", "shift-shard", RING3, TREE3, BLOCKS],
        );
    }
}

#[test]
fn splitting_the_head_dim_of_attention_is_refused() {
    let text = "commir.mesh @mesh shape [2]
commir.kernel @a on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @s = 8 spatial
  commir.axis @t = 8 managed
  commir.axis @e = 6 spatial
  commir.buffer @Q : [@h, @s, @e] f64 in
  commir.buffer @K : [@h, @t, @e] f64 in
  commir.buffer @V : [@h, @t, @e] f64 in
  commir.buffer @O : [@h, @s, @e] f64 out
  %q = commir.load @Q[@h, @s, @e] : !commir.tile<f64>
  %k = commir.load @K[@h, @t, @e] : !commir.tile<f64>
  %v = commir.load @V[@h, @t, @e] : !commir.tile<f64>
  %o, %l = commir.patch \"attention\" (%q, %k, %v) : (!commir.tile<f64>, !commir.tile<f64>, !commir.tile<f64>) -> (!commir.tile<f64>, !commir.tile<f64>)
  commir.reduce lse_merge %o, %l into @O[@h, @s, @e] : !commir.tile<f64>, !commir.tile<f64>
}
";
    assert_computes(
        "attention with an axis head dim",
        text,
        &["", "shift-shard"],
    );
    for steps in [
        "tile{axis=e factor=2 outer=e0 inner=e_t}",
        "tile{axis=e factor=2 outer=e0 inner=e_t}, parallelize{axis=e0 level=0}",
        "tile{axis=e factor=3 outer=e0 inner=e_t}, tile{axis=s factor=2 outer=s0 inner=s_t}",
    ] {
        assert_refused(
            "a split head dim",
            text,
            steps,
            "the head dim of q is split",
        );
    }
}

/// A two-layer MLP whose hidden activation lives in a `temp` buffer.
const MLP_TEMP: &str = "commir.mesh @mesh shape [2, 2]
commir.kernel @mlp on @mesh {
  commir.axis @t = 12 spatial
  commir.axis @c = 6 managed
  commir.axis @f = 8 managed
  commir.axis @o = 4 spatial
  commir.buffer @X : [@t, @c] f64 in
  commir.buffer @W1 : [@c, @f] f64 in
  commir.buffer @Hid : [@t, @f] f64 temp
  commir.buffer @W2 : [@f, @o] f64 in
  commir.buffer @Y : [@t, @o] f64 out
  %x = commir.load @X[@t, @c] : !commir.tile<f64>
  %w1 = commir.load @W1[@c, @f] : !commir.tile<f64>
  %h = commir.patch \"gemm\" (%x, %w1) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>
  commir.store %h into @Hid[@t, @f] : !commir.tile<f64>
  %h2 = commir.load @Hid[@t, @f] : !commir.tile<f64>
  %w2 = commir.load @W2[@f, @o] : !commir.tile<f64>
  %y = commir.patch \"gemm\" (%h2, %w2) : (!commir.tile<f64>, !commir.tile<f64>) -> !commir.tile<f64>
  commir.reduce add %y into @Y[@t, @o] : !commir.tile<f64>
}
";

#[test]
fn temp_buffers_are_lowered_or_refused_with_a_location() {
    assert_computes(
        "MLP through a temp buffer",
        MLP_TEMP,
        &[
            "",
            "tile{axis=f factor=2 outer=f0 inner=f_t}, parallelize{axis=f0 level=1}",
            "tile{axis=t factor=2 outer=t0 inner=t_t}, parallelize{axis=t0 level=0}, tile{axis=f factor=2 outer=f0 inner=f_t}, parallelize{axis=f0 level=1}",
            "tile{axis=t factor=3 outer=t0 inner=t_t}",
            "shift-shard",
        ],
    );
    // Splitting the first contraction makes the stored activation a partial sum.
    assert_refused(
        "a partial sum stored into a temp buffer",
        MLP_TEMP,
        "tile{axis=c factor=2 outer=c0 inner=c_t}",
        "store: the value is only a partial result",
    );
    let reduced = MLP_TEMP.replace(
        "commir.store %h into @Hid[@t, @f]",
        "commir.reduce add %h into @Hid[@t, @f]",
    );
    assert_refused(
        "a reduction into a temp buffer",
        &reduced,
        "",
        "reducing into the temp buffer '@Hid' is not supported",
    );
}

/// A value loaded from a temp tile and read after that tile is stored again keeps what it
/// loaded (`%t = load T; store exp(%t) into T; %t2 = load T; ... %t`): it used to be a view of
/// the slot the second store overwrote, so `%t` read exp(X) (relative error 2.3 against the
/// operator's meaning, exit 0; twelfth new-user pass). The expected values are computed here
/// from the inputs, not by another lowering, which shared the bug.
#[test]
fn a_loaded_temp_survives_a_later_store_into_its_tile() {
    let (inputs, out) = run_as_written(include_str!("inputs/temp-reload.mlir"), 5);
    let x = &inputs["X"];
    for (i, xi) in x.iter().enumerate() {
        assert!(
            (out["Z"][i] - xi).abs() < 1e-12,
            "Z[{i}] = {} for X = {xi}",
            out["Z"][i]
        );
        let y = xi + xi.exp();
        assert!(
            (out["Y"][i] - y).abs() < 1e-12 * y.abs().max(1.0),
            "Y[{i}] = {} for X + exp(X) = {y}",
            out["Y"][i]
        );
    }
}

/// The same aliasing through a shift-reduce (a private temp reduced to its owner inside an
/// inner loop, 2 ranks): `%t` loaded from T, T stored again, then `%t` sent. Y = sum_p exp(X[p])
/// and Z = sum_p X[p]^2, computed here from the inputs.
#[test]
fn a_loaded_temp_survives_a_later_store_under_shift_reduce() {
    let (inputs, out) = run_as_written(include_str!("inputs/temp-reload-shift-reduce.mlir"), 9);
    let (x, n) = (&inputs["X"], 8 * 4);
    for i in 0..n {
        let (a, b) = (x[i], x[n + i]);
        let (y, z) = (a.exp() + b.exp(), a * a + b * b);
        assert!(
            (out["Y"][i] - y).abs() < 1e-12 * y,
            "Y[{i}] = {}, want {y}",
            out["Y"][i]
        );
        assert!(
            (out["Z"][i] - z).abs() < 1e-12 * z.max(1.0),
            "Z[{i}] = {}, want {z}",
            out["Z"][i]
        );
    }
}

/// Lowers `text` as written (no schedule) and runs it on the CPU executor on random inputs of
/// `seed`: the inputs and the outputs, for tests that compute the expected values themselves.
fn run_as_written(
    text: &str,
    seed: u64,
) -> (
    std::collections::HashMap<String, Vec<f64>>,
    std::collections::HashMap<String, Vec<f64>>,
) {
    let (reg, _) = registries();
    let module = parse_str(&reg, "op.mlir", text).unwrap_or_else(|d| panic!("{}", d.render()));
    let plan = mercury_conversion::lower_module(&module, None)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let inputs = random_inputs(&plan, seed);
    let out = execute(&plan, &inputs).unwrap_or_else(|e| panic!("{e}"));
    (inputs, out)
}
