//! `reshard{buffer=Q sharding=R,S(0),R,R at=begin|end}`: changes a buffer's placement at the
//! start of the kernel (inputs) or at its end (outputs). Lowered to an all-to-all (or a gather
//! or a local slice) between the two shardings; with parallelized heads this is Ulysses. To or
//! from a zigzag or striped placement (`S(zigzag(0))`, `S(striped(0;64))`) it is a permutation
//! of the positions: point-to-point transfers of exactly the runs that change rank. An output
//! ends in its declared placement: `at=end` to any other placement is refused.

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_commir::{Placement, Split};
use mercury_ir::pass::OptionValue;
use mercury_ir::{Diagnostic, Operation};
use std::collections::BTreeMap;

kernel_pass! {
    /// The options of `reshard`.
    pub struct Reshard = "reshard", "Change a buffer's placement at the start or the end of the kernel (all-to-all)", {
        buffer: String => "the buffer",
        sharding: ShardingOption => "per dimension R or S(levels), comma separated; a level is L, zigzag(L) or striped(L;B)",
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
        mercury_commir::model::check_placement(
            &self.buffer,
            &self.sharding.0,
            &m.shape(buf),
            &m.mesh,
        )
        .map_err(|e| Diagnostic::error(buf.loc.clone(), format!("reshard: {e}")))?;
        if self.at == At::End {
            // Where an output ends is its declared placement.
            keep_output_contract("reshard", buf, &self.sharding.0)?;
        }
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
pub struct ShardingOption(pub Placement);

impl OptionValue for ShardingOption {
    fn parse_option(k: &str, v: &str) -> Result<ShardingOption, String> {
        parse_sharding_option(v)
            .map(ShardingOption)
            .map_err(|e| format!("option '{k}': {e}"))
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

/// Splits `s` at the separators `seps` outside parentheses.
fn split_top(s: &str, seps: &[char]) -> Vec<String> {
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut items = Vec::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if depth == 0 && seps.contains(&c) => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    items
}

/// Parses `R,S(0),S(0|1),R` (levels of one dimension separated by `|` or `;`); a level is a
/// mesh dimension, `zigzag(L)` or `striped(L;B)` (`striped(L B)`, `striped(L,B)`).
pub fn parse_sharding_option(s: &str) -> Result<Placement, String> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let mut levels = Vec::new();
    let mut splits = BTreeMap::new();
    for it in split_top(s, &[',']) {
        let it = it.trim();
        if it == "R" {
            levels.push(vec![]);
            continue;
        }
        let Some(inner) = it.strip_prefix("S(").and_then(|r| r.strip_suffix(')')) else {
            return Err(format!("sharding entries are R or S(levels), got '{it}'"));
        };
        let mut ls = Vec::new();
        for lv in split_top(inner, &[',', '|', ';']) {
            let lv = lv.trim();
            let num = |x: &str| {
                x.trim().parse::<usize>().map_err(|_| {
                    format!(
                        "'{x}' in '{it}' is not a mesh level (a level is a mesh dimension's number, from 0)"
                    )
                })
            };
            let (l, split) = if let Some(a) =
                lv.strip_prefix("zigzag(").and_then(|r| r.strip_suffix(')'))
            {
                let parts: Vec<&str> = a
                    .split([',', ';', '|', ' '])
                    .filter(|x| !x.is_empty())
                    .collect();
                // `zigzag(0;)`: a chunk left out is an error, not one round.
                let trailing = a.trim_end().ends_with([',', ';', '|']);
                match parts.as_slice() {
                    [l] if !trailing => (num(l)?, Split::Zigzag),
                    [l, c] => {
                        let chunk = c.parse::<usize>().ok().filter(|c| *c > 0).ok_or_else(|| {
                            format!("the zigzag chunk '{c}' of '{lv}' must be a positive integer (zigzag(L;C): mesh level L, chunks of C positions)")
                        })?;
                        (num(l)?, Split::ZigzagChunks(chunk))
                    }
                    _ => {
                        return Err(format!(
                            "zigzag takes a level and optionally a chunk, zigzag(L) or zigzag(L;C), got '{lv}'"
                        ))
                    }
                }
            } else if let Some(a) = lv
                .strip_prefix("striped(")
                .and_then(|r| r.strip_suffix(')'))
            {
                let parts: Vec<&str> = a
                    .split([',', ';', '|', ' '])
                    .filter(|x| !x.is_empty())
                    .collect();
                let [l, b] = parts.as_slice() else {
                    return Err(format!(
                        "striped takes a level and a block, striped(L;B), got '{lv}'"
                    ));
                };
                let block = b.parse::<usize>().ok().filter(|b| *b > 0).ok_or_else(|| {
                        format!("the striped block '{b}' of '{lv}' must be a positive integer (striped(L;B): mesh level L, blocks of B positions)")
                    })?;
                (num(l)?, Split::Striped(block))
            } else {
                (num(lv)?, Split::Block)
            };
            // A level named twice is the verifier's to report (one placement per level).
            splits.entry(l).or_insert(split);
            ls.push(l);
        }
        levels.push(ls);
    }
    Ok(Placement::new(levels, splits))
}
