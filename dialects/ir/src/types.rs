//! Builtin types and opaque dialect types.

use std::fmt;

/// A dimension of a shaped type: static size or dynamic (`?`).
pub type Dim = Option<u64>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    /// `iN`, `siN`, `uiN`.
    Integer {
        width: u32,
        signedness: Signedness,
    },
    Index,
    F16,
    BF16,
    F32,
    F64,
    None,
    Tensor {
        shape: Vec<Dim>,
        elem: Box<Type>,
    },
    MemRef {
        shape: Vec<Dim>,
        elem: Box<Type>,
    },
    Vector {
        shape: Vec<Dim>,
        elem: Box<Type>,
    },
    Tuple(Vec<Type>),
    Function {
        inputs: Vec<Type>,
        results: Vec<Type>,
    },
    /// `!dialect.name<body>`; the body is kept verbatim (without the angle brackets).
    Dialect {
        dialect: String,
        name: String,
        body: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signedness {
    Signless,
    Signed,
    Unsigned,
}

impl Type {
    pub fn i(width: u32) -> Type {
        Type::Integer {
            width,
            signedness: Signedness::Signless,
        }
    }
    pub fn dialect(dialect: &str, name: &str, body: Option<&str>) -> Type {
        Type::Dialect {
            dialect: dialect.into(),
            name: name.into(),
            body: body.map(Into::into),
        }
    }
    pub fn tensor(shape: &[u64], elem: Type) -> Type {
        Type::Tensor {
            shape: shape.iter().map(|d| Some(*d)).collect(),
            elem: Box::new(elem),
        }
    }
    /// Static shape of a shaped type, if every dimension is static.
    pub fn static_shape(&self) -> Option<Vec<u64>> {
        match self {
            Type::Tensor { shape, .. }
            | Type::MemRef { shape, .. }
            | Type::Vector { shape, .. } => shape.iter().copied().collect(),
            _ => None,
        }
    }
    pub fn element_type(&self) -> Option<&Type> {
        match self {
            Type::Tensor { elem, .. } | Type::MemRef { elem, .. } | Type::Vector { elem, .. } => {
                Some(elem)
            }
            _ => None,
        }
    }
    pub fn is_float(&self) -> bool {
        matches!(self, Type::F16 | Type::BF16 | Type::F32 | Type::F64)
    }
    /// Size in bytes of one element of a scalar type.
    pub fn scalar_bytes(&self) -> Option<u64> {
        match self {
            Type::F16 | Type::BF16 => Some(2),
            Type::F32 => Some(4),
            Type::F64 | Type::Index => Some(8),
            Type::Integer { width, .. } => Some((*width as u64).div_ceil(8)),
            _ => None,
        }
    }
}

fn write_shape(f: &mut fmt::Formatter<'_>, shape: &[Dim]) -> fmt::Result {
    for d in shape {
        match d {
            Some(n) => write!(f, "{n}x")?,
            None => write!(f, "?x")?,
        }
    }
    Ok(())
}

fn write_list(f: &mut fmt::Formatter<'_>, items: &[Type]) -> fmt::Result {
    for (i, t) in items.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{t}")?;
    }
    Ok(())
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Integer { width, signedness } => match signedness {
                Signedness::Signless => write!(f, "i{width}"),
                Signedness::Signed => write!(f, "si{width}"),
                Signedness::Unsigned => write!(f, "ui{width}"),
            },
            Type::Index => write!(f, "index"),
            Type::F16 => write!(f, "f16"),
            Type::BF16 => write!(f, "bf16"),
            Type::F32 => write!(f, "f32"),
            Type::F64 => write!(f, "f64"),
            Type::None => write!(f, "none"),
            Type::Tensor { shape, elem } => {
                write!(f, "tensor<")?;
                write_shape(f, shape)?;
                write!(f, "{elem}>")
            }
            Type::MemRef { shape, elem } => {
                write!(f, "memref<")?;
                write_shape(f, shape)?;
                write!(f, "{elem}>")
            }
            Type::Vector { shape, elem } => {
                write!(f, "vector<")?;
                write_shape(f, shape)?;
                write!(f, "{elem}>")
            }
            Type::Tuple(items) => {
                write!(f, "tuple<")?;
                write_list(f, items)?;
                write!(f, ">")
            }
            Type::Function { inputs, results } => {
                write!(f, "(")?;
                write_list(f, inputs)?;
                write!(f, ") -> ")?;
                if results.len() == 1 && !matches!(results[0], Type::Function { .. }) {
                    write!(f, "{}", results[0])
                } else {
                    write!(f, "(")?;
                    write_list(f, results)?;
                    write!(f, ")")
                }
            }
            Type::Dialect {
                dialect,
                name,
                body,
            } => {
                write!(f, "!{dialect}.{name}")?;
                if let Some(b) = body {
                    write!(f, "<{b}>")?;
                }
                Ok(())
            }
        }
    }
}
