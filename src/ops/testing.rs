//! Helpers shared by the operators' tests (compiled for tests only): the check that an
//! operator's host setup draws what its `run_cpu` records.

use std::path::Path;
use std::sync::Arc;

use crate::image::Image;
use crate::value::{smallvec, Value};

use super::{ImageShape, Operator, SampleContext, SampleKey, SetupInput};

/// The sample key the tests use for sample `index` of operator `op_key`.
pub(crate) fn key(index: usize, op_key: u64) -> SampleKey {
    SampleKey {
        seed: 0x5eed,
        epoch: 3,
        index,
        op_key,
    }
}

/// Runs `op` on `im` on the CPU as sample `key`, returning what it recorded and output.
pub(crate) fn run_recorded(
    op: &dyn Operator,
    im: Image,
    key: SampleKey,
) -> (Vec<super::OpParams>, Image) {
    let name: Arc<str> = Arc::from("op");
    let mut params = crate::ops::SampleParams::new();
    let mut ctx = SampleContext {
        seed: key.seed,
        epoch: key.epoch,
        index: key.index,
        path: Path::new("x.jpg"),
        op_key: key.op_key,
        op_name: &name,
        params: &mut params,
    };
    let out = op
        .run_cpu(smallvec![Value::Image(im)], &mut ctx)
        .expect("run_cpu");
    let Some(Value::Image(out)) = out.into_iter().next() else {
        panic!("no image out")
    };
    (params.into_iter().map(|(_, p)| p).collect(), out)
}

/// The host setup of `op` for `im` as sample `key` draws exactly the parameters `run_cpu`
/// records for the same sample, and predicts its output's shape.
pub(crate) fn assert_setup_matches_run(op: &dyn Operator, im: Image, key: SampleKey) {
    let setup = op
        .setup(SetupInput::Image(ImageShape::of(&im)), &key)
        .expect("setup");
    let (recorded, out) = run_recorded(op, im, key);
    assert_eq!(
        recorded,
        setup.params.clone().into_iter().collect::<Vec<_>>(),
        "{op:?}: setup and run_cpu drew different parameters for {key:?}"
    );
    assert_eq!(
        ImageShape::of(&out),
        setup.output,
        "{op:?}: setup predicted another output shape"
    );
}
