//! `--split-input-file`: chunks separated by lines of `// -----`, each keeping its original
//! line numbers for diagnostics.

/// One chunk of a split buffer: its text and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    pub first_line: u32,
}

/// mlir-opt's split marker, `--split-input-file` without a value (and its
/// `--output-split-marker`'s default).
pub const DEFAULT_SPLIT_MARKER: &str = "// -----";

/// Splits at lines whose trimmed text is `// -----` ([`DEFAULT_SPLIT_MARKER`]).
pub fn split_input(text: &str) -> Vec<Chunk> {
    split_input_at(text, DEFAULT_SPLIT_MARKER)
}

/// Splits at lines whose trimmed text is `marker` (`--split-input-file=MARKER`). Only a whole
/// line is a marker: mlir-opt also splits at one inside a line (`  // -----  x` leaves `x` to
/// the next chunk), which this does not.
pub fn split_input_at(text: &str, marker: &str) -> Vec<Chunk> {
    let marker = marker.trim();
    let mut chunks = Vec::new();
    let mut cur = String::new();
    let mut first_line = 1;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim() == marker {
            chunks.push(Chunk {
                text: std::mem::take(&mut cur),
                first_line,
            });
            first_line = i as u32 + 2;
        } else {
            cur.push_str(line);
        }
    }
    chunks.push(Chunk {
        text: cur,
        first_line,
    });
    chunks
}

#[cfg(test)]
mod tests {
    #[test]
    fn splits_and_keeps_lines() {
        let c = super::split_input("a\n// -----\nb\nc\n  // -----  \nd");
        assert_eq!(c.len(), 3);
        assert_eq!((c[1].text.as_str(), c[1].first_line), ("b\nc\n", 3));
        assert_eq!(c[2].first_line, 6);
        let c = super::split_input_at("a\n// -----\nb\n;; x\nd", ";; x");
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].text.as_str(), c[1].text.as_str()),
            ("a\n// -----\nb\n", "d")
        );
        assert_eq!(c[1].first_line, 5);
    }
}
