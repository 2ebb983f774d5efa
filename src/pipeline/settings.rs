//! The `[pipeline]` settings, declared once: each [`Setting`] names its key, type and range,
//! default, doc and command-line flag, and that one declaration drives the pipeline-file
//! parser and writer, the pipeline-file docs, the validation of [`Settings`] built in Rust
//! and the `stokehold` override flags.
//!
//! ```
//! use stokehold::pipeline::settings::{self, SETTINGS};
//! use stokehold::pipeline::Settings;
//!
//! let batch = settings::find("batch").unwrap();
//! let mut s = Settings::default();
//! batch.apply(&mut s, &64i64.into()).unwrap();
//! assert_eq!(s.batch, 64);
//! let e = batch.apply(&mut s, &0i64.into()).unwrap_err();
//! assert_eq!(e.message, "`batch` = 0 is out of range: it must be at least 1");
//! assert!(SETTINGS.iter().any(|s| s.flag.long == "prefetch"));
//! ```

use crate::schema::{closest, ArgSpec, ArgType, ArgValue};

use super::spec::{BatchMemory, DeviceChoice, OnError, Settings, SpecError, SpecPointer};

/// The command-line flag that overrides a setting: `--{long} {value_name}`.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// The long flag, without dashes.
    pub long: &'static str,
    /// The placeholder shown in `--help`.
    pub value_name: &'static str,
    /// One line of `--help`.
    pub help: &'static str,
}

/// How a setting that may be left unset is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// The setting always has a value.
    Never,
    /// A file writes "unset" as this integer, which means the text given
    /// (`threads = 0`: one per core).
    AsInt(i64, &'static str),
    /// Only Rust can leave it unset (meaning the text given); a file can't say it.
    RustOnly(&'static str),
}

/// One `[pipeline]` setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Key, type and range, default (as TOML text) and doc: the shape operator arguments
    /// are declared in. The range is that of a set value ([`Setting::unset`] aside).
    pub spec: ArgSpec,
    /// Whether, and how, the setting can be left unset.
    pub unset: Unset,
    /// The command-line override flag.
    pub flag: Flag,
    get: fn(&Settings) -> Option<ArgValue>,
    set: fn(&mut Settings, Option<&ArgValue>),
}

/// What is wrong with a setting's value, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// What is wrong.
    pub message: String,
    /// What to change.
    pub help: String,
}

const COUNT: ArgType = ArgType::Int {
    min: 1,
    max: i64::MAX,
};
/// The most worker threads a pipeline takes: more than any machine's cores, and each thread
/// costs a stack and buffers of its own (100,000 ran the process out of memory).
pub const MAX_THREADS: usize = 1024;

const THREADS: ArgType = ArgType::Int {
    min: 1,
    max: MAX_THREADS as i64,
};
const NATURAL: ArgType = ArgType::Int {
    min: 0,
    max: i64::MAX,
};

fn int(v: Option<&ArgValue>) -> i64 {
    match v {
        Some(ArgValue::Int(i)) => *i,
        // `apply` checks the type before it sets anything.
        _ => 0,
    }
}

fn usize_of(v: Option<&ArgValue>) -> usize {
    usize::try_from(int(v)).unwrap_or(usize::MAX)
}

fn str_of(v: Option<&ArgValue>) -> &str {
    match v {
        Some(ArgValue::Str(s)) => s,
        _ => "",
    }
}

fn count(n: usize) -> Option<ArgValue> {
    Some(ArgValue::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// Every setting of `[pipeline]`, in the order files are written and documented
/// (`outputs`, the one key of `[pipeline]` that is about the graph, is not a setting).
pub const SETTINGS: &[Setting] = &[
    Setting {
        spec: ArgSpec {
            name: "batch",
            ty: COUNT,
            default: Some("32"),
            doc: "samples per batch",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "batch",
            value_name: "N",
            help: "Samples per batch",
        },
        get: |s| count(s.batch),
        set: |s, v| s.batch = usize_of(v),
    },
    Setting {
        spec: ArgSpec {
            name: "threads",
            ty: THREADS,
            default: Some("0"),
            doc: "worker threads",
        },
        unset: Unset::AsInt(0, "one per core (on the GPU path with JPEG engines half, at least 2 where the cores allow, the rest parked until the engines take almost none of the photos)"),
        flag: Flag {
            long: "threads",
            value_name: "N",
            help: "Worker threads",
        },
        get: |s| s.threads.and_then(count),
        set: |s, v| s.threads = v.map(|v| usize_of(Some(v))),
    },
    Setting {
        spec: ArgSpec {
            name: "prefetch",
            ty: COUNT,
            default: Some("2"),
            doc: "batches prepared ahead of the consumer",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "prefetch",
            value_name: "N",
            help: "Batches prepared ahead of the consumer",
        },
        get: |s| count(s.prefetch),
        set: |s, v| s.prefetch = usize_of(v),
    },
    Setting {
        spec: ArgSpec {
            name: "seed",
            ty: NATURAL,
            default: Some("0"),
            doc: "seed of every random choice (same seed, same batches)",
        },
        unset: Unset::RustOnly("above the largest seed a file can hold"),
        flag: Flag {
            long: "seed",
            value_name: "N",
            help: "Seed of every random choice (same seed, same batches)",
        },
        get: |s| i64::try_from(s.seed).ok().map(ArgValue::Int),
        set: |s, v| s.seed = u64::try_from(int(v)).unwrap_or(0),
    },
    Setting {
        spec: ArgSpec {
            name: "epochs",
            ty: COUNT,
            default: Some("1"),
            doc: "passes over the dataset",
        },
        unset: Unset::RustOnly("unbounded"),
        flag: Flag {
            long: "epochs",
            value_name: "N",
            help: "Passes over the dataset (bench and tune: timed passes after the warm-up: the first pass, and the next while the GPU path's pools settle; compare: passes compared, 1 unless given)",
        },
        get: |s| {
            s.epochs
                .map(|n| ArgValue::Int(i64::try_from(n).unwrap_or(i64::MAX)))
        },
        set: |s, v| s.epochs = v.map(|v| u64::try_from(int(Some(v))).unwrap_or(1)),
    },
    Setting {
        spec: ArgSpec {
            name: "on_error",
            ty: ArgType::Choice(OnError::NAMES),
            default: Some("\"skip\""),
            doc: "a sample that can't be read, decoded or transformed is reported (path and \
                  cause) and dropped, its batch filled from the next samples (\"skip\"); or \
                  stops the run (\"fail\"); or is replaced by another sample chosen from the \
                  seed (\"replace\")",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "on-error",
            value_name: "POLICY",
            help: "What a bad sample does: skip it, fail the run, or replace it",
        },
        get: |s| Some(ArgValue::Str(s.on_error.name().to_string())),
        set: |s, v| s.on_error = OnError::from_name(str_of(v)).unwrap_or_default(),
    },
    Setting {
        spec: ArgSpec {
            name: "device",
            ty: ArgType::Choice(DeviceChoice::NAMES),
            default: Some("\"auto\""),
            doc: "where per-sample operators run: \"cpu\"; \"gpu\" or \"cuda\" (nvJPEG and the fused \
                  kernels, batches stay on the GPU; refused with the reason when it can't run); \
                  \"auto\" (the GPU when one is usable and the pipeline composes for it, else \
                  the CPU, saying why); \"emu\" (a test device: the GPU path with its kernels \
                  run on the CPU, slow)",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "device",
            value_name: "DEVICE",
            help: "Where per-sample operators run",
        },
        get: |s| Some(ArgValue::Str(s.device.name().to_string())),
        set: |s, v| s.device = DeviceChoice::from_name(str_of(v)).unwrap_or_default(),
    },
    Setting {
        spec: ArgSpec {
            name: "device_id",
            ty: NATURAL,
            default: Some("0"),
            doc: "GPU ordinal for the GPU path (and for the CPU path's uploads: `batch_memory`)",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "device-id",
            value_name: "N",
            help: "GPU ordinal for the GPU path",
        },
        get: |s| count(s.device_id),
        set: |s, v| s.device_id = usize_of(v),
    },
    Setting {
        spec: ArgSpec {
            name: "batch_memory",
            ty: ArgType::Choice(BatchMemory::NAMES),
            default: Some("\"auto\""),
            doc: "where finished batches are handed out: \"auto\" (where the path makes them: \
                  host memory on the CPU path, GPU memory on the GPU path); \"gpu\" or \"cuda\" (GPU \
                  memory on either path: the CPU path uploads each finished batch to GPU \
                  `device_id` through a pinned staging buffer, asynchronously, and hands it \
                  out with its ready event, as the GPU path does; refused at the start, with \
                  the reason, when there is no usable GPU); \"emu\" (the same upload to the \
                  emulated device, a test device); \"pinned\" (host memory page-locked by GPU \
                  `device_id`, for a consumer that copies batches to the GPU itself, \
                  asynchronously: the CPU path copies each finished batch into a pinned buffer \
                  reused from a pool, and `device = \"auto\"` takes the CPU path; refused at the \
                  start when there is no usable GPU to pin with); \"emu-pinned\" (the same with \
                  the emulated device's pinned memory, a test device)",
        },
        unset: Unset::Never,
        flag: Flag {
            long: "batch-memory",
            value_name: "MEMORY",
            help: "Where finished batches are handed out (gpu: the CPU path uploads them; pinned: host batches in pinned memory)",
        },
        get: |s| Some(ArgValue::Str(s.batch_memory.name().to_string())),
        set: |s, v| s.batch_memory = BatchMemory::from_name(str_of(v)).unwrap_or_default(),
    },
];

/// The setting called `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.spec.name == name)
}

/// The names of every setting, in declaration order.
pub fn names() -> Vec<&'static str> {
    SETTINGS.iter().map(|s| s.spec.name).collect()
}

/// Every setting of `settings` that holds a value out of its range (possible for settings
/// built in Rust), each pointing at its setting. Empty when all is well.
pub fn validate(settings: &Settings) -> Vec<SpecError> {
    SETTINGS
        .iter()
        .filter_map(|s| {
            let v = (s.get)(settings)?;
            let e = s.check(&v).err()?;
            Some(SpecError::new(SpecPointer::Setting(s.spec.name.into()), e.message).help(e.help))
        })
        .collect()
}

impl Setting {
    /// The key in `[pipeline]`.
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// Checks `value` (as written in a file or on the command line) and sets it in
    /// `settings`; the [`Unset::AsInt`] value leaves the setting unset.
    pub fn apply(&self, settings: &mut Settings, value: &ArgValue) -> Result<(), SettingError> {
        if let Unset::AsInt(n, _) = self.unset {
            if *value == ArgValue::Int(n) {
                (self.set)(settings, None);
                return Ok(());
            }
        }
        let value = self.check(value)?;
        (self.set)(settings, Some(&value));
        Ok(())
    }

    /// Resets the setting to its default.
    pub fn reset(&self, settings: &mut Settings) {
        (self.set)(settings, (self.get)(&Settings::default()).as_ref());
    }

    /// The value `settings` holds, as a file writes it; `None` when it is unset.
    pub fn value(&self, settings: &Settings) -> Option<ArgValue> {
        (self.get)(settings)
    }

    /// The type in words, for the docs and `--help`: the range, and the unset value.
    pub fn type_doc(&self) -> String {
        match self.unset {
            Unset::AsInt(n, meaning) => format!("{}, or {n}: {meaning}", self.spec.ty),
            _ => self.spec.ty.to_string(),
        }
    }

    /// Parses a command-line value into the value a file would hold: choices and strings as
    /// given, anything else read as a TOML value (so `--batch 16` is the integer 16).
    pub fn parse_flag(&self, text: &str) -> Result<ArgValue, SettingError> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let numeric = !matches!(self.spec.ty, ArgType::Choice(_) | ArgType::Str);
        if numeric && integer && text.parse::<i64>().is_err() {
            // TOML can't hold it either: out of range, not "a string".
            return Err(SettingError {
                message: format!("--{} {text} is out of range", self.flag.long),
                help: "integers must fit in 64 bits (signed)".into(),
            });
        }
        let value = match self.spec.ty {
            ArgType::Choice(_) | ArgType::Str => ArgValue::Str(text.to_string()),
            _ => format!("v = {text}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("v").map(crate::schema::from_toml))
                .unwrap_or_else(|| ArgValue::Str(text.to_string())),
        };
        let mut scratch = Settings::default();
        self.apply(&mut scratch, &value).map_err(|e| SettingError {
            message: self.as_flag(&e.message),
            help: self.as_flag(&e.help),
        })?;
        Ok(value)
    }

    /// A message about the file's `name = value` said as the command line writes it:
    /// `` `batch` = 0 `` becomes `--batch 0`, `` `batch = 32` `` becomes `` `--batch 32` ``.
    fn as_flag(&self, text: &str) -> String {
        let (name, long) = (self.spec.name, self.flag.long);
        let mut out = text.replace(&format!("`{name}` = "), &format!("--{long} "));
        out = out.replace(&format!("`{name}` "), &format!("--{long} "));
        // A quoted value after the flag, as a shell passes it: unquoted where a shell would
        // take it unquoted (an empty value or one with spaces keeps its quotes).
        let quoted = format!("--{long} \"");
        if let Some(at) = out.find(&quoted) {
            let value_at = at + quoted.len();
            if let Some(end) = out[value_at..].find('"') {
                if is_shell_word(&out[value_at..value_at + end]) {
                    out.remove(value_at + end);
                    out.remove(value_at - 1);
                }
            }
        }
        let assignment = format!("`{name} = ");
        while let Some(at) = out.find(&assignment) {
            let value_at = at + assignment.len();
            let end = out[value_at..]
                .find('`')
                .map_or(out.len(), |e| value_at + e);
            let value = out[value_at..end].trim_matches('"').to_string();
            out.replace_range(at..end, &format!("`--{long} {value}"));
        }
        out
    }

    /// An example value as a file writes it (the default).
    fn example(&self) -> &'static str {
        self.spec.default.unwrap_or("1")
    }

    /// The example an error's help gives: the default, or where the default is the value
    /// that leaves the setting unset (said beside it), the least value the type takes.
    fn help_example(&self) -> String {
        let default = self.example();
        match (self.unset, self.spec.ty) {
            (Unset::AsInt(n, _), ArgType::Int { min, .. }) if default == n.to_string() => {
                min.to_string()
            }
            _ => default.to_string(),
        }
    }

    /// Type and range of a set value.
    fn check(&self, v: &ArgValue) -> Result<ArgValue, SettingError> {
        let name = self.spec.name;
        let example = self.help_example();
        let or_unset = match self.unset {
            Unset::AsInt(n, meaning) => format!(", or `{name} = {n}` for {meaning}"),
            _ => String::new(),
        };
        match (self.spec.ty, v) {
            (ArgType::Int { min, max }, ArgValue::Int(n)) if (min..=max).contains(n) => {
                Ok(v.clone())
            }
            (ArgType::Int { min, max }, ArgValue::Int(n)) => {
                let bound = match (min, max) {
                    (0, i64::MAX) => "not be negative".to_string(),
                    (_, i64::MAX) => format!("be at least {min}"),
                    _ => format!("be in [{min}, {max}]"),
                };
                Err(SettingError {
                    message: format!("`{name}` = {n} is out of range: it must {bound}"),
                    help: format!(
                        "use an integer {}, e.g. `{name} = {example}`{or_unset}",
                        self.spec.ty.to_string().trim_start_matches("integer ")
                    ),
                })
            }
            (ArgType::Int { .. }, other) => Err(SettingError {
                message: format!(
                    "`{name}` must be an {}, got {}",
                    self.spec.ty,
                    other.kind_name()
                ),
                help: format!(
                    "write a whole number without quotes, e.g. `{name} = {example}`{or_unset}"
                ),
            }),
            (ArgType::Choice(choices), ArgValue::Str(s)) => {
                if choices.contains(&s.as_str()) {
                    return Ok(v.clone());
                }
                let list = quoted_list(choices);
                Err(SettingError {
                    message: format!("`{name}` = \"{s}\" is not one of {list}"),
                    help: match closest(s, choices) {
                        Some(c) => format!("did you mean \"{c}\"? (choices: {list})"),
                        None => format!("use one of {list}"),
                    },
                })
            }
            (ArgType::Choice(choices), other) => Err(SettingError {
                message: format!("`{name}` must be a string, got {}", other.kind_name()),
                help: format!("use one of {}", quoted_list(choices)),
            }),
            // Other types follow the operator-argument rules.
            _ => self.spec.check(v.clone()).map_err(|e| SettingError {
                help: e
                    .help
                    .unwrap_or_else(|| format!("e.g. `{name} = {example}`")),
                message: e.message,
            }),
        }
    }
}

fn quoted_list(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
    quoted.join(", ")
}

/// Whether a shell passes `value` as one word without quotes.
fn is_shell_word(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,+=@%".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_valid_and_matches_settings_default() {
        let defaults = Settings::default();
        for s in SETTINGS {
            let text = s.example();
            let v = s
                .parse_flag(text.trim_matches('"'))
                .unwrap_or_else(|e| panic!("{}: default {text} rejected: {}", s.name(), e.message));
            let mut from_default = Settings::default();
            s.apply(&mut from_default, &v).unwrap();
            assert_eq!(from_default, defaults, "{}", s.name());
            assert!(
                s.spec.doc.len() > 5 && !s.flag.help.is_empty(),
                "{}",
                s.name()
            );
        }
        assert!(validate(&defaults).is_empty());
    }

    #[test]
    fn every_setting_round_trips_through_its_value() {
        let s = Settings {
            batch: 7,
            threads: Some(3),
            prefetch: 5,
            seed: 11,
            epochs: Some(4),
            on_error: OnError::Replace,
            device: DeviceChoice::Cpu,
            device_id: 2,
            batch_memory: BatchMemory::Gpu,
        };
        let mut back = Settings::default();
        for setting in SETTINGS {
            let v = setting.value(&s).unwrap();
            setting.apply(&mut back, &v).unwrap();
        }
        assert_eq!(back, s);
        for setting in SETTINGS {
            setting.reset(&mut back);
        }
        assert_eq!(back, Settings::default());
    }

    #[test]
    fn unset_values_have_their_own_forms() {
        let s = Settings {
            threads: None,
            epochs: None,
            seed: u64::MAX,
            ..Settings::default()
        };
        let threads = find("threads").unwrap();
        assert_eq!(threads.value(&s), None);
        assert_eq!(
            threads.unset,
            Unset::AsInt(
                0,
                "one per core (on the GPU path with JPEG engines half, at least 2 where the cores allow, the rest parked until the engines take almost none of the photos)"
            )
        );
        let mut t = Settings {
            threads: Some(4),
            ..Settings::default()
        };
        threads.apply(&mut t, &ArgValue::Int(0)).unwrap();
        assert_eq!(t.threads, None);
        assert_eq!(find("epochs").unwrap().value(&s), None);
        assert_eq!(find("seed").unwrap().value(&s), None);
        assert_eq!(
            threads.type_doc(),
            "integer in [1, 1024], or 0: one per core (on the GPU path with JPEG engines half, at least 2 where the cores allow, the rest parked until the engines take almost none of the photos)"
        );
    }

    #[test]
    fn validate_reports_every_bad_value() {
        let s = Settings {
            batch: 0,
            prefetch: 0,
            threads: Some(0),
            epochs: Some(0),
            ..Settings::default()
        };
        let at: Vec<SpecPointer> = validate(&s).into_iter().map(|e| e.at).collect();
        let want: Vec<SpecPointer> = ["batch", "threads", "prefetch", "epochs"]
            .iter()
            .map(|n| SpecPointer::Setting(n.to_string()))
            .collect();
        assert_eq!(at, want);
        let e = &validate(&s)[1];
        assert_eq!(
            e.message,
            "`threads` = 0 is out of range: it must be in [1, 1024]"
        );
        assert!(e
            .help
            .as_deref()
            .unwrap()
            .contains("`threads = 0` for one per core (on the GPU path with JPEG engines half, at least 2 where the cores allow, the rest parked until the engines take almost none of the photos)"));
    }

    #[test]
    fn flags_parse_like_file_values() {
        let batch = find("batch").unwrap();
        assert_eq!(batch.parse_flag("16").unwrap(), ArgValue::Int(16));
        // Said as the command line writes it.
        assert_eq!(
            find("seed").unwrap().parse_flag("-1").unwrap_err().message,
            "--seed -1 is out of range: it must not be negative"
        );
        let e = batch.parse_flag("sixteen").unwrap_err();
        assert_eq!(e.message, "--batch must be an integer ≥ 1, got a string");
        assert!(e.help.contains("`--batch 32`"), "{}", e.help);
        let e = find("batch")
            .unwrap()
            .parse_flag("18446744073709551616")
            .unwrap_err();
        assert_eq!(e.message, "--batch 18446744073709551616 is out of range");
        let e = find("device").unwrap().parse_flag("tpu").unwrap_err();
        assert!(
            e.message.starts_with("--device tpu is not one of"),
            "{}",
            e.message
        );
        let e = find("threads").unwrap().parse_flag("x").unwrap_err();
        assert!(
            e.help
                .contains("`--threads 1`, or `--threads 0` for one per core (on the GPU path with JPEG engines half, at least 2 where the cores allow, the rest parked until the engines take almost none of the photos)"),
            "{}",
            e.help
        );
        let device = find("device").unwrap();
        assert_eq!(
            device.parse_flag("gpu").unwrap(),
            ArgValue::Str("gpu".into())
        );
        let e = device.parse_flag("gpuu").unwrap_err();
        assert!(e.help.contains("did you mean \"gpu\"?"), "{}", e.help);
        // PyTorch's name for it, in files and flags as in Python's keywords.
        let mut s = Settings::default();
        device
            .apply(&mut s, &device.parse_flag("cuda").unwrap())
            .unwrap();
        assert_eq!(s.device, DeviceChoice::Gpu);
        let memory = find("batch_memory").unwrap();
        memory
            .apply(&mut s, &memory.parse_flag("cuda").unwrap())
            .unwrap();
        assert_eq!(s.batch_memory, BatchMemory::Gpu);
        // A thread count no machine needs is refused before any thread starts.
        let e = find("threads").unwrap().parse_flag("100000").unwrap_err();
        assert!(e.message.contains("out of range"), "{}", e.message);
        assert!(e.help.contains("[1, 1024]"), "{}", e.help);
        s.threads = Some(MAX_THREADS + 1);
        assert_eq!(validate(&s).len(), 1);
        assert_eq!(
            find("on_error")
                .unwrap()
                .parse_flag("1")
                .unwrap_err()
                .message,
            "--on-error 1 is not one of \"skip\", \"fail\", \"replace\""
        );
        // A value a shell needs quotes for keeps them.
        for (value, said) in [("", "\"\""), ("sk ip", "\"sk ip\"")] {
            let e = find("on_error").unwrap().parse_flag(value).unwrap_err();
            assert!(
                e.message
                    .starts_with(&format!("--on-error {said} is not one of")),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn names_are_unique_and_flags_follow_them() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len());
        for s in SETTINGS {
            assert_eq!(s.flag.long, s.name().replace('_', "-"));
        }
    }
}
