//! The shipped pipelines (`pipelines/*.toml`) composed for the GPU's fused chain: each
//! sample's chain is the `FusedSample` the GPU parity tests build by hand, its parameters are
//! those the CPU path records for the same sample, and the chain kernel (compiled for the
//! emulated device, as the GPU stage launches it) gives the CPU operators' output.

use std::path::Path;

use super::Graph;
use crate::cuda::chain::on_device::run_chain;
use crate::cuda::chain::FusedSample;
use crate::cuda::test_support::{assert_same, emu_device, image_u8};
use crate::fusion::chain::{ChainOp, SampleChain};
use crate::image::{DType, Image, Layout};
use crate::ops::crop::center_offset;
use crate::ops::normalize::per_channel;
use crate::ops::random_resized_crop::choose_window;
use crate::ops::resize::{Interp, ResizeTarget};
use crate::ops::{ImageShape, SampleContext, SampleKey};
use crate::rng::hash_str;
use crate::value::{smallvec, Value};

const SEED: u64 = 1;
const EPOCH: u64 = 2;

/// A shipped pipeline, built without CPU fusion (the operators the GPU stage sets up).
fn shipped(name: &str) -> Graph {
    Graph::build_unfused(&crate::testutil::shipped_pipeline(name)).expect("and builds")
}

/// The operators after the decoder.
fn chain(g: &Graph) -> SampleChain<'_> {
    assert_eq!(g.nodes[0].kind, "decode");
    SampleChain::new(
        g.nodes[1..]
            .iter()
            .map(|n| ChainOp {
                name: &n.name,
                key: n.key,
                op: n.op.as_ref(),
            })
            .collect(),
    )
    .expect("the shipped chains compose")
}

/// The CPU path for one decoded image: every operator after the decoder, in order; its
/// output and the parameters recorded.
fn cpu(g: &Graph, im: Image, index: usize) -> (Image, crate::ops::SampleParams) {
    let mut params = crate::ops::SampleParams::new();
    let mut v = smallvec![Value::Image(im)];
    for n in &g.nodes[1..] {
        let mut ctx = SampleContext {
            seed: SEED,
            epoch: EPOCH,
            index,
            path: Path::new("x.jpg"),
            op_key: n.key,
            op_name: &n.name,
            params: &mut params,
        };
        v = n.op.run_cpu(v, &mut ctx).expect("cpu");
    }
    let Some(Value::Image(out)) = v.into_iter().next() else {
        panic!("not an image")
    };
    (out, params)
}

/// ImageNet's mean and 1/std as the parity tests write them into a `FusedSample`.
fn imagenet(c: usize) -> Option<([f32; 4], [f32; 4])> {
    let mean: Vec<f32> = [123.675f64, 116.28, 103.53]
        .iter()
        .map(|&m| m as f32)
        .collect();
    let inv: Vec<f32> = [58.395f64, 57.12, 57.375]
        .iter()
        .map(|&s| 1.0f32 / s as f32)
        .collect();
    let (m, inv) = (per_channel(&mean, c), per_channel(&inv, c));
    let mut mm = [0f32; 4];
    let mut ii = [0f32; 4];
    mm[..c].copy_from_slice(&m);
    ii[..c].copy_from_slice(&inv);
    Some((mm, ii))
}

const SIZES: &[(usize, usize)] = &[(300, 400), (256, 300), (500, 260), (240, 240), (90, 700)];

fn check(g: &Graph, expected: impl Fn(&Image, usize) -> FusedSample) {
    let chain = chain(g);
    let emu = emu_device();
    for (index, &(h, w)) in SIZES.iter().enumerate() {
        let im = image_u8(h, w, 3, index as u64);
        let setup = chain
            .sample(ImageShape::of(&im), SEED, EPOCH, index)
            .expect("a setup");
        let (want, recorded) = cpu(g, im.clone(), index);
        assert_eq!(setup.params, recorded, "{h}x{w}: parameters");
        assert_eq!(setup.fused, expected(&im, index), "{h}x{w}: fused sample");
        if let Some(emu) = &emu {
            let got =
                run_chain(emu.as_ref(), std::slice::from_ref(&im), &[setup.fused]).expect("chain");
            assert_same(&got[0], &want, &format!("{h}x{w}: chain kernel vs CPU"));
        }
    }
}

fn key(index: usize, name: &str) -> SampleKey {
    SampleKey {
        seed: SEED,
        epoch: EPOCH,
        index,
        op_key: hash_str(name),
    }
}

#[test]
fn the_train_chains_compose_into_the_parity_tests_samples() {
    for file in ["resnet50-train.toml", "resnet50-train-dct.toml"] {
        let g = shipped(file);
        check(&g, |im, index| {
            let window = choose_window(
                im.height,
                im.width,
                (0.08, 1.0),
                (0.75, 1.3333333333333333),
                &mut key(index, "cropped").rng(),
            );
            FusedSample {
                orientation: 1,
                window,
                out_h: 224,
                out_w: 224,
                keep: None,
                interp: Interp::Bilinear,
                antialias: true,
                flip_h: key(index, "flipped").rng().bernoulli(0.5),
                flip_v: false,
                jitter: None,
                normalize: imagenet(3),
                dtype: DType::F32,
                layout: Layout::Chw,
            }
        });
    }
}

#[test]
fn the_eval_chain_composes_into_a_resize_and_a_kept_window() {
    let g = shipped("resnet50-eval.toml");
    check(&g, |im, _| {
        let (rh, rw) = ResizeTarget::Shorter(256).output_size(im.height, im.width);
        let keep = (
            center_offset(rh, 224) as usize,
            center_offset(rw, 224) as usize,
            224,
            224,
        );
        // An image whose shorter side is 256 already is not resampled: the crop is the window.
        let (window, (out_h, out_w), keep) = if (rh, rw) == (im.height, im.width) {
            (keep, (224, 224), None)
        } else {
            ((0, 0, im.height, im.width), (rh, rw), Some(keep))
        };
        FusedSample {
            orientation: 1,
            window,
            out_h,
            out_w,
            keep,
            interp: Interp::Bilinear,
            antialias: true,
            flip_h: false,
            flip_v: false,
            jitter: None,
            normalize: imagenet(3),
            dtype: DType::F32,
            layout: Layout::Chw,
        }
    });
}

#[test]
fn a_chain_the_kernel_cannot_run_is_refused_at_start_with_the_reason() {
    use crate::pipeline::spec::{OpSpec, PipelineSpec};
    let spec = PipelineSpec::builder()
        .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("resize")
            .input("decoded")
            .output("a")
            .arg("shorter", 300))
        .op(OpSpec::new("pad").input("a").output("b").arg("top", 2))
        .outputs(&["b"]);
    let g = Graph::build_unfused(&spec).unwrap();
    let ops = g.nodes[1..]
        .iter()
        .map(|n| ChainOp {
            name: &n.name,
            key: n.key,
            op: n.op.as_ref(),
        })
        .collect();
    let e = SampleChain::new(ops).err().expect("refused");
    assert_eq!(e.op, "b");
    assert!(e.to_string().contains("border"), "{e}");
}
