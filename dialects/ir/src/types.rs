//! Builtin types and opaque dialect types.

use std::fmt;

/// A dimension of a shaped type: static size or dynamic (`?`).
pub type Dim = Option<u64>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    /// `iN`, `siN`, `uiN` (1 <= N < 2^24).
    Integer {
        width: u32,
        signedness: Signedness,
    },
    Index,
    F16,
    BF16,
    F32,
    F64,
    /// The other builtin float types (`f8E4M3FN`, `tf32`, `f80`, `f128`, ...).
    Float(FloatKind),
    None,
    /// `complex<T>`.
    Complex(Box<Type>),
    /// `tensor<4x?xf32, #enc>`; `shape: None` is unranked (`tensor<*xf32>`). The encoding is
    /// kept as its printed attribute.
    Tensor {
        shape: Option<Vec<Dim>>,
        elem: Box<Type>,
        encoding: Option<String>,
    },
    /// `memref<4xf32, layout, space>`; `shape: None` is unranked (`memref<*xf32, space>`).
    /// Layout and memory space are kept as their printed attributes.
    MemRef {
        shape: Option<Vec<Dim>>,
        elem: Box<Type>,
        layout: Option<String>,
        memory_space: Option<String>,
    },
    /// `vector<[4]x8xf32>`: `scalable[i]` marks a scalable dimension.
    Vector {
        shape: Vec<u64>,
        scalable: Vec<bool>,
        elem: Box<Type>,
    },
    Tuple(Vec<Type>),
    Function {
        inputs: Vec<Type>,
        results: Vec<Type>,
    },
    /// `!dialect.name<body>`; the body is kept verbatim (without the angle brackets). An
    /// opaque type `!dialect<"...">` has an empty name.
    Dialect {
        dialect: String,
        name: String,
        body: Option<String>,
    },
}

/// The builtin float types beyond f16, bf16, f32 and f64, with their spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloatKind {
    F4E2M1FN,
    F6E2M3FN,
    F6E3M2FN,
    F8E5M2,
    F8E4M3,
    F8E4M3FN,
    F8E5M2FNUZ,
    F8E4M3FNUZ,
    F8E4M3B11FNUZ,
    F8E3M4,
    F8E8M0FNU,
    TF32,
    F80,
    F128,
}

impl FloatKind {
    pub const ALL: [FloatKind; 14] = [
        FloatKind::F4E2M1FN,
        FloatKind::F6E2M3FN,
        FloatKind::F6E3M2FN,
        FloatKind::F8E5M2,
        FloatKind::F8E4M3,
        FloatKind::F8E4M3FN,
        FloatKind::F8E5M2FNUZ,
        FloatKind::F8E4M3FNUZ,
        FloatKind::F8E4M3B11FNUZ,
        FloatKind::F8E3M4,
        FloatKind::F8E8M0FNU,
        FloatKind::TF32,
        FloatKind::F80,
        FloatKind::F128,
    ];
    pub fn spelling(self) -> &'static str {
        match self {
            FloatKind::F4E2M1FN => "f4E2M1FN",
            FloatKind::F6E2M3FN => "f6E2M3FN",
            FloatKind::F6E3M2FN => "f6E3M2FN",
            FloatKind::F8E5M2 => "f8E5M2",
            FloatKind::F8E4M3 => "f8E4M3",
            FloatKind::F8E4M3FN => "f8E4M3FN",
            FloatKind::F8E5M2FNUZ => "f8E5M2FNUZ",
            FloatKind::F8E4M3FNUZ => "f8E4M3FNUZ",
            FloatKind::F8E4M3B11FNUZ => "f8E4M3B11FNUZ",
            FloatKind::F8E3M4 => "f8E3M4",
            FloatKind::F8E8M0FNU => "f8E8M0FNU",
            FloatKind::TF32 => "tf32",
            FloatKind::F80 => "f80",
            FloatKind::F128 => "f128",
        }
    }
    /// Storage width in bits.
    pub fn width(self) -> u32 {
        match self {
            FloatKind::F4E2M1FN => 4,
            FloatKind::F6E2M3FN | FloatKind::F6E3M2FN => 6,
            FloatKind::TF32 => 19,
            FloatKind::F80 => 80,
            FloatKind::F128 => 128,
            _ => 8,
        }
    }
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
            shape: Some(shape.iter().map(|d| Some(*d)).collect()),
            elem: Box::new(elem),
            encoding: None,
        }
    }
    /// The dimensions of a ranked shaped type (`None` for a dynamic one); `None` for an
    /// unranked one or a type that is not shaped.
    pub fn shape(&self) -> Option<Vec<Dim>> {
        match self {
            Type::Tensor { shape, .. } | Type::MemRef { shape, .. } => shape.clone(),
            Type::Vector { shape, .. } => Some(shape.iter().map(|d| Some(*d)).collect()),
            _ => None,
        }
    }
    /// Static shape of a shaped type, if it is ranked and every dimension is static.
    pub fn static_shape(&self) -> Option<Vec<u64>> {
        self.shape()?.into_iter().collect()
    }
    pub fn element_type(&self) -> Option<&Type> {
        match self {
            Type::Tensor { elem, .. } | Type::MemRef { elem, .. } | Type::Vector { elem, .. } => {
                Some(elem)
            }
            _ => None,
        }
    }
    /// Whether this is a tensor, memref or vector type.
    pub fn is_shaped(&self) -> bool {
        matches!(
            self,
            Type::Tensor { .. } | Type::MemRef { .. } | Type::Vector { .. }
        )
    }
    /// The element type of a shaped type, else the type itself.
    pub fn element_or_self(&self) -> &Type {
        self.element_type().unwrap_or(self)
    }
    /// f16, bf16, f32 or f64: the float types the compiler computes in (CommIR's buffers take
    /// these). [`Type::is_builtin_float`] takes every builtin float type.
    pub fn is_float(&self) -> bool {
        matches!(self, Type::F16 | Type::BF16 | Type::F32 | Type::F64)
    }
    /// Any builtin float type (f16, bf16, f32, f64, the f4/f6/f8 types, tf32, f80, f128).
    pub fn is_builtin_float(&self) -> bool {
        self.is_float() || matches!(self, Type::Float(_))
    }
    /// Bit width of an integer or float type.
    pub fn int_or_float_width(&self) -> Option<u32> {
        Some(match self {
            Type::Integer { width, .. } => *width,
            Type::F16 | Type::BF16 => 16,
            Type::F32 => 32,
            Type::F64 => 64,
            Type::Float(k) => k.width(),
            _ => return None,
        })
    }
    /// `iN` without a sign.
    pub fn is_signless_int(&self) -> bool {
        matches!(
            self,
            Type::Integer {
                signedness: Signedness::Signless,
                ..
            }
        )
    }
    /// Size in bytes of one element of a scalar type.
    pub fn scalar_bytes(&self) -> Option<u64> {
        match self {
            Type::F16 | Type::BF16 => Some(2),
            Type::F32 => Some(4),
            Type::F64 | Type::Index => Some(8),
            Type::Float(k) => Some(u64::from(k.width()).div_ceil(8)),
            Type::Integer { width, .. } => Some((*width as u64).div_ceil(8)),
            _ => None,
        }
    }
}

fn write_shape(f: &mut fmt::Formatter<'_>, shape: &Option<Vec<Dim>>) -> fmt::Result {
    let Some(shape) = shape else {
        return write!(f, "*x");
    };
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
            Type::Float(k) => write!(f, "{}", k.spelling()),
            Type::None => write!(f, "none"),
            Type::Complex(t) => write!(f, "complex<{t}>"),
            Type::Tensor {
                shape,
                elem,
                encoding,
            } => {
                write!(f, "tensor<")?;
                write_shape(f, shape)?;
                write!(f, "{elem}")?;
                if let Some(e) = encoding {
                    write!(f, ", {e}")?;
                }
                write!(f, ">")
            }
            Type::MemRef {
                shape,
                elem,
                layout,
                memory_space,
            } => {
                write!(f, "memref<")?;
                write_shape(f, shape)?;
                write!(f, "{elem}")?;
                if let Some(l) = layout {
                    write!(f, ", {l}")?;
                }
                if let Some(m) = memory_space {
                    write!(f, ", {m}")?;
                }
                write!(f, ">")
            }
            Type::Vector {
                shape,
                scalable,
                elem,
            } => {
                write!(f, "vector<")?;
                for (i, d) in shape.iter().enumerate() {
                    if scalable.get(i).copied().unwrap_or(false) {
                        write!(f, "[{d}]x")?;
                    } else {
                        write!(f, "{d}x")?;
                    }
                }
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
                if name.is_empty() {
                    write!(f, "!{dialect}")?;
                } else {
                    write!(f, "!{dialect}.{name}")?;
                }
                if let Some(b) = body {
                    write!(f, "<{b}>")?;
                }
                Ok(())
            }
        }
    }
}
