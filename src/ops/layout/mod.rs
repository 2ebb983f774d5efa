//! `layout`: reorder image elements between HWC (interleaved) and CHW (planar).

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::image::{Image, Layout};
use crate::map_pixels;
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec,
    SampleContext, SampleKey, Setup, SetupInput,
};

/// Schema of `layout`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "layout",
    doc: "Reorders each image to `layout`: \"HWC\" (interleaved, as decoded) or \"CHW\" \
          (planar, what PyTorch models take). A no-op when already in that layout.",
    inputs: &[PortSpec {
        name: "images",
        doc: "images, any dtype",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "images in the requested layout",
    }],
    args: &[ArgSpec {
        name: "layout",
        ty: ArgType::Choice(&["CHW", "HWC"]),
        default: Some("\"CHW\""),
        doc: "target layout",
    }],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator.
#[derive(Debug, Clone, Copy)]
pub struct ToLayout {
    /// Target layout.
    pub layout: Layout,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(ToLayout::from_args(args)?))
}

impl ToLayout {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<ToLayout, ArgError> {
        let layout = Layout::from_name(args.str("layout"))
            .ok_or_else(|| ArgError::arg("layout", "bad layout"))?;
        Ok(ToLayout { layout })
    }
}

impl Operator for ToLayout {
    /// The same image in the target layout; nothing is drawn.
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let mut s = input.image()?;
        s.layout = self.layout;
        Ok(Setup::shape(s))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("layout", inputs)?;
        t.layout = self.layout;
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        if im.layout == self.layout {
            return Ok(smallvec![Value::Image(im)]);
        }
        Ok(smallvec![Value::Image(to_layout(&im, self.layout))])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}

/// A copy of `im` in `layout`.
pub fn to_layout(im: &Image, layout: Layout) -> Image {
    if im.layout == layout {
        return im.clone();
    }
    let (h, w, c) = (im.height, im.width, im.channels);
    let to_chw = layout == Layout::Chw;
    let pixels = map_pixels!(&im.pixels, |v| transpose(v, h * w, c, to_chw));
    Image {
        height: h,
        width: w,
        channels: c,
        layout,
        pixels,
    }
}

/// HWC → CHW treats the data as an (h·w) × c matrix and transposes it; CHW → HWC the reverse.
fn transpose<T: Copy + Default>(src: &[T], pixels: usize, c: usize, to_chw: bool) -> Vec<T> {
    let mut out = vec![T::default(); src.len()];
    if to_chw {
        for (p, px) in src.chunks_exact(c).enumerate() {
            for (k, &v) in px.iter().enumerate() {
                out[k * pixels + p] = v;
            }
        }
    } else {
        for (k, plane) in src.chunks_exact(pixels.max(1)).enumerate().take(c) {
            for (p, &v) in plane.iter().enumerate() {
                out[p * c + k] = v;
            }
        }
    }
    out
}
