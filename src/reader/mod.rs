//! Readers (placeholder).
use crate::ops::{ArgError, Args, Backends, OpSchema, Operator, PortSpec};

/// Schema of the file reader.
pub static SCHEMA: OpSchema = OpSchema {
    kind: crate::ops::READER_KIND,
    doc: "reads files",
    inputs: &[],
    outputs: &[
        PortSpec { name: "encoded", doc: "file bytes" },
        PortSpec { name: "labels", doc: "labels" },
    ],
    args: &[],
    backends: Backends::CpuOnly,
    build,
};

fn build(_: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Err(ArgError::arg("", "placeholder"))
}
