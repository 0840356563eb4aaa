//! Passes, the pass registry, the textual pipeline `builtin.module(p1{k=v k2=w},p2)` and the
//! pass manager.

use crate::diag::Diagnostic;
use crate::ir::Operation;
use crate::registry::Registry;
use indexmap::IndexMap;

/// One option a pass accepts.
#[derive(Debug, Clone, Copy)]
pub struct PassOptionDef {
    pub name: &'static str,
    pub help: &'static str,
    /// Default value; `None` means the option is required.
    pub default: Option<&'static str>,
}

/// Parsed `key=value` options of one pass instance, checked against its definitions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassOptions {
    values: IndexMap<String, String>,
}

impl PassOptions {
    pub fn from_pairs(info: &PassInfo, pairs: &[(String, String)]) -> Result<PassOptions, String> {
        let mut values = IndexMap::new();
        for (k, v) in pairs {
            if !info.options.iter().any(|o| o.name == k) {
                let known: Vec<&str> = info.options.iter().map(|o| o.name).collect();
                return Err(format!(
                    "pass '{}' has no option '{k}'{}",
                    info.name,
                    if known.is_empty() {
                        String::from(" (it takes none)")
                    } else {
                        format!(" (options: {})", known.join(", "))
                    }
                ));
            }
            values.insert(k.clone(), v.clone());
        }
        for o in info.options {
            if !values.contains_key(o.name) {
                match o.default {
                    Some(d) => {
                        values.insert(o.name.to_string(), d.to_string());
                    }
                    None => {
                        return Err(format!(
                            "pass '{}' requires option '{}' ({})",
                            info.name, o.name, o.help
                        ))
                    }
                }
            }
        }
        Ok(PassOptions { values })
    }
    pub fn get(&self, k: &str) -> &str {
        self.values.get(k).map_or("", String::as_str)
    }
    pub fn get_usize(&self, k: &str) -> Result<usize, String> {
        self.get(k).parse().map_err(|_| {
            format!(
                "option '{k}' must be a non-negative integer, got '{}'",
                self.get(k)
            )
        })
    }
    pub fn get_bool(&self, k: &str) -> Result<bool, String> {
        match self.get(k) {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            v => Err(format!("option '{k}' must be true or false, got '{v}'")),
        }
    }
    pub fn get_list(&self, k: &str) -> Vec<String> {
        self.get(k)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }
    /// `{k=v k2=v2}` as MLIR prints pass options (empty string when there are none).
    pub fn render(&self) -> String {
        if self.values.is_empty() {
            return String::new();
        }
        let items: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{{{}}}", items.join(" "))
    }
}

/// What a pass does when run on a module. Errors are located diagnostics.
pub trait Pass {
    fn run(&self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic>;
}

/// The registration of a pass: one `PassInfo` per pass file.
pub struct PassInfo {
    /// Command-line name (`--<name>` and inside `--pass-pipeline`).
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [PassOptionDef],
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, String>,
}

/// Every pass the tools know.
#[derive(Default)]
pub struct PassRegistry {
    passes: Vec<&'static PassInfo>,
}

impl PassRegistry {
    pub fn new() -> PassRegistry {
        let mut r = PassRegistry::default();
        r.register(&crate::transforms::SYMBOL_DCE);
        r.register(&crate::transforms::CANONICALIZE);
        r
    }
    pub fn register(&mut self, p: &'static PassInfo) {
        self.passes.retain(|q| q.name != p.name);
        self.passes.push(p);
    }
    pub fn lookup(&self, name: &str) -> Option<&'static PassInfo> {
        self.passes.iter().copied().find(|p| p.name == name)
    }
    pub fn all(&self) -> impl Iterator<Item = &'static PassInfo> + '_ {
        self.passes.iter().copied()
    }
}

/// One `name{k=v ...}` entry of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineEntry {
    pub name: String,
    pub options: Vec<(String, String)>,
}

/// Parses `builtin.module(a{k=v},b)` or a bare `a{k=v},b`.
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineEntry>, String> {
    let t = text.trim();
    let inner = if let Some(rest) = t
        .strip_prefix("builtin.module(")
        .or_else(|| t.strip_prefix("any("))
    {
        rest.strip_suffix(')')
            .ok_or("missing ')' at the end of the pipeline")?
    } else {
        t
    };
    let chars: Vec<char> = inner.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_alphanumeric() || "-_.".contains(chars[i])) {
            i += 1;
        }
        let name: String = chars[start..i].iter().collect();
        if name.is_empty() {
            return Err(format!(
                "expected a pass name at '{}'",
                chars[i..].iter().collect::<String>()
            ));
        }
        let mut options = Vec::new();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            let close = chars[i..]
                .iter()
                .position(|&c| c == '}')
                .ok_or_else(|| format!("missing '}}' after options of '{name}'"))?
                + i;
            let body: String = chars[i + 1..close].iter().collect();
            for item in body.split_whitespace() {
                let (k, v) = item.split_once('=').unwrap_or((item, "true"));
                if k.is_empty() {
                    return Err(format!("empty option name in '{name}'"));
                }
                options.push((k.to_string(), v.trim_matches('"').to_string()));
            }
            i = close + 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] != ',' {
            return Err(format!(
                "expected ',' after pass '{name}', found '{}'",
                chars[i]
            ));
        }
        out.push(PipelineEntry { name, options });
    }
    Ok(out)
}

/// Called with (pass display name, module) after each pass (`--mlir-print-ir-after-all`).
pub type AfterPassHook = Box<dyn FnMut(&str, &Operation)>;

/// Runs passes in order, verifying after each and optionally printing the IR.
pub struct PassManager {
    passes: Vec<(String, Box<dyn Pass>)>,
    pub verify_each: bool,
    /// Called with (pass display name, module) after each pass (`--mlir-print-ir-after-all`).
    pub after_pass: Option<AfterPassHook>,
}

impl Default for PassManager {
    fn default() -> Self {
        PassManager {
            passes: vec![],
            verify_each: true,
            after_pass: None,
        }
    }
}

impl PassManager {
    pub fn new() -> PassManager {
        PassManager::default()
    }
    /// Adds the passes of a textual pipeline.
    pub fn add_pipeline(&mut self, registry: &PassRegistry, text: &str) -> Result<(), String> {
        for e in parse_pipeline(text)? {
            self.add(registry, &e.name, &e.options)?;
        }
        Ok(())
    }
    pub fn add(
        &mut self,
        registry: &PassRegistry,
        name: &str,
        options: &[(String, String)],
    ) -> Result<(), String> {
        let info = registry.lookup(name).ok_or_else(|| {
            format!("'{name}' does not refer to a registered pass (see --list-passes)")
        })?;
        let opts = PassOptions::from_pairs(info, options)?;
        let pass = (info.create)(&opts).map_err(|e| format!("pass '{name}': {e}"))?;
        let display = format!(
            "{}{}",
            info.name,
            if opts.render().is_empty() {
                String::new()
            } else {
                opts.render()
            }
        );
        self.passes.push((display, pass));
        Ok(())
    }
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }
    pub fn run(&mut self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic> {
        for (name, pass) in &self.passes {
            pass.run(module, registry)?;
            if self.verify_each {
                crate::verify::verify(registry, module).map_err(|d| {
                    Diagnostic::error(
                        d.loc.clone(),
                        format!("{} (IR invalid after pass '{name}')", d.message),
                    )
                })?;
            }
            if let Some(cb) = self.after_pass.as_mut() {
                cb(name, module);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_grammar() {
        let p = parse_pipeline(
            "builtin.module(tile{axis=i factor=4},parallelize{axis=i.o level=0}, symbol-dce)",
        )
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].name, "tile");
        assert_eq!(
            p[0].options,
            vec![("axis".into(), "i".into()), ("factor".into(), "4".into())]
        );
        assert_eq!(p[2].name, "symbol-dce");
        assert!(parse_pipeline("builtin.module(tile{axis=i").is_err());
        assert!(parse_pipeline("a b").is_err());
    }
}
