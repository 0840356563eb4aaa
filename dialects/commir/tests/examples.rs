//! Every example round-trips to a fixed point and verifies.

use mercury_ir::{parse_str, print_op, verify, PrintOptions};

#[test]
fn examples_roundtrip_and_verify() {
    let reg = mercury_commir::registry();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("mlir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let m = parse_str(&reg, &path.display().to_string(), &text)
            .unwrap_or_else(|d| panic!("{}", d.render()));
        verify(&reg, &m).unwrap_or_else(|d| panic!("{}", d.render()));
        mercury_commir::kernels(&m).unwrap_or_else(|d| panic!("{}", d.render()));
        let once = print_op(&reg, &m, PrintOptions::default());
        let m2 =
            parse_str(&reg, "printed", &once).unwrap_or_else(|d| panic!("{}\n{once}", d.render()));
        let twice = print_op(&reg, &m2, PrintOptions::default());
        assert_eq!(once, twice, "{} is not a fixed point", path.display());
        let generic = print_op(
            &reg,
            &m,
            PrintOptions {
                generic: true,
                ..Default::default()
            },
        );
        let m3 = parse_str(&reg, "generic", &generic)
            .unwrap_or_else(|d| panic!("{}\n{generic}", d.render()));
        assert_eq!(
            print_op(&reg, &m3, PrintOptions::default()),
            once,
            "generic form of {} differs",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 1, "no examples found");
}
