//! Argument and port declarations shared by operators, the reader and pipeline settings:
//! what each kind takes (types, ranges, defaults, docs) and the validation of given values.
//! The same declarations validate pipeline files and the Rust builder, and generate the
//! pipeline-file reference.

use std::collections::BTreeMap;
use std::fmt;

use crate::value::{ImageType, ValueType};

mod arg_value;
pub use arg_value::{from_toml, ArgValue};

/// The type (and allowed range) of an argument.
#[derive(Debug, Clone, Copy)]
pub enum ArgType {
    /// `true` / `false`.
    Bool,
    /// An integer in `[min, max]`.
    Int {
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// A number in `[min, max]` (integers are accepted).
    Float {
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// One of the listed strings.
    Choice(&'static [&'static str]),
    /// Any string (a path, a name).
    Str,
    /// A size: one integer (square) or `[height, width]`, each in `[1, max]`.
    Size {
        /// Largest allowed side.
        max: i64,
    },
    /// A pair `[low, high]` with `min <= low <= high <= max`.
    Range {
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// `len` numbers (or one, repeated), each in `[min, max]`; `len == 0` allows any length ≥ 1.
    Floats {
        /// Required count (0: any).
        len: usize,
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// A list of integers each in `[min, max]`, with `len` entries (0: any ≥ 1).
    Ints {
        /// Required count (0: any).
        len: usize,
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArgType::Bool => write!(f, "bool"),
            ArgType::Int { min, max } if max == i64::MAX => write!(f, "integer ≥ {min}"),
            ArgType::Int { min, max } => write!(f, "integer in [{min}, {max}]"),
            ArgType::Float { min, max } => write!(f, "number in [{min}, {max}]"),
            ArgType::Choice(c) => {
                let quoted: Vec<String> = c.iter().map(|s| format!("\"{s}\"")).collect();
                write!(f, "one of {}", quoted.join(", "))
            }
            ArgType::Str => write!(f, "string"),
            ArgType::Size { .. } => write!(f, "an integer or [height, width]"),
            ArgType::Range { min, max } => write!(f, "[low, high] within [{min}, {max}]"),
            ArgType::Floats { len: 0, .. } => write!(f, "number or array of numbers"),
            ArgType::Floats { len, .. } => write!(f, "number or array of {len} numbers"),
            ArgType::Ints { len: 0, .. } => write!(f, "array of integers"),
            ArgType::Ints { len, .. } => write!(f, "array of {len} integers"),
        }
    }
}

impl ArgType {
    /// A valid value of this type as TOML text, for help lines.
    pub fn example(&self) -> String {
        let list = |n: usize, x: String| vec![x; n.max(1)].join(", ");
        match *self {
            ArgType::Bool => "true".to_string(),
            ArgType::Int { min, max } => min.max(0).min(max).to_string(),
            ArgType::Float { min, max } => format!("{:?}", min.max(0.0).min(max)),
            ArgType::Choice(c) => format!("\"{}\"", c.first().copied().unwrap_or("")),
            ArgType::Str => "\"...\"".to_string(),
            ArgType::Size { max } => 224.min(max).to_string(),
            ArgType::Range { min, max } => format!("[{min:?}, {max:?}]"),
            ArgType::Floats { len, min, .. } => format!("[{}]", list(len, format!("{min:?}"))),
            ArgType::Ints { len, min, .. } => format!("[{}]", list(len, min.to_string())),
        }
    }
}

/// The `default` of an argument that may be left out and then has no value.
pub const OPTIONAL: Option<&str> = Some("~");

/// One argument of an operator.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    /// Name in the pipeline file.
    pub name: &'static str,
    /// Type and range.
    pub ty: ArgType,
    /// Default, written as TOML; `None` means required; [`OPTIONAL`] means it may be left
    /// out and then has no value (check with [`Args::has`]).
    pub default: Option<&'static str>,
    /// One-line description.
    pub doc: &'static str,
}

impl ArgSpec {
    /// Checks `value` against this argument's type and range, as [`Args::validate`] does
    /// for each given argument, and returns it normalised (a scalar `Size` becomes a pair).
    pub fn check(&self, value: ArgValue) -> Result<ArgValue, ArgError> {
        check_type(self, value)
    }

    /// A valid value as TOML text: the default, else an example of the type.
    fn example(&self) -> String {
        match self.default {
            Some(d) if self.default != OPTIONAL => d.to_string(),
            _ => self.ty.example(),
        }
    }
}

/// An input or output port of an operator.
#[derive(Debug, Clone, Copy)]
pub struct PortSpec {
    /// Name of the port (for docs).
    pub name: &'static str,
    /// What flows through it.
    pub doc: &'static str,
}

/// Where an operator can run: what the pipeline-file docs say ("Runs on") and what the GPU
/// path must honour (a test holds every operator's declaration against the GPU path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backends {
    /// CPU only: the reader, and operators the GPU path can't run.
    CpuOnly,
    /// CPU, and on the GPU path: the decoder (nvJPEG), or a step of the fused chain after it.
    CpuAndGpu,
}

/// Everything about an operator kind (or the reader) that is known without running it. How an
/// operator is built from validated arguments is its module's `build` function.
#[derive(Debug, Clone, Copy)]
pub struct OpSchema {
    /// The `kind` string in pipeline files.
    pub kind: &'static str,
    /// A paragraph for the reference.
    pub doc: &'static str,
    /// Inputs, in order.
    pub inputs: &'static [PortSpec],
    /// Outputs, in order.
    pub outputs: &'static [PortSpec],
    /// Arguments.
    pub args: &'static [ArgSpec],
    /// Other names accepted for some arguments (none for most operators).
    pub aliases: &'static [ArgAlias],
    /// Where it can run.
    pub backends: Backends,
}

impl OpSchema {
    /// The argument `name` stands for: itself, or the argument it is an alias of.
    ///
    /// ```
    /// use stokehold::reader::SCHEMA;
    /// assert_eq!(SCHEMA.canonical_arg("shard_id"), "rank");
    /// assert_eq!(SCHEMA.canonical_arg("rank"), "rank");
    /// ```
    pub fn canonical_arg<'a>(&self, name: &'a str) -> &'a str {
        match self.aliases.iter().find(|a| a.alias == name) {
            Some(a) => a.name,
            None => name,
        }
    }
}

/// Another name accepted for an argument, e.g. a name users know from another library.
/// The pipeline-file docs list it under the operator's arguments.
#[derive(Debug, Clone, Copy)]
pub struct ArgAlias {
    /// The other name.
    pub alias: &'static str,
    /// The argument it stands for.
    pub name: &'static str,
}

/// The kind of the one graph node that is not an operator: the file reader, which runs on
/// the reader threads (see `crate::reader`).
pub const READER_KIND: &str = "file_reader";

/// An argument problem found while building an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgError {
    /// The argument (None: the operator as a whole).
    pub arg: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to change.
    pub help: Option<String>,
    /// The argument's name is what is wrong (unknown, given twice), not its value.
    pub about_name: bool,
}

impl ArgError {
    /// An error about one argument's value.
    pub fn arg(name: &str, message: impl Into<String>) -> ArgError {
        ArgError {
            arg: Some(name.to_string()),
            message: message.into(),
            help: None,
            about_name: false,
        }
    }

    /// An error about one argument's name (unknown, or given under two names).
    pub fn name(name: &str, message: impl Into<String>) -> ArgError {
        ArgError {
            about_name: true,
            ..ArgError::arg(name, message)
        }
    }

    /// Adds a suggestion.
    pub fn with_help(mut self, help: impl Into<String>) -> ArgError {
        self.help = Some(help.into());
        self
    }

    /// Names the argument as `given` wrote it: by its alias where the user wrote that, so
    /// that the error points at what is in the file.
    pub fn named_as_given(
        mut self,
        schema: &OpSchema,
        given: &BTreeMap<String, ArgValue>,
    ) -> ArgError {
        if let Some(arg) = self.arg.as_deref().filter(|a| !given.contains_key(*a)) {
            let written = schema
                .aliases
                .iter()
                .find(|a| a.name == arg && given.contains_key(a.alias));
            if let Some(a) = written {
                self.arg = Some(a.alias.to_string());
            }
        }
        self
    }
}

/// Validated arguments of one operator, defaults included.
#[derive(Debug, Clone, Default)]
pub struct Args {
    values: BTreeMap<String, ArgValue>,
}

impl Args {
    /// Checks `given` against `schema`, fills in defaults and normalises shapes
    /// (a scalar for `Floats`/`Size` becomes a list). Unknown names, wrong types and
    /// out-of-range values are errors naming the argument.
    pub fn validate(
        schema: &OpSchema,
        given: &BTreeMap<String, ArgValue>,
    ) -> Result<Args, ArgError> {
        let mut named: BTreeMap<&str, (&str, &ArgValue)> = BTreeMap::new();
        for (name, value) in given {
            let canonical = schema.canonical_arg(name);
            if let Some((other, _)) = named.insert(canonical, (name.as_str(), value)) {
                let (first, second) = if other == canonical {
                    (other, name.as_str())
                } else {
                    (name.as_str(), other)
                };
                return Err(ArgError::name(
                    second,
                    format!("'{second}' is another name for '{first}', which is given too"),
                )
                .with_help(format!("keep one of '{first}' and '{second}'")));
            }
            if !schema.args.iter().any(|a| a.name == canonical) {
                let known: Vec<&str> = schema.args.iter().map(|a| a.name).collect();
                let mut e = ArgError::name(
                    name,
                    format!("unknown argument '{name}' for operator '{}'", schema.kind),
                );
                e.help = Some(match closest(name, &known) {
                    Some(c) => format!("did you mean '{c}'? (arguments: {})", known.join(", ")),
                    None if known.is_empty() => format!("'{}' takes no arguments", schema.kind),
                    None => format!("arguments of '{}': {}", schema.kind, known.join(", ")),
                });
                return Err(e);
            }
        }
        let mut values = BTreeMap::new();
        for spec in schema.args {
            let v = match named.get(spec.name) {
                Some((_, v)) => (*v).clone(),
                None if spec.default == OPTIONAL => continue,
                None => match spec.default {
                    Some(d) => parse_default(d),
                    None => {
                        return Err(ArgError::arg(
                            spec.name,
                            format!(
                                "operator '{}' needs argument '{}' ({})",
                                schema.kind, spec.name, spec.ty
                            ),
                        )
                        .with_help(format!("add `{} = ...`: {}", spec.name, spec.doc)))
                    }
                },
            };
            let v = check_type(spec, v).map_err(|e| e.named_as_given(schema, given))?;
            values.insert(spec.name.to_string(), v);
        }
        Ok(Args { values })
    }

    /// True when the argument has a value (given, or a default).
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Raw access.
    pub fn get(&self, name: &str) -> Option<&ArgValue> {
        self.values.get(name)
    }

    fn expect(&self, name: &str) -> &ArgValue {
        self.values
            .get(name)
            .unwrap_or_else(|| panic!("argument '{name}' is not in the schema"))
    }

    /// A validated `Bool`.
    pub fn bool(&self, name: &str) -> bool {
        matches!(self.expect(name), ArgValue::Bool(true))
    }

    /// A validated `Int`.
    pub fn int(&self, name: &str) -> i64 {
        match self.expect(name) {
            ArgValue::Int(i) => *i,
            other => panic!("argument '{name}' is {other:?}, not an integer"),
        }
    }

    /// A validated `Float` (or `Int`).
    pub fn float(&self, name: &str) -> f64 {
        self.expect(name)
            .as_f64()
            .unwrap_or_else(|| panic!("argument '{name}' is not a number"))
    }

    /// A validated `Str` or `Choice`.
    pub fn str(&self, name: &str) -> &str {
        match self.expect(name) {
            ArgValue::Str(s) => s,
            other => panic!("argument '{name}' is {other:?}, not a string"),
        }
    }

    /// An optional string: the empty string means "not given".
    pub fn opt_str(&self, name: &str) -> Option<&str> {
        Some(self.str(name)).filter(|s| !s.is_empty())
    }

    /// A validated `Size` as `(height, width)`.
    pub fn size(&self, name: &str) -> (usize, usize) {
        let v = self.floats(name);
        (v[0] as usize, v[1] as usize)
    }

    /// A validated `Range` as `(low, high)`.
    pub fn range(&self, name: &str) -> (f64, f64) {
        let v = self.floats(name);
        (v[0], v[1])
    }

    /// A validated list of numbers (`Floats`, `Size`, `Range`, `Ints`).
    pub fn floats(&self, name: &str) -> Vec<f64> {
        match self.expect(name) {
            ArgValue::List(v) => v.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect(),
            other => vec![other.as_f64().unwrap_or(f64::NAN)],
        }
    }
}

fn parse_default(d: &str) -> ArgValue {
    let doc = format!("v = {d}");
    let table: toml::Table = doc
        .parse()
        .unwrap_or_else(|e| panic!("schema default `{d}` is not TOML: {e}"));
    from_toml(&table["v"])
}

fn type_error(spec: &ArgSpec, got: &ArgValue) -> ArgError {
    let quoted_number = matches!(got, ArgValue::Str(_))
        && !matches!(spec.ty, ArgType::Str | ArgType::Choice(_) | ArgType::Bool);
    let how = if quoted_number {
        "write it without quotes, e.g."
    } else {
        "write e.g."
    };
    ArgError::arg(
        spec.name,
        format!(
            "argument '{}' must be {}, got {} ({got})",
            spec.name,
            spec.ty,
            got.kind_name()
        ),
    )
    .with_help(format!("{how} `{} = {}`", spec.name, spec.example()))
}

/// `got` out of `[lo, hi]`; `element`: its index where the argument is a list (`whole`).
fn range_error(
    spec: &ArgSpec,
    got: &ArgValue,
    element: Option<(usize, &ArgValue)>,
    (lo, hi): (f64, f64),
) -> ArgError {
    let what = match element {
        Some((i, whole)) => format!("argument '{0}' = {whole}: {0}[{i}] = {got}", spec.name),
        None => format!("argument '{}' = {got}", spec.name),
    };
    let value = got.as_f64().unwrap_or(f64::NAN);
    ArgError::arg(spec.name, format!("{what} is out of range"))
        .with_help(format!("use {}", bounds_in_words(lo, hi, value)))
}

/// `[lo, hi]` as a reader says it, for a rejected `value`: a bound at the edge of what the
/// type holds (`f32::MAX`, `i64::MAX`) is no bound, and the smallest positive float means
/// "greater than 0" — unless `value` is past that very edge, which is then said as it is.
fn bounds_in_words(lo: f64, hi: f64, value: f64) -> String {
    const HUGE: f64 = 1e15;
    let above_zero = lo > 0.0 && lo < 1e-30;
    if value.is_finite() {
        if value > hi && hi >= HUGE {
            return format!("a value of at most {hi:e}");
        }
        if value < lo && (lo <= -HUGE || (above_zero && value > 0.0)) {
            return format!("a value of at least {lo:e}");
        }
    }
    match (lo <= -HUGE, above_zero, hi >= HUGE) {
        (true, _, true) => "a finite value".into(),
        (true, _, false) => format!("a value of at most {hi}"),
        (_, true, true) => "a value greater than 0".into(),
        (_, true, false) => format!("a value greater than 0 and at most {hi}"),
        (false, false, true) => format!("a value of at least {lo}"),
        (false, false, false) => format!("values in [{lo}, {hi}]"),
    }
}

fn check_type(spec: &ArgSpec, v: ArgValue) -> Result<ArgValue, ArgError> {
    let num_in = |x: &ArgValue, element: Option<(usize, &ArgValue)>, lo: f64, hi: f64| {
        let f = x.as_f64().ok_or_else(|| type_error(spec, x))?;
        if !(f.is_finite() && f >= lo && f <= hi) {
            return Err(range_error(spec, x, element, (lo, hi)));
        }
        Ok(f)
    };
    match spec.ty {
        ArgType::Bool => match v {
            ArgValue::Bool(_) => Ok(v),
            _ => Err(type_error(spec, &v)),
        },
        ArgType::Int { min, max } => match v {
            ArgValue::Int(i) if i >= min && i <= max => Ok(v),
            ArgValue::Int(_) => Err(range_error(spec, &v, None, (min as f64, max as f64))),
            _ => Err(type_error(spec, &v)),
        },
        ArgType::Float { min, max } => {
            let f = num_in(&v, None, min, max)?;
            Ok(ArgValue::Float(f))
        }
        ArgType::Str => match v {
            ArgValue::Str(_) => Ok(v),
            _ => Err(type_error(spec, &v)),
        },
        ArgType::Choice(choices) => match &v {
            ArgValue::Str(s) if choices.contains(&s.as_str()) => Ok(v),
            ArgValue::Str(s) => {
                let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
                let mut e = ArgError::arg(
                    spec.name,
                    format!("argument '{}' = \"{s}\" is not a valid choice", spec.name),
                );
                e.help = Some(match closest(s, choices) {
                    Some(c) => format!("did you mean \"{c}\"? (choices: {})", quoted.join(", ")),
                    None => format!("use one of {}", quoted.join(", ")),
                });
                Err(e)
            }
            _ => Err(type_error(spec, &v)),
        },
        ArgType::Size { max } => {
            let items = match &v {
                ArgValue::Int(_) => vec![v.clone(), v.clone()],
                ArgValue::List(l) if l.len() == 2 => l.clone(),
                _ => return Err(type_error(spec, &v)),
            };
            let listed = matches!(v, ArgValue::List(_));
            for (k, x) in items.iter().enumerate() {
                match x {
                    ArgValue::Int(i) if *i >= 1 && *i <= max => {}
                    ArgValue::Int(_) => {
                        let element = listed.then_some((k, &v));
                        return Err(range_error(spec, x, element, (1.0, max as f64)));
                    }
                    _ => return Err(type_error(spec, &v)),
                }
            }
            Ok(ArgValue::List(items))
        }
        ArgType::Range { min, max } => {
            let ArgValue::List(l) = &v else {
                return Err(type_error(spec, &v));
            };
            if l.len() != 2 {
                return Err(type_error(spec, &v));
            }
            let lo = num_in(&l[0], Some((0, &v)), min, max)?;
            let hi = num_in(&l[1], Some((1, &v)), min, max)?;
            if lo > hi {
                return Err(ArgError::arg(
                    spec.name,
                    format!("argument '{}' = {v}: low is greater than high", spec.name),
                )
                .with_help("write [low, high] with low <= high"));
            }
            Ok(ArgValue::List(vec![
                ArgValue::Float(lo),
                ArgValue::Float(hi),
            ]))
        }
        ArgType::Floats { len, min, max } => {
            let items = match &v {
                ArgValue::Int(_) | ArgValue::Float(_) => vec![v.clone(); len.max(1)],
                ArgValue::List(l) if (len == 0 && !l.is_empty()) || l.len() == len => l.clone(),
                ArgValue::List(l) => {
                    return Err(ArgError::arg(
                        spec.name,
                        format!(
                            "argument '{}' has {} values, needs {len}",
                            spec.name,
                            l.len()
                        ),
                    )
                    .with_help(format!(
                        "give one value for all or {len}: `{} = {}`",
                        spec.name,
                        spec.example()
                    )))
                }
                _ => return Err(type_error(spec, &v)),
            };
            let mut out = Vec::with_capacity(items.len());
            let listed = matches!(v, ArgValue::List(_));
            for (i, x) in items.iter().enumerate() {
                let element = listed.then_some((i, &v));
                out.push(ArgValue::Float(num_in(x, element, min, max)?));
            }
            Ok(ArgValue::List(out))
        }
        ArgType::Ints { len, min, max } => {
            let ArgValue::List(l) = &v else {
                return Err(type_error(spec, &v));
            };
            if (len == 0 && l.is_empty()) || (len != 0 && l.len() != len) {
                return Err(type_error(spec, &v));
            }
            for (k, x) in l.iter().enumerate() {
                match x {
                    ArgValue::Int(i) if *i >= min && *i <= max => {}
                    ArgValue::Int(_) => {
                        return Err(range_error(
                            spec,
                            x,
                            Some((k, &v)),
                            (min as f64, max as f64),
                        ))
                    }
                    _ => return Err(type_error(spec, &v)),
                }
            }
            Ok(v)
        }
    }
}

/// The closest candidate by edit distance, if it is close enough to be a likely typo; one
/// that differs only in case (`"hwc"` for `"HWC"`) first.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if let Some(c) = candidates.iter().find(|c| c.eq_ignore_ascii_case(word)) {
        return Some(c);
    }
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Helper for operators: the single image input type, or a message saying what was given.
pub fn expect_image(kind: &str, inputs: &[ValueType]) -> Result<ImageType, String> {
    match inputs {
        [ValueType::Image(t)] => Ok(*t),
        [other] => Err(format!(
            "'{kind}' takes images, but its input carries {other}"
        )),
        _ => Err(format!("'{kind}' takes exactly one input")),
    }
}

/// Helper for the geometric resamplers: the single input must carry 8-bit HWC images.
pub fn expect_u8_hwc(kind: &str, inputs: &[ValueType]) -> Result<ImageType, String> {
    let t = expect_image(kind, inputs)?;
    if t.dtype != crate::image::DType::U8 || t.layout != crate::image::Layout::Hwc {
        return Err(format!(
            "{kind} works on u8 HWC images, but its input carries {}; place it before \
             normalize/cast/layout",
            ValueType::Image(t)
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ty: ArgType) -> ArgSpec {
        ArgSpec {
            name: "std",
            ty,
            default: None,
            doc: "",
        }
    }

    fn refused(ty: ArgType, value: ArgValue) -> (String, String) {
        let e = spec(ty).check(value).unwrap_err();
        (e.message, e.help.unwrap_or_default())
    }

    #[test]
    fn a_value_out_of_range_is_named_and_its_bounds_said_in_words() {
        let positive = ArgType::Floats {
            len: 0,
            min: f32::MIN_POSITIVE as f64,
            max: f32::MAX as f64,
        };
        let list = ArgValue::List(vec![
            ArgValue::Float(58.395),
            ArgValue::Int(0),
            ArgValue::Float(57.375),
        ]);
        let (message, help) = refused(positive, list);
        assert_eq!(
            message,
            "argument 'std' = [58.395, 0, 57.375]: std[1] = 0 is out of range"
        );
        assert_eq!(help, "use a value greater than 0");
        let (message, help) = refused(positive, ArgValue::Int(0));
        assert_eq!(message, "argument 'std' = 0 is out of range");
        assert_eq!(help, "use a value greater than 0");
        let unit = ArgType::Float { min: 0.0, max: 1.0 };
        assert_eq!(
            refused(unit, ArgValue::Float(1.5)).1,
            "use values in [0, 1]"
        );
        let at_least_one = ArgType::Int {
            min: 1,
            max: i64::MAX,
        };
        assert_eq!(
            refused(at_least_one, ArgValue::Int(0)).1,
            "use a value of at least 1"
        );
        // Past an edge the words otherwise leave out, that edge is said.
        let below = refused(positive, ArgValue::Float(1e-39)).1;
        assert_eq!(
            below,
            format!("use a value of at least {:e}", f32::MIN_POSITIVE as f64)
        );
        let above = refused(positive, ArgValue::Float(1e39)).1;
        assert_eq!(
            above,
            format!("use a value of at most {:e}", f32::MAX as f64)
        );
        let any = ArgType::Float {
            min: -(f32::MAX as f64),
            max: f32::MAX as f64,
        };
        assert!(refused(any, ArgValue::Float(-1e39))
            .1
            .starts_with("use a value of at least -3.4"));
        let size = ArgType::Size { max: 1 << 16 };
        let pair = ArgValue::List(vec![ArgValue::Int(224), ArgValue::Int(0)]);
        assert_eq!(
            refused(size, pair).0,
            "argument 'std' = [224, 0]: std[1] = 0 is out of range"
        );
    }
}
