//! `pad` (placeholder until implemented).

use crate::error::SampleErrorKind;
use crate::value::{Value, ValueType};

use super::{ArgError, Args, Backends, OpSchema, Operator, PortSpec, SampleContext};

/// Schema of `pad`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "pad",
    doc: "not yet implemented",
    inputs: &[PortSpec {
        name: "images",
        doc: "images",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "images",
    }],
    args: &[],
    backends: Backends::CpuAndGpu,
    build,
};

#[derive(Debug)]
struct Placeholder;

fn build(_: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Placeholder))
}

impl Operator for Placeholder {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        Ok(inputs.to_vec())
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        _: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        Ok(inputs)
    }
}
