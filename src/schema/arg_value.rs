//! The values given for arguments ([`ArgValue`]): what the pipeline file and the Rust
//! builder hand to the schema, and the conversions that let the builder take plain values.

use std::fmt;
use std::path::{Path, PathBuf};

/// A value given for an argument (from TOML or from the builder). Booleans, numbers,
/// strings, paths and arrays of those convert into one, so the builder takes them as they
/// are:
///
/// ```
/// use stokehold::pipeline::OpSpec;
///
/// let dir = std::env::temp_dir();
/// let reader = OpSpec::new("file_reader").arg("root", dir.as_path()).arg("shuffle", true);
/// let crop = OpSpec::new("random_resized_crop").arg("size", [224, 224]).arg("scale", [0.08, 1.0]);
/// # let _ = (reader, crop);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    List(Vec<ArgValue>),
}

impl ArgValue {
    /// A short name of the kind of value, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ArgValue::Bool(_) => "a boolean",
            ArgValue::Int(_) => "an integer",
            ArgValue::Float(_) => "a float",
            ArgValue::Str(_) => "a string",
            ArgValue::List(_) => "an array",
        }
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match *self {
            ArgValue::Int(i) => Some(i as f64),
            ArgValue::Float(f) => Some(f),
            _ => None,
        }
    }
}

impl fmt::Display for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Bool(b) => write!(f, "{b}"),
            ArgValue::Int(i) => write!(f, "{i}"),
            ArgValue::Float(x) => {
                if x.fract() == 0.0 && x.abs() < 1e15 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x}")
                }
            }
            ArgValue::Str(s) => write!(f, "{s:?}"),
            ArgValue::List(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

macro_rules! impl_from_arg {
    ($t:ty, $v:ident => $e:expr) => {
        impl From<$t> for ArgValue {
            fn from($v: $t) -> Self {
                $e
            }
        }
    };
}
impl_from_arg!(bool, v => ArgValue::Bool(v));
impl_from_arg!(i64, v => ArgValue::Int(v));
impl_from_arg!(i32, v => ArgValue::Int(v.into()));
impl_from_arg!(u32, v => ArgValue::Int(v.into()));
impl_from_arg!(usize, v => ArgValue::Int(v as i64));
impl_from_arg!(f64, v => ArgValue::Float(v));
impl_from_arg!(f32, v => ArgValue::Float(v.into()));
impl_from_arg!(&str, v => ArgValue::Str(v.to_string()));
impl_from_arg!(String, v => ArgValue::Str(v));
impl From<&Path> for ArgValue {
    /// A path as a string argument (`.arg("root", dir.path())`); a path that is not valid
    /// UTF-8 is converted lossily.
    fn from(v: &Path) -> Self {
        ArgValue::Str(v.to_string_lossy().into_owned())
    }
}
impl From<PathBuf> for ArgValue {
    /// As for `&Path`.
    fn from(v: PathBuf) -> Self {
        ArgValue::from(v.as_path())
    }
}
impl From<&PathBuf> for ArgValue {
    /// As for `&Path`.
    fn from(v: &PathBuf) -> Self {
        ArgValue::from(v.as_path())
    }
}
impl<T: Into<ArgValue>, const N: usize> From<[T; N]> for ArgValue {
    fn from(v: [T; N]) -> Self {
        ArgValue::List(v.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<ArgValue>> From<Vec<T>> for ArgValue {
    fn from(v: Vec<T>) -> Self {
        ArgValue::List(v.into_iter().map(Into::into).collect())
    }
}

/// Converts a plain TOML value into an [`ArgValue`].
pub fn from_toml(v: &toml::Value) -> ArgValue {
    match v {
        toml::Value::Boolean(b) => ArgValue::Bool(*b),
        toml::Value::Integer(i) => ArgValue::Int(*i),
        toml::Value::Float(f) => ArgValue::Float(*f),
        toml::Value::String(s) => ArgValue::Str(s.clone()),
        toml::Value::Array(a) => ArgValue::List(a.iter().map(from_toml).collect()),
        other => ArgValue::Str(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_string_arguments() {
        let p = Path::new("/data/train set");
        assert_eq!(ArgValue::from(p), ArgValue::Str("/data/train set".into()));
        assert_eq!(ArgValue::from(p.to_path_buf()), ArgValue::from(p));
        assert_eq!(ArgValue::from(&p.to_path_buf()), ArgValue::from(p));
    }
}
