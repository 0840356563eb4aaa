//! Prints a CommIR file in custom and generic form (development aid).
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let text = std::fs::read_to_string(&path).expect("read");
    let reg = mercury_commir::registry();
    let t = std::time::Instant::now();
    match mercury_ir::parse_str(&reg, &path, &text) {
        Ok(m) => {
            let s = mercury_ir::print_op(&reg, &m, mercury_ir::PrintOptions::default());
            let dt = t.elapsed();
            print!("{s}");
            print!(
                "{}",
                mercury_ir::print_op(
                    &reg,
                    &m,
                    mercury_ir::PrintOptions {
                        generic: true,
                        ..Default::default()
                    }
                )
            );
            eprintln!("parse+print: {dt:?}");
        }
        Err(d) => eprint!("{}", d.render()),
    }
}
