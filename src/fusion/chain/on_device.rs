//! Test-only: operators run as the GPU path runs them — each sample set up on the host and
//! composed by [`SampleChain`], the fused chain launched through a [`GpuDevice`]
//! ([`crate::cuda::chain::on_device::run_chain`]) — and as the CPU path runs them, for the
//! operators' parity tests (`src/ops/<op>/tests.rs`): [`check_ops`] runs both on every
//! device of [`devices`] and compares.

use std::path::Path;
use std::sync::Arc;

use crate::cuda::chain::on_device::run_chain;
use crate::cuda::test_support::assert_same;
pub(crate) use crate::cuda::test_support::{devices, Devices};
use crate::cuda::GpuDevice;
use crate::image::Image;
use crate::ops::{ImageShape, Operator, SampleContext};
use crate::rng::hash_str;
use crate::value::{smallvec, Value};

use super::{ChainOp, SampleChain};

const SEED: u64 = 0x5eed;
const EPOCH: u64 = 3;

/// Operators in data-flow order, each with its name in the pipeline (which keys its random
/// stream).
pub(crate) type Ops<'a> = [(&'a str, &'a dyn Operator)];

/// `ops` over `ims` (u8 HWC; image `i` is sample index `i`) on `dev` through the fused chain.
pub(crate) fn run_on_device(dev: &dyn GpuDevice, ops: &Ops<'_>, ims: &[Image]) -> Vec<Image> {
    let names: Vec<Arc<str>> = ops.iter().map(|(n, _)| Arc::from(*n)).collect();
    let chain = SampleChain::new(
        ops.iter()
            .zip(&names)
            .map(|(&(n, op), name)| ChainOp {
                name,
                key: hash_str(n),
                op,
            })
            .collect(),
    )
    .expect("the operators compose into the chain");
    let samples: Vec<_> = ims
        .iter()
        .enumerate()
        .map(|(i, im)| {
            chain
                .sample(ImageShape::of(im), SEED, EPOCH, i)
                .expect("the chain takes the sample")
                .fused
        })
        .collect();
    run_chain(dev, ims, &samples).expect("the chain runs")
}

/// `ops` over `ims` on the CPU, each image as the same sample as in [`run_on_device`].
pub(crate) fn run_on_cpu(ops: &Ops<'_>, ims: &[Image]) -> Vec<Image> {
    ims.iter()
        .enumerate()
        .map(|(index, im)| {
            let mut params = crate::ops::SampleParams::new();
            let mut v = smallvec![Value::Image(im.clone())];
            for &(n, op) in ops {
                let name: Arc<str> = Arc::from(n);
                let mut ctx = SampleContext {
                    seed: SEED,
                    epoch: EPOCH,
                    index,
                    path: Path::new("x.jpg"),
                    op_key: hash_str(n),
                    op_name: &name,
                    params: &mut params,
                };
                v = op.run_cpu(v, &mut ctx).expect("run_cpu");
            }
            match v.into_iter().next() {
                Some(Value::Image(out)) => out,
                _ => panic!("no image out"),
            }
        })
        .collect()
}

/// On every device of `devs` (a test's [`devices`], opened once per test), `ops` through
/// the fused chain give what they give on the CPU (u8 bit for bit, floats within 1e-3:
/// [`assert_same`]).
pub(crate) fn check_ops(devs: &Devices, ops: &Ops<'_>, ims: &[Image], what: &str) {
    let want = run_on_cpu(ops, ims);
    for (dev_name, dev) in devs {
        let got = run_on_device(dev.as_ref(), ops, ims);
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_same(g, w, &format!("{what} on {dev_name}, sample {i}"));
        }
    }
}
