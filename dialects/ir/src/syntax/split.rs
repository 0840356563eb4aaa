//! `--split-input-file`: chunks separated by lines of `// -----`, each keeping its original
//! line numbers for diagnostics.

/// One chunk of a split buffer: its text and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    pub first_line: u32,
}

/// Splits at lines whose trimmed text is `// -----`.
pub fn split_input(text: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut cur = String::new();
    let mut first_line = 1;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim() == "// -----" {
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
    }
}
