//! `reshard{buffer=Q sharding=R,S(0),R,R at=begin|end}`: changes a buffer's placement at the
//! start of the kernel (inputs) or at its end (outputs). Lowered to an all-to-all (or a gather
//! or a local slice) between the two shardings; with parallelized heads this is Ulysses.

use crate::util::*;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "reshard",
    summary: "Change a buffer's placement at the start or the end of the kernel (all-to-all)",
    options: &[
        PassOptionDef {
            name: "buffer",
            help: "the buffer",
            default: None,
        },
        PassOptionDef {
            name: "sharding",
            help: "per dimension R or S(levels), comma separated",
            default: None,
        },
        PassOptionDef {
            name: "at",
            help: "begin (default) or end",
            default: Some("begin"),
        },
        PassOptionDef {
            name: "kernel",
            help: "kernel to transform (default: all)",
            default: Some(""),
        },
    ],
    create: |o: &PassOptions| {
        let sharding = parse_sharding_option(o.get("sharding"))?;
        let at_end = match o.get("at") {
            "begin" => false,
            "end" => true,
            v => return Err(format!("option 'at' must be begin or end, got '{v}'")),
        };
        Ok(Box::new(Reshard {
            buffer: opt_name(o.get("buffer")),
            sharding,
            at_end,
            kernel: o.get("kernel").to_string(),
        }))
    },
};

/// Parses `R,S(0),S(0|1),R` (levels of one dimension separated by `|` or `;`).
pub fn parse_sharding_option(s: &str) -> Result<Vec<Vec<usize>>, String> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    let mut items = Vec::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    for it in items {
        let it = it.trim();
        if it == "R" {
            out.push(vec![]);
        } else if let Some(inner) = it.strip_prefix("S(").and_then(|r| r.strip_suffix(')')) {
            let levels = inner
                .split([',', '|', ';'])
                .map(|x| {
                    x.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("bad mesh level '{x}' in '{it}'"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            out.push(levels);
        } else {
            return Err(format!("sharding entries are R or S(levels), got '{it}'"));
        }
    }
    Ok(out)
}

pub struct Reshard {
    pub buffer: String,
    pub sharding: Vec<Vec<usize>>,
    pub at_end: bool,
    pub kernel: String,
}

impl Pass for Reshard {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let m = model(module, &name)?;
            let buf = m.buffer(&self.buffer).ok_or_else(|| {
                Diagnostic::error(
                    m.loc.clone(),
                    format!("reshard: '@{}' is not a buffer", self.buffer),
                )
            })?;
            mercury_commir::model::check_sharding(
                &self.buffer,
                &self.sharding,
                &m.shape(buf),
                &m.mesh,
            )
            .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("reshard: {e}")))?;
            let k = kernel_mut(module, &name);
            let loc = k.loc.clone();
            let op = new_reshard(&self.buffer, &self.sharding, &loc);
            // After the reshards already at that end, so a script's order is kept.
            let at = if self.at_end {
                k.body(0).len()
            } else {
                let f = first_stmt(k);
                f + k.body(0)[f..].iter().take_while(|o| is_reshard(o)).count()
            };
            k.body_mut(0).insert(at, op);
            model(module, &name)?;
        }
        Ok(())
    }
}
