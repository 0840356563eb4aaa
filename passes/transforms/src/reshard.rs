//! `reshard{buffer=Q sharding=R,S(0),R,R at=begin|end}`: changes a buffer's placement at the
//! start of the kernel (inputs) or at its end (outputs). Lowered to an all-to-all (or a gather
//! or a local slice) between the two shardings; with parallelized heads this is Ulysses.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_ir::pass::OptionValue;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `reshard`.
    pub struct Reshard = "reshard", "Change a buffer's placement at the start or the end of the kernel (all-to-all)", {
        buffer: String => "the buffer",
        sharding: ShardingOption => "per dimension R or S(levels), comma separated",
        at: At = "begin" => "begin or end of the kernel",
    }
}

impl KernelPass for Reshard {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let buf = m.buffer(&self.buffer).ok_or_else(|| {
            err_at(
                &m.loc,
                format!("reshard: '@{}' is not a buffer", self.buffer),
            )
        })?;
        mercury_commir::model::check_sharding(
            &self.buffer,
            &self.sharding.0,
            &m.shape(buf),
            &m.mesh,
        )
        .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("reshard: {e}")))?;
        let k = kernel_mut(module, &m.name);
        let loc = k.loc.clone();
        let op = new_reshard(&self.buffer, &self.sharding.0, &loc);
        // After the reshards already at that end, so a script's order is kept.
        let at = if self.at == At::End {
            k.body(0).len()
        } else {
            let f = first_stmt(k);
            f + k.body(0)[f..].iter().take_while(|o| is_reshard(o)).count()
        };
        k.body_mut(0).insert(at, op);
        Ok(())
    }
}

/// A placement option: per dimension `R` or `S(levels)` (see [`parse_sharding_option`]).
pub struct ShardingOption(pub Vec<Vec<usize>>);

impl OptionValue for ShardingOption {
    fn parse_option(_: &str, v: &str) -> Result<ShardingOption, String> {
        parse_sharding_option(v).map(ShardingOption)
    }
}

/// Where a reshard goes: at the start of the kernel or at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Begin,
    End,
}

impl OptionValue for At {
    fn parse_option(k: &str, v: &str) -> Result<At, String> {
        match v {
            "begin" => Ok(At::Begin),
            "end" => Ok(At::End),
            v => Err(format!("option '{k}' must be begin or end, got '{v}'")),
        }
    }
}

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
