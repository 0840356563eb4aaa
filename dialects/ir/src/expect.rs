//! `--verify-diagnostics`: MLIR's expected-diagnostic annotations.
//!
//! An annotation is `expected-<severity>[ @<where>] {{<substring>}}` anywhere on a line (in
//! practice inside a `//` comment), severity one of error, warning, remark, note; blanks may
//! precede `@` and `{{` (`expected-error @+1 {{m}}`, `expected-error@+1{{m}}`). `<where>`:
//! - absent: the annotation's own line;
//! - `+N` / `-N`: N lines below / above;
//! - `above` / `below`: the nearest line above / below that carries no annotation;
//! - `unknown`: a diagnostic without a source location.
//!
//! A diagnostic matches an annotation on its line with the same severity whose substring its
//! message contains. Every emitted diagnostic must match one, and every annotation must be
//! matched; otherwise each mismatch is reported as a located error.

use crate::{Diagnostic, Location, Severity, SourceFile};
use std::sync::Arc;

/// One annotation.
#[derive(Debug, Clone)]
pub struct Expected {
    pub severity: Severity,
    /// The line the diagnostic must be on; `None` for `@unknown`.
    pub line: Option<u32>,
    pub substring: String,
    /// Where the annotation itself is written.
    pub at: Location,
    matched: bool,
}

const SEVERITIES: [(&str, Severity); 4] = [
    ("error", Severity::Error),
    ("warning", Severity::Warning),
    ("remark", Severity::Remark),
    ("note", Severity::Note),
];

/// What an annotation's `@...` says before line numbers are resolved.
enum Where {
    Here,
    Offset(i64),
    Above,
    Below,
    Unknown,
}

struct Raw {
    severity: Severity,
    place: Where,
    substring: String,
    /// Byte offset of `expected-`: in its line from `parse_line`, then in the buffer.
    offset: usize,
}

/// Finds the annotation on one line, if any. `Err` is a malformed annotation (with the byte
/// offset in the line to point at).
fn parse_line(line: &str) -> Result<Option<Raw>, (usize, String)> {
    let mut search = 0;
    while let Some(found) = line[search..].find("expected-") {
        let start = search + found;
        search = start + "expected-".len();
        let rest = &line[search..];
        let Some((word, severity)) = SEVERITIES
            .iter()
            .find(|(w, _)| rest.starts_with(w))
            .copied()
        else {
            continue;
        };
        let mut rest = &rest[word.len()..];
        if rest.starts_with("-re")
            && !rest[3..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            return Err((
                start,
                format!(
                    "expected-{word}-re is not supported by mercury-opt; use a plain substring"
                ),
            ));
        }
        // `expected-errors`, `expected-error-prone`... are words, not annotations.
        if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let mut place = Where::Here;
        // MLIR allows blanks between the severity and the designator (`expected-error @+1`),
        // as upstream tests often write it.
        if let Some(after_at) = rest.trim_start_matches([' ', '\t']).strip_prefix('@') {
            let len = after_at
                .find(|c: char| c.is_whitespace() || c == '{')
                .unwrap_or(after_at.len());
            let designator = &after_at[..len];
            place = match designator {
                "above" => Where::Above,
                "below" => Where::Below,
                "unknown" => Where::Unknown,
                _ => {
                    let n = designator
                        .strip_prefix('+')
                        .map(|d| d.parse::<i64>().ok())
                        .or_else(|| {
                            designator
                                .strip_prefix('-')
                                .map(|d| d.parse::<i64>().ok().map(|n| -n))
                        })
                        .flatten();
                    match n {
                        Some(n) => Where::Offset(n),
                        None => {
                            return Err((
                                start,
                                format!("unknown line designator '@{designator}' in expected-{word} (use @+N, @-N, @above, @below or @unknown)"),
                            ))
                        }
                    }
                }
            };
            rest = &after_at[len..];
        }
        let body = rest.trim_start();
        let Some(body) = body.strip_prefix("{{") else {
            if matches!(place, Where::Here) {
                // Prose that merely mentions expected-error.
                continue;
            }
            return Err((
                start,
                format!("expected '{{{{' after the line designator of expected-{word}"),
            ));
        };
        let Some(close) = body.rfind("}}") else {
            return Err((
                start,
                format!("expected-{word} {{{{...: missing the closing '}}}}'"),
            ));
        };
        if !body[close + 2..].trim().is_empty() {
            return Err((
                start,
                format!("unexpected text after the closing '}}}}' of expected-{word}"),
            ));
        }
        return Ok(Some(Raw {
            severity,
            place,
            substring: body[..close].to_string(),
            offset: start,
        }));
    }
    Ok(None)
}

/// Scans a buffer for annotations, resolving line designators. Malformed annotations are
/// returned as errors.
pub fn scan(file: &Arc<SourceFile>) -> (Vec<Expected>, Vec<Diagnostic>) {
    let mut raws: Vec<Raw> = Vec::new();
    let mut errors = Vec::new();
    // The last line without an annotation, the `@below` annotations waiting for the next
    // such line, and the resolved line of each annotation.
    let mut last_plain: Option<u32> = None;
    let mut pending_below: Vec<usize> = Vec::new();
    let mut resolved: Vec<Option<u32>> = Vec::new();
    let mut offset = 0;
    let last_line = file.first_line + file.text.lines().count().max(1) as u32 - 1;
    for (line_no, line) in (file.first_line..).zip(file.text.split('\n')) {
        match parse_line(line) {
            Ok(None) => {
                for i in pending_below.drain(..) {
                    resolved[i] = Some(line_no);
                }
                last_plain = Some(line_no);
            }
            Ok(Some(mut raw)) => {
                raw.offset += offset;
                let target: Result<Option<u32>, String> = match raw.place {
                    Where::Here => Ok(Some(line_no)),
                    Where::Unknown => Ok(None),
                    Where::Offset(n) => {
                        let t = i64::from(line_no) + n;
                        if (i64::from(file.first_line)..=i64::from(last_line)).contains(&t) {
                            Ok(u32::try_from(t).ok())
                        } else {
                            Err(format!(
                                "line designator points to line {t}, outside this input"
                            ))
                        }
                    }
                    Where::Above => last_plain.map(Some).ok_or_else(|| {
                        "@above has no line without an annotation above it".to_string()
                    }),
                    Where::Below => {
                        pending_below.push(raws.len());
                        Ok(None)
                    }
                };
                match target {
                    Ok(line) => {
                        resolved.push(line);
                        raws.push(raw);
                    }
                    Err(msg) => errors.push(Diagnostic::error(file.location(raw.offset), msg)),
                }
            }
            Err((col, msg)) => errors.push(Diagnostic::error(file.location(offset + col), msg)),
        }
        offset += line.len() + 1;
    }
    for i in pending_below {
        errors.push(Diagnostic::error(
            file.location(raws[i].offset),
            "@below has no line without an annotation below it",
        ));
    }
    let mut out = Vec::new();
    for (i, raw) in raws.into_iter().enumerate() {
        let line = resolved[i];
        if line.is_none() && !matches!(raw.place, Where::Unknown) {
            continue; // a dangling @below, reported above
        }
        out.push(Expected {
            severity: raw.severity,
            line,
            substring: raw.substring,
            at: file.location(raw.offset),
            matched: false,
        });
    }
    (out, errors)
}

/// A diagnostic and its notes, depth first.
fn flatten(d: &Diagnostic, out: &mut Vec<Diagnostic>) {
    out.push(Diagnostic {
        notes: vec![],
        ..d.clone()
    });
    for n in &d.notes {
        flatten(n, out);
    }
}

/// Checks the diagnostics emitted for `file` against its annotations; returns one error per
/// mismatch (empty: everything was expected and everything expected happened).
pub fn verify(file: &Arc<SourceFile>, emitted: &[Diagnostic]) -> Vec<Diagnostic> {
    let (mut expected, mut failures) = scan(file);
    let mut all = Vec::new();
    emitted.iter().for_each(|d| flatten(d, &mut all));
    // A note that points into another file (the schedule line a failing pass came from) is
    // context for the error it is attached to; the annotations of `file` cannot name it.
    all.retain(|d| match (&d.loc, d.severity) {
        (Location::File { file: other, .. }, Severity::Note) => other.name == file.name,
        _ => true,
    });
    for d in &all {
        let line = d.loc.line();
        let here = |e: &Expected| e.line == line && d.message.contains(&e.substring);
        let pick = expected
            .iter()
            .position(|e| here(e) && e.severity == d.severity && !e.matched)
            .or_else(|| {
                expected
                    .iter()
                    .position(|e| here(e) && e.severity == d.severity)
            });
        if let Some(i) = pick {
            expected[i].matched = true;
        } else if let Some(e) = expected.iter().find(|e| here(e)) {
            failures.push(Diagnostic::error(
                d.loc.clone(),
                format!(
                    "'{}' diagnostic emitted when expecting a '{}': {}",
                    d.severity, e.severity, d.message
                ),
            ));
        } else {
            failures.push(Diagnostic::error(
                d.loc.clone(),
                format!("unexpected {}: {}", d.severity, d.message),
            ));
        }
    }
    for e in expected.iter().filter(|e| !e.matched) {
        let mut f = Diagnostic::error(
            e.at.clone(),
            format!(
                "expected {} \"{}\" was not produced",
                e.severity, e.substring
            ),
        );
        if let Some(elsewhere) = all
            .iter()
            .find(|d| d.severity == e.severity && d.message.contains(&e.substring))
        {
            f = f.with_note(
                elsewhere.loc.clone(),
                format!("a matching {} was emitted here instead", e.severity),
            );
        }
        failures.push(f);
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Arc<SourceFile> {
        SourceFile::new("t.mlir", text)
    }

    fn at(f: &Arc<SourceFile>, line: u32, col: u32, sev: Severity, msg: &str) -> Diagnostic {
        let offset: usize = f
            .text
            .split('\n')
            .take((line - 1) as usize)
            .map(|l| l.len() + 1)
            .sum::<usize>()
            + col as usize
            - 1;
        Diagnostic {
            severity: sev,
            loc: f.location(offset),
            message: msg.into(),
            notes: vec![],
        }
    }

    fn messages(ds: &[Diagnostic]) -> Vec<String> {
        ds.iter().map(|d| d.render()).collect()
    }

    #[test]
    fn designators_resolve() {
        let f = file("a // expected-error {{here}}\n// expected-error@+1 {{plus}}\nb\n// expected-note@-3 {{minus}}\nc\n// expected-remark@above {{above}}\n// expected-warning@below {{below}}\n\nd // expected-error@unknown {{nowhere}}\n");
        let (e, errs) = scan(&f);
        assert!(errs.is_empty(), "{:?}", messages(&errs));
        let lines: Vec<(Severity, Option<u32>, &str)> = e
            .iter()
            .map(|x| (x.severity, x.line, x.substring.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (Severity::Error, Some(1), "here"),
                (Severity::Error, Some(3), "plus"),
                (Severity::Note, Some(1), "minus"),
                (Severity::Remark, Some(5), "above"),
                (Severity::Warning, Some(8), "below"),
                (Severity::Error, None, "nowhere"),
            ]
        );
    }

    #[test]
    fn blanks_before_the_designator() {
        // Upstream MLIR's pattern is `expected-error *(@...)? *{{...}}`.
        let f = file("a\n// expected-error @+1 {{spaced}}\nb\n// expected-warning  @-3  {{two}}\n// expected-note\t@above {{tab}}\n// expected-remark@+1{{tight}}\nc\n// expected-error {{plain}}\nd // expected-error @below {{below}}\ne\n");
        let (e, errs) = scan(&f);
        assert!(errs.is_empty(), "{:?}", messages(&errs));
        let got: Vec<(Severity, Option<u32>, &str)> = e
            .iter()
            .map(|x| (x.severity, x.line, x.substring.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Severity::Error, Some(3), "spaced"),
                (Severity::Warning, Some(1), "two"),
                (Severity::Note, Some(3), "tab"),
                (Severity::Remark, Some(7), "tight"),
                (Severity::Error, Some(8), "plain"),
                (Severity::Error, Some(10), "below"),
            ]
        );
        // The spaced form is an annotation, so a diagnostic that never comes is a failure.
        let f = file("a\n// expected-error @+1 {{never}}\nb\n");
        let fails = verify(&f, &[]);
        assert_eq!(fails.len(), 1);
        assert!(
            fails[0]
                .render()
                .starts_with("t.mlir:2:4: error: expected error \"never\" was not produced"),
            "{}",
            fails[0].render()
        );
        // A malformed designator after blanks is an error, not prose.
        for (text, want) in [
            (
                "// expected-error @+x {{m}}\n",
                "unknown line designator '@+x'",
            ),
            ("// expected-error @ {{m}}\n", "unknown line designator '@'"),
            ("// expected-error @+1 m\nx\n", "expected '{{' after"),
        ] {
            let (_, errs) = scan(&file(text));
            assert_eq!(errs.len(), 1, "{text}");
            assert!(
                errs[0].message.contains(want),
                "{text}: {}",
                errs[0].message
            );
        }
    }

    #[test]
    fn split_chunks_keep_original_lines() {
        let f = SourceFile::with_first_line("t.mlir", "x\n// expected-error@-1 {{m}}\n", 10);
        let (e, errs) = scan(&f);
        assert!(errs.is_empty());
        assert_eq!(e[0].line, Some(10));
        let (_, errs) = scan(&SourceFile::with_first_line(
            "t.mlir",
            "// expected-error@-1 {{m}}\n",
            10,
        ));
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].render().contains("outside this input"),
            "{}",
            errs[0].render()
        );
    }

    #[test]
    fn malformed_annotations_are_errors() {
        for (text, want) in [
            ("// expected-error {{no close\n", "missing the closing"),
            (
                "// expected-error@+x {{m}}\n",
                "unknown line designator '@+x'",
            ),
            (
                "// expected-error@sideways {{m}}\n",
                "unknown line designator",
            ),
            ("// expected-error@+1 m\nx\n", "expected '{{' after"),
            ("// expected-error-re {{a.*}}\n", "not supported"),
            (
                "// expected-error {{m}} trailing\n",
                "unexpected text after",
            ),
            ("// expected-error@above {{m}}\n", "@above has no line"),
            // (With a final newline, @below would name the empty last line, as in MLIR.)
            ("x\n// expected-error@below {{m}}", "@below has no line"),
        ] {
            let (_, errs) = scan(&file(text));
            assert_eq!(errs.len(), 1, "{text}");
            assert!(
                errs[0].message.contains(want),
                "{text}: {}",
                errs[0].message
            );
        }
        // Prose mentioning the annotations is not an annotation.
        let (e, errs) = scan(&file(
            "// expected-errors are checked; an expected-error is fine\n",
        ));
        assert!(e.is_empty() && errs.is_empty());
    }

    #[test]
    fn notes_in_other_files_are_context() {
        let f = file("a\nb // expected-error {{bad b}}\n");
        let sched = SourceFile::new("s.sched", "tile{axis=i}\n");
        let d =
            at(&f, 2, 1, Severity::Error, "bad b").with_note(sched.location(0), "in pass 'tile'");
        assert!(verify(&f, std::slice::from_ref(&d)).is_empty());
        // An error in another file is still unexpected.
        let e = Diagnostic::error(sched.location(0), "bad b");
        assert_eq!(verify(&f, &[d, e]).len(), 1);
    }

    #[test]
    fn matching() {
        let f = file("a\nb // expected-error {{bad b}}\nc // expected-note {{see c}}\n");
        let d = at(&f, 2, 3, Severity::Error, "very bad b here")
            .with_note(at(&f, 3, 1, Severity::Note, "").loc, "see c");
        assert!(verify(&f, std::slice::from_ref(&d)).is_empty());

        // Nothing emitted: both expectations fail, pointing at the annotations.
        let fails = verify(&f, &[]);
        assert_eq!(fails.len(), 2);
        assert!(
            fails[0]
                .render()
                .starts_with("t.mlir:2:6: error: expected error \"bad b\" was not produced"),
            "{}",
            fails[0].render()
        );

        // Emitted on the wrong line: unexpected + not produced, with a hint.
        let wrong = at(&f, 1, 1, Severity::Error, "bad b");
        let fails = verify(&file("a\nb // expected-error {{bad b}}\n"), &[wrong]);
        let text = messages(&fails).join("");
        assert!(
            text.contains("t.mlir:1:1: error: unexpected error: bad b"),
            "{text}"
        );
        assert!(text.contains("was not produced"), "{text}");
        assert!(
            text.contains("a matching error was emitted here instead"),
            "{text}"
        );

        // Right line and text, wrong severity.
        let warn = at(&f, 2, 1, Severity::Warning, "bad b");
        let fails = verify(&file("a\nb // expected-error {{bad b}}\n"), &[warn]);
        assert!(
            fails[0]
                .message
                .contains("'warning' diagnostic emitted when expecting a 'error'"),
            "{}",
            fails[0].message
        );

        // A diagnostic without a location.
        let unknown = Diagnostic::error(Location::Unknown, "lost");
        assert!(verify(
            &file("// expected-error@unknown {{lost}}\n"),
            std::slice::from_ref(&unknown)
        )
        .is_empty());
        assert_eq!(verify(&file(""), &[unknown]).len(), 1);
    }
}
