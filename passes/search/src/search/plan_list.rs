//! Candidates given directly as plans (JSON), the source of `mercury-tune --plans`.

use super::*;

/// Candidates given directly as plans: a JSON file holding a `Plan`, a list of plans, or a
/// list of `Candidate` objects (`{name, transform_script, annotated_ir?, plan}`).
pub struct PlanListSource {
    pub candidates: Vec<Candidate>,
    pub signature: String,
}

impl PlanListSource {
    pub fn from_json(text: &str, origin: &str) -> Result<Self, SourceError> {
        use serde_json::value::RawValue;
        let file = mercury_ir::SourceFile::new(origin, text);
        // Every error is located (`file:line:col: error:`): serde_json's own line and column
        // for the file, and for an item, its error's place inside the item moved to the
        // item's place in the file.
        let at = |offset: usize, msg: String| {
            SourceError::located(&mercury_ir::Diagnostic::error(file.location(offset), msg))
        };
        let json_error = |base: usize, part: &str, what: &str, e: serde_json::Error| {
            at(
                base + json_error_offset(part, &e),
                format!("{what}{}", json_message(&e)),
            )
        };
        let items: Vec<&RawValue> = if text.trim_start().starts_with('[') {
            serde_json::from_str(text).map_err(|e| json_error(0, text, "not valid JSON: ", e))?
        } else {
            vec![serde_json::from_str(text)
                .map_err(|e| json_error(0, text, "not valid JSON: ", e))?]
        };
        let mut candidates = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let part = item.get();
            // Where the item starts in `text` (a raw value borrows from it).
            let base = part.as_ptr() as usize - text.as_ptr() as usize;
            let fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(part)
                .map_err(|e| json_error(base, part, &format!("item {i} is not an object: "), e))?;
            let c = if fields.contains_key("plan") {
                serde_json::from_str::<Candidate>(part).map_err(|e| {
                    json_error(base, part, &format!("item {i} is not a candidate: "), e)
                })?
            } else {
                let plan: Plan = serde_json::from_str(part)
                    .map_err(|e| json_error(base, part, &format!("item {i} is not a plan: "), e))?;
                Candidate {
                    name: if plan.name.is_empty() {
                        format!("plan{i}")
                    } else {
                        plan.name.clone()
                    },
                    transform_script: format!("// plan given directly in {origin}\n"),
                    annotated_ir: String::new(),
                    plan,
                }
            };
            candidates.push(c);
        }
        let Some(first) = candidates.first() else {
            return Err(SourceError::new(format!("{origin}: no plans in the file")));
        };
        // The operator is what the plans compute: their global buffers.
        let bufs = |p: &Plan| -> String {
            p.buffers
                .iter()
                .map(|b| format!("{}:{:?}:{}:{:?}", b.name, b.shape, b.dtype.name(), b.role))
                .collect::<Vec<_>>()
                .join(",")
        };
        let sig = bufs(&first.plan);
        let (first_name, first_plan) = (first.name.clone(), first.plan.name.clone());
        if let Some(c) = candidates.iter().find(|c| bufs(&c.plan) != sig) {
            return Err(SourceError::new(format!(
                "{origin}: candidate '{}' computes different buffers than '{first_name}'",
                c.name
            )));
        }
        // Names are output file names: make them unique.
        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        for c in candidates.iter_mut() {
            let k = seen.entry(c.name.clone()).or_insert(0);
            *k += 1;
            if *k > 1 {
                c.name = format!("{}#{}", c.name, k);
            }
        }
        // The plans are the candidates: the key holds all of them (names, placements, steps),
        // so an edited plan file never takes an entry cached for another plan. (Before
        // 2026-12-03 it held the global buffers only, and an edited placement hit the old entry.)
        let plans: Vec<&Plan> = candidates.iter().map(|c| &c.plan).collect();
        let text = serde_json::to_string(&plans)
            .map_err(|e| SourceError::new(format!("{origin}: cannot print the plans: {e}")))?;
        Ok(PlanListSource {
            signature: format!(
                "plans {first_plan} [{sig}] fnv1a64:{:016x}",
                crate::fnv1a64(text.as_bytes())
            ),
            candidates,
        })
    }
}

/// The byte offset in `text` of serde_json's error `e` from parsing `text` (its 1-based line
/// and column; column 0, as at the end of the input, is the line's start).
fn json_error_offset(text: &str, e: &serde_json::Error) -> usize {
    let line_start = if e.line() <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(e.line() - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    let line = &text[line_start..];
    let line = &line[..line.find('\n').unwrap_or(line.len())];
    // serde_json counts the column in bytes; stay on a character of the line.
    let mut col = e.column().saturating_sub(1).min(line.len());
    while !line.is_char_boundary(col) {
        col -= 1;
    }
    line_start + col
}

/// serde_json's message without its " at line L column C" (the diagnostic's place says it).
fn json_message(e: &serde_json::Error) -> String {
    let m = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    m.strip_suffix(&suffix).unwrap_or(&m).to_string()
}

impl CandidateSource for PlanListSource {
    fn describe(&self) -> String {
        format!("{} plan(s) given directly", self.candidates.len())
    }
    fn signature(&self) -> String {
        self.signature.clone()
    }
    fn candidates<'a>(
        &'a mut self,
        _topo: &'a Topology,
    ) -> Result<Box<dyn Iterator<Item = Result<Candidate, SourceError>> + 'a>, SourceError> {
        Ok(Box::new(self.candidates.iter().cloned().map(Ok)))
    }
}
