//! Output sizes known before running: an operator whose fixed output size is over the
//! largest image an operator may make would fail on every sample, whatever its file, so the
//! graph refuses it where the pipeline file says it.

use crate::ops::resize::MAX_OUTPUT_PIXELS;
use crate::value::ValueType;

use super::super::spec::{PipelineSpec, SpecError, SpecPointer};

/// Checks the image edges of fixed size, in `order` (the operators' topological order, so
/// the first operator at fault is named); `edge_of` maps an edge name to its index in
/// `types`.
pub(super) fn check_output_sizes(
    spec: &PipelineSpec,
    order: &[usize],
    edge_of: impl Fn(&str) -> usize,
    types: &[ValueType],
) -> Result<(), SpecError> {
    for &i in order {
        let op = &spec.ops[i];
        for (j, out) in op.outputs.iter().enumerate() {
            let ValueType::Image(t) = types[edge_of(out)] else {
                continue;
            };
            let Some((h, w)) = t.size else { continue };
            if h.checked_mul(w).is_some_and(|p| p <= MAX_OUTPUT_PIXELS) {
                continue;
            }
            let at = if op.args.contains_key("size") {
                SpecPointer::OpArg(i, "size".into())
            } else {
                SpecPointer::OpOutput(i, j)
            };
            return Err(SpecError::new(
                at,
                format!(
                    "'{}' makes {h}x{w} images ({} pixels), over the limit of {MAX_OUTPUT_PIXELS} pixels per image, so every sample would fail",
                    op.kind,
                    (h as u128) * (w as u128)
                ),
            )
            .help(format!(
                "use a size with height x width at most {MAX_OUTPUT_PIXELS} (e.g. {0} x {0})",
                1usize << 14
            )));
        }
    }
    Ok(())
}
