//! Snapshots of every known schedule applied to its example: the annotated IR and the
//! communication plan (review changes with `cargo insta review`).

use mercury_driver::{Compiler, Schedule};
use mercury_ir::{print_op, PrintOptions};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn scheduled(example: &str, schedule: &str) -> String {
    let c = Compiler::new();
    let reg = &c.registry;
    let text = std::fs::read_to_string(format!("{ROOT}/examples/{example}")).unwrap();
    let mut m = c
        .parse(example, &text)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let script = std::fs::read_to_string(format!("{ROOT}/examples/schedules/{schedule}")).unwrap();
    c.schedule(&mut m, &Schedule::script(&script))
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let plan =
        mercury_conversion::lower_module(&m, None).unwrap_or_else(|d| panic!("{}", d.render()));
    format!(
        "{}{}{}",
        print_op(reg, &m, PrintOptions::default()),
        mercury_conversion::report::comm_plan(&plan, false),
        mercury_conversion::report::memory(&plan)
    )
}

macro_rules! schedule_snapshot {
    ($name:ident, $example:literal, $schedule:literal) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(stringify!($name), scheduled($example, $schedule));
        }
    };
}

schedule_snapshot!(context_parallel, "attention.mlir", "context_parallel.sched");
schedule_snapshot!(ring_attention, "attention.mlir", "ring_attention.sched");
schedule_snapshot!(loongtrain, "attention_2x4.mlir", "loongtrain.sched");
schedule_snapshot!(tree_attention, "attention.mlir", "tree_attention.sched");
schedule_snapshot!(ulysses, "attention.mlir", "ulysses.sched");
schedule_snapshot!(usp, "attention_2x4.mlir", "usp.sched");
schedule_snapshot!(shift_reduce, "gemm_rs.mlir", "shift_reduce.sched");
schedule_snapshot!(megatron_rs, "gemm_rs.mlir", "megatron_rs.sched");
schedule_snapshot!(asynctp_ag_gemm, "ag_gemm.mlir", "asynctp_ag_gemm.sched");
