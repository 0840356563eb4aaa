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
        usize::parse_option(k, self.get(k))
    }
    pub fn get_bool(&self, k: &str) -> Result<bool, String> {
        bool::parse_option(k, self.get(k))
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

/// The Rust type of a pass option: how its `key=value` text is read.
pub trait OptionValue: Sized {
    /// Reads option `name`'s value `v`; `Err` says what is wrong with it.
    fn parse_option(name: &str, v: &str) -> Result<Self, String>;
}

impl OptionValue for usize {
    fn parse_option(k: &str, v: &str) -> Result<usize, String> {
        v.parse()
            .map_err(|_| format!("option '{k}' must be a non-negative integer, got '{v}'"))
    }
}

/// An optional count: empty means absent.
impl OptionValue for Option<usize> {
    fn parse_option(k: &str, v: &str) -> Result<Option<usize>, String> {
        if v.is_empty() {
            Ok(None)
        } else {
            usize::parse_option(k, v).map(Some)
        }
    }
}

/// `true`, `1` or nothing (a bare `{flag}`) is true; `false` or `0` is false.
impl OptionValue for bool {
    fn parse_option(k: &str, v: &str) -> Result<bool, String> {
        match v {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            v => Err(format!("option '{k}' must be true or false, got '{v}'")),
        }
    }
}

/// A symbol name, written with or without its `@`.
impl OptionValue for String {
    fn parse_option(_: &str, v: &str) -> Result<String, String> {
        Ok(v.trim().trim_start_matches('@').to_string())
    }
}

/// Declares a pass's options once, on its struct: each field with its type (an
/// [`OptionValue`]), an optional default (a field without one is required) and its help. Gives
/// the struct, its `OPTIONS` table (what the registry, `--list-passes` and the option checks
/// read) and `from_options`, which reads the checked `key=value` pairs into the typed fields.
/// An optional `extra: [...]` lists options that are not fields (an adapter's, read by it).
///
/// ```
/// mercury_ir::pass_options! {
///     /// Options of a pass.
///     pub struct Split {
///         axis: String => "the axis to split",
///         factor: usize => "iterations of the outer axis",
///         outer: String = "" => "name of the outer axis (default <axis>_o)",
///     }
/// }
/// let info = mercury_ir::pass::PassInfo {
///     name: "split",
///     summary: "an example",
///     options: Split::OPTIONS,
///     create: |_| Err("not run here".into()),
/// };
/// let pairs = [("axis".to_string(), "@i".to_string()), ("factor".into(), "4".into())];
/// let o = mercury_ir::pass::PassOptions::from_pairs(&info, &pairs).unwrap();
/// let s = Split::from_options(&o).unwrap();
/// assert_eq!((s.axis.as_str(), s.factor, s.outer.as_str()), ("i", 4, ""));
/// ```
#[macro_export]
macro_rules! pass_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($field:ident : $ty:ty $(= $default:literal)? => $help:literal),* $(,)?
        }
        $(extra: [$($extra:expr),* $(,)?])?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(#[doc = $help] pub $field: $ty,)*
        }

        impl $name {
            /// The options, as the pass registry lists them.
            pub const OPTIONS: &'static [$crate::pass::PassOptionDef] = &[$(
                $crate::pass::PassOptionDef {
                    name: stringify!($field),
                    help: $help,
                    default: $crate::pass_options!(@default $($default)?),
                },
            )* $($($extra,)*)?];

            /// Reads the checked options into their typed fields.
            #[allow(unused_variables)]
            pub fn from_options(o: &$crate::pass::PassOptions) -> Result<Self, String> {
                Ok($name {
                    $($field: <$ty as $crate::pass::OptionValue>::parse_option(
                        stringify!($field),
                        o.get(stringify!($field)),
                    )?,)*
                })
            }
        }
    };
    (@default) => { None };
    (@default $d:literal) => { Some($d) };
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

/// Parses `builtin.module(a{k=v},b)` or a bare `a{k=v},b`: the grammar's `pipeline` rules
/// lex the list, this reads the tokens in order (passes separated by commas).
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineEntry>, String> {
    use crate::syntax::parser::{MlirGrammar, Rule};
    use pest::Parser as _;
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
    let tokens = MlirGrammar::parse(Rule::pipeline, inner)
        .map_err(|e| format!("cannot read the pipeline: {e}"))?
        .next()
        .map(|p| p.into_inner())
        .into_iter()
        .flatten();
    let mut out: Vec<PipelineEntry> = Vec::new();
    // The pass before, while no comma has followed it yet.
    let mut open: Option<String> = None;
    let first_char = |s: &str| s.chars().next().unwrap_or(' ');
    for tok in tokens {
        match tok.as_rule() {
            Rule::pipeline_sep => open = None,
            Rule::pipeline_entry => {
                if let Some(prev) = &open {
                    return Err(format!(
                        "expected ',' after pass '{prev}', found '{}'",
                        first_char(tok.as_str())
                    ));
                }
                let mut name = String::new();
                let mut options = Vec::new();
                for part in tok.into_inner() {
                    match part.as_rule() {
                        Rule::pipeline_name => name = part.as_str().to_string(),
                        Rule::pipeline_unclosed => {
                            return Err(format!("missing '}}' after options of '{name}'"))
                        }
                        _ => {
                            let body = part.as_str();
                            for item in body[1..body.len() - 1].split_whitespace() {
                                let (k, v) = item.split_once('=').unwrap_or((item, "true"));
                                if k.is_empty() {
                                    return Err(format!("empty option name in '{name}'"));
                                }
                                options.push((k.to_string(), v.trim_matches('"').to_string()));
                            }
                        }
                    }
                }
                open = Some(name.clone());
                out.push(PipelineEntry { name, options });
            }
            Rule::pipeline_stray => {
                let at = tok.as_span().start();
                return Err(match &open {
                    Some(prev) => format!(
                        "expected ',' after pass '{prev}', found '{}'",
                        first_char(tok.as_str())
                    ),
                    None => format!("expected a pass name at '{}'", &inner[at..]),
                });
            }
            _ => {}
        }
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
