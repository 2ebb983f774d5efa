//! What the GPU plan tells the device to load: the kernels its chain launches.

use crate::cuda::Kernel;
use crate::pipeline::graph::Graph;
use crate::pipeline::{OpSpec, PipelineSpec};
use crate::testutil::shipped_pipeline;

use super::gpu_plan::GpuPlan;

fn kernels_of(spec: &PipelineSpec) -> Vec<Kernel> {
    let graph = Graph::build(spec).unwrap();
    GpuPlan::new(&graph, 8).unwrap().chain_kernels()
}

#[test]
fn the_plan_names_the_kernels_its_chain_launches() {
    for shipped in ["resnet50-train.toml", "resnet50-eval.toml"] {
        assert_eq!(
            kernels_of(&shipped_pipeline(shipped)),
            [Kernel::Chain],
            "{shipped}"
        );
    }
    let spec = PipelineSpec::builder()
        .batch(8)
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", "."))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("crop")
            .input("decoded")
            .output("a")
            .arg("size", 32))
        .op(OpSpec::new("color_jitter")
            .input("a")
            .output("images")
            .arg("contrast", 0.5))
        .outputs(&["images", "labels"]);
    assert_eq!(
        kernels_of(&spec),
        [Kernel::Chain, Kernel::JitterLumaSum, Kernel::JitterStep]
    );
}
