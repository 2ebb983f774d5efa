//! From `stokehold.Pipeline(...)`'s arguments to a validated graph: the pipeline (a file or
//! a dict), the keyword settings laid over it, and the rank taken from the arguments or from
//! torchrun's environment (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`).

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use stokehold::pipeline::file::Draft;
use stokehold::pipeline::graph::Graph;
use stokehold::pipeline::settings::{self, Setting, SettingError};
use stokehold::pipeline::{BatchMemory, DeviceChoice, PipelineSpec, Settings};
use stokehold::reader::shards::list::data_exists;
use stokehold::schema::{ArgType, ArgValue};
use stokehold::Error;

use crate::dict_spec::{self, DictText};
use crate::errors::{self, data_err, pipeline_err, to_py};

/// The keyword arguments of `stokehold.Pipeline`, as given.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data: Option<PathBuf>,
    /// `None`: the pipeline's own `device` (its GPU this rank's under torchrun).
    pub device: Option<String>,
    pub batch: Option<i64>,
    pub threads: Option<i64>,
    pub seed: Option<i64>,
    pub epochs: Option<i64>,
    pub prefetch: Option<i64>,
    pub on_error: Option<String>,
    pub batch_memory: Option<String>,
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
}

/// This process's place among the data-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// (rank, world size) when given or set by torchrun; `None` leaves the pipeline file's
    /// (its reader's `rank`/`world_size`).
    pub given: Option<(usize, usize)>,
    /// The GPU of this rank, where torchrun set it (`LOCAL_RANK`).
    pub local_rank: Option<usize>,
}

/// Where the pipeline definition came from, to tell its problems in its own terms.
pub enum Source {
    File,
    Dict(DictText),
}

impl Source {
    /// Every problem found, as one `stokehold.PipelineError` whose `errors` holds one
    /// exception per problem (placed at the file's line and column, or the dict's key).
    pub fn problems(&self, py: Python<'_>, errors: Vec<Error>) -> PyErr {
        let each: Vec<PyErr> = errors.into_iter().map(|e| self.one(py, e)).collect();
        errors::all_problems(py, each)
    }

    fn one(&self, py: Python<'_>, e: Error) -> PyErr {
        match (self, e) {
            (
                Source::Dict(text),
                Error::Config {
                    line,
                    message,
                    help,
                    ..
                },
            ) => pipeline_err(
                py,
                format!(
                    "pipeline dict, at {}: {}",
                    text.origin(line),
                    dict_spec::in_dict_terms(&message)
                ),
                help.map(|h| dict_spec::in_dict_terms(&h)).as_deref(),
            ),
            (_, other) => to_py(py, other),
        }
    }
}

/// Reads the pipeline argument (a path, str or os.PathLike, or a dict) as a draft to lay
/// the keyword settings over before [`check`].
pub fn load(py: Python<'_>, pipeline: &Bound<'_, PyAny>) -> PyResult<(Draft, Source)> {
    if let Ok(d) = pipeline.cast::<PyDict>() {
        let text = dict_spec::to_text(d)?;
        let draft = Draft::parse(&text.text, Path::new("<dict>"));
        return Ok((draft, Source::Dict(text)));
    }
    let path: PathBuf = pipeline.extract().map_err(|_| {
        pipeline_err(
            py,
            format!(
                "the pipeline must be a pipeline file's path or a dict, got {}",
                pipeline
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ),
            Some("pass e.g. stokehold.pipelines.path(\"resnet50-train\"), a pipeline file's path, or a dict of the same structure"),
        )
    })?;
    if !path.is_file() {
        return Err(pipeline_err(
            py,
            format!("{}: no such pipeline file", path.display()),
            Some("pass the path of a pipeline file (TOML), or a shipped one: stokehold.pipelines.path(\"resnet50-train\")"),
        ));
    }
    let draft = py.detach(|| Draft::load(&path)).map_err(|e| to_py(py, e))?;
    Ok((draft, Source::File))
}

/// An environment variable as a non-negative integer, if set.
fn env_index(py: Python<'_>, name: &str) -> PyResult<Option<usize>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v.trim().parse().map(Some).map_err(|_| {
            pipeline_err(
                py,
                format!("environment variable {name}={v:?} is not a non-negative integer"),
                Some("torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; unset them or fix them"),
            )
        }),
    }
}

fn non_negative(py: Python<'_>, name: &str, v: i64) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| pipeline_err(py, format!("{name} = {v} is negative"), None))
}

/// This process's rank: the arguments, else torchrun's environment, else rank 0 of 1.
pub fn rank(py: Python<'_>, o: &Overrides) -> PyResult<Rank> {
    let rank = match o.rank {
        Some(r) => Some(non_negative(py, "rank", r)?),
        None => env_index(py, "RANK")?,
    };
    let world_size = match o.world_size {
        Some(w) => Some(non_negative(py, "world_size", w)?),
        None => env_index(py, "WORLD_SIZE")?,
    };
    let local_rank = env_index(py, "LOCAL_RANK")?;
    let (rank, world_size) = match (rank, world_size) {
        (None, None) => {
            return Ok(Rank {
                given: None,
                local_rank,
            })
        }
        (Some(r), Some(w)) => (r, w),
        (Some(_), None) => {
            return Err(pipeline_err(
                py,
                "a rank is given but no world size",
                Some("pass world_size= too (or set WORLD_SIZE)"),
            ))
        }
        (None, Some(w)) if w <= 1 => (0, w.max(1)),
        (None, Some(w)) => {
            return Err(pipeline_err(
                py,
                format!("the world size is {w} but no rank is given"),
                Some("pass rank= too (or set RANK), as torchrun does"),
            ))
        }
    };
    if world_size == 0 || rank >= world_size {
        return Err(pipeline_err(
            py,
            format!("rank {rank} of world size {world_size}: ranks count from 0 and must be less than the world size"),
            None,
        ));
    }
    Ok(Rank {
        given: Some((rank, world_size)),
        local_rank,
    })
}

/// The device choice for `device`, and the GPU ordinal if it names one: "auto" (the GPU
/// path on this rank's GPU when it can run, else the CPU), "cpu", "cuda"/"gpu" (this rank's
/// GPU), "cuda:N", or "emu" (the emulated device: the GPU path without a GPU, a test device).
/// The names are Python's (PyTorch's device strings); the settings are then set through the
/// settings schema like the others.
fn device(py: Python<'_>, device: &str) -> PyResult<(DeviceChoice, Option<usize>)> {
    let d = device.trim().to_ascii_lowercase();
    Ok(match d.as_str() {
        "auto" => (DeviceChoice::Auto, None),
        "cpu" => (DeviceChoice::Cpu, None),
        "emu" => (DeviceChoice::Emu, None),
        "cuda" | "gpu" => (DeviceChoice::Gpu, None),
        _ => match d.strip_prefix("cuda:").or_else(|| d.strip_prefix("gpu:")) {
            Some(n) => match n.parse() {
                Ok(id) => (DeviceChoice::Gpu, Some(id)),
                Err(_) => return Err(bad_device(py, device)),
            },
            None => return Err(bad_device(py, device)),
        },
    })
}

fn bad_device(py: Python<'_>, device: &str) -> PyErr {
    pipeline_err(
        py,
        format!("device={device:?} is not a device"),
        Some("use \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or \"emu\" (the emulated device)"),
    )
}

/// The `batch_memory` choice and the GPU ordinal if it names one: "auto" (host batches on
/// the CPU path), "cuda"/"gpu" (the pipeline's GPU), "cuda:N", "emu" (the emulated device, a
/// test device), "pinned" (host batches pinned by the pipeline's GPU) or "emu-pinned" (pinned
/// by the emulated device, a test device).
fn batch_memory(py: Python<'_>, memory: &str) -> PyResult<(BatchMemory, Option<usize>)> {
    let m = memory.trim().to_ascii_lowercase();
    Ok(match m.as_str() {
        "auto" => (BatchMemory::Auto, None),
        "emu" => (BatchMemory::Emu, None),
        "pinned" => (BatchMemory::Pinned, None),
        "emu-pinned" => (BatchMemory::EmuPinned, None),
        "cuda" | "gpu" => (BatchMemory::Gpu, None),
        _ => match m.strip_prefix("cuda:").or_else(|| m.strip_prefix("gpu:")) {
            Some(n) => match n.parse() {
                Ok(id) => (BatchMemory::Gpu, Some(id)),
                Err(_) => return Err(bad_batch_memory(py, memory)),
            },
            None => return Err(bad_batch_memory(py, memory)),
        },
    })
}

fn bad_batch_memory(py: Python<'_>, memory: &str) -> PyErr {
    pipeline_err(
        py,
        format!("batch_memory={memory:?} is not where batches can be handed out"),
        Some("use \"auto\" (host memory on the CPU path), \"cuda\", \"cuda:N\", \"pinned\" (host memory pinned for copies to the GPU), or \"emu\" / \"emu-pinned\" (the emulated device)"),
    )
}

/// Sets the setting `name` to `value` through the settings schema, which checks it as it
/// checks a pipeline file's value or a command-line flag.
fn set(py: Python<'_>, s: &mut Settings, name: &str, value: ArgValue) -> PyResult<()> {
    let setting = settings::find(name).expect("a declared setting");
    setting
        .apply(s, &value)
        .map_err(|e| keyword_error(py, setting, &value, e))
}

/// The schema's verdict on a keyword argument, in Python's words: a choice that is none of
/// its choices is "not a" what the setting holds (its flag's value name: a policy, a
/// device); otherwise the schema's message, both without the file's code quotes.
fn keyword_error(py: Python<'_>, setting: &Setting, value: &ArgValue, e: SettingError) -> PyErr {
    let message = match (setting.spec.ty, value) {
        (ArgType::Choice(_), ArgValue::Str(given)) => format!(
            "{}={given:?} is not a {}",
            setting.name(),
            setting.flag.value_name.to_ascii_lowercase()
        ),
        _ => e.message.replace('`', ""),
    };
    pipeline_err(py, message, Some(&e.help.replace('`', "")))
}

/// Lays the keyword settings over `spec`, each through the settings schema.
///
/// `epochs=None` means as many epochs as are iterated (each `for` loop is one epoch), not the
/// pipeline file's `epochs`, which is for the command line; `threads=0` is the default count
/// (one per core; on the GPU path with JPEG engines half), as in a file.
pub fn apply(py: Python<'_>, spec: &mut PipelineSpec, o: &Overrides, rank: &Rank) -> PyResult<()> {
    let s = &mut spec.settings;
    // The device left out: the pipeline's own. Its GPU: the one `device` names ("cuda:N"),
    // else this rank's under torchrun (`LOCAL_RANK`: one process a GPU), else the pipeline's
    // `device_id`.
    let (choice, named) = match &o.device {
        Some(d) => device(py, d)?,
        None => (s.device, None),
    };
    set(py, s, "device", ArgValue::Str(choice.name().to_string()))?;
    let mut device_id = named.or(rank.local_rank).unwrap_or(s.device_id);
    if let Some(memory) = &o.batch_memory {
        let (m, gpu) = batch_memory(py, memory)?;
        match gpu {
            // The CPU path uploads to (or pins with) the GPU named here.
            Some(id) if choice == DeviceChoice::Cpu => device_id = id,
            Some(id) if id != device_id => {
                return Err(pipeline_err(
                    py,
                    format!(
                        "batch_memory={memory:?} names GPU {id}, but the GPU path would run on GPU {device_id}"
                    ),
                    Some("name the same GPU in both (device=\"cuda:N\"), or pass device=\"cpu\" to upload the CPU path's batches to another"),
                ))
            }
            _ => {}
        }
        set(py, s, "batch_memory", ArgValue::Str(m.name().to_string()))?;
    }
    let id = i64::try_from(device_id).unwrap_or(i64::MAX);
    set(py, s, "device_id", ArgValue::Int(id))?;
    let counts = [
        ("batch", o.batch),
        ("threads", o.threads),
        ("seed", o.seed),
        ("epochs", o.epochs),
        ("prefetch", o.prefetch),
    ];
    for (name, value) in counts {
        if let Some(v) = value {
            set(py, s, name, ArgValue::Int(v))?;
        }
    }
    if o.epochs.is_none() {
        s.epochs = None;
    }
    if let Some(name) = &o.on_error {
        set(py, s, "on_error", ArgValue::Str(name.clone()))?;
    }
    if let Some(data) = &o.data {
        if !data_exists(data) {
            return Err(data_err(
                py,
                format!(
                    "data={}: no such folder, list file or shard",
                    data.display()
                ),
            ));
        }
        spec.set_data(data);
    } else if !spec.has_data() {
        return Err(pipeline_err(
            py,
            "the pipeline reads no data: its reader has no `root`, `list` or `shards`",
            Some("pass data=\"/path/to/train\" or tar shards (\"/path/to/shards/\", a URL), or stokehold.builtin_data() for the demo images"),
        ));
    }
    // After the data: it may have turned the file reader into a shard reader.
    if let Some((rank, world_size)) = rank.given {
        spec.set_rank(rank, world_size);
    }
    Ok(())
}

/// Checks the draft as a whole into a graph: every problem is reported at once.
pub fn check(py: Python<'_>, draft: Draft, source: &Source) -> PyResult<Graph> {
    match py.detach(|| draft.finish()) {
        Ok(checked) => Ok(checked.graph),
        Err(errors) => Err(source.problems(py, errors)),
    }
}
