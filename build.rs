//! Build script (kernels are added with the GPU path).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
