use mercury_driver::{Compiler, Schedule};
use mercury_runtime::cpu::{execute, random_inputs, relative_error};

fn attention(mesh: &str, s: usize, causal: bool) -> String {
    format!(
        r#"commir.mesh @mesh shape {mesh}
commir.kernel @attn on @mesh {{
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = {s} spatial
  commir.axis @j = {s} managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in
  commir.buffer @K : [@b, @h, @j, 4] f32 in
  commir.buffer @V : [@b, @h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {{causal = {causal}}} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}}
"#
    )
}

#[test]
fn shift_shard_matches_local() {
    let c = Compiler::new();
    for (mesh, causal) in [
        ("[4]", false),
        ("[4]", true),
        ("[2, 2]", false),
        ("[2, 2]", true),
    ] {
        let text = attention(mesh, 16, causal);
        let m = c
            .parse("a.mlir", &text)
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let base =
            mercury_conversion::lower_module(&m, None).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut m2 = m.clone();
        c.schedule(&mut m2, &Schedule::shift_shard())
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let plan = mercury_conversion::lower_module(&m2, None)
            .unwrap_or_else(|d| panic!("{}", d.render()));
        eprintln!("{}", mercury_conversion::report::comm_plan(&plan, false));
        let inputs = random_inputs(&base, 7);
        let a = execute(&base, &inputs).unwrap();
        let b = execute(&plan, &inputs).unwrap();
        let e = relative_error(&b, &a);
        assert!(e < 1e-12, "mesh {mesh} causal {causal}: error {e}");
    }
}
