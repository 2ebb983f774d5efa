//! `layout`: reorder image elements between HWC (interleaved) and CHW (planar).

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use crate::error::SampleErrorKind;
use crate::image::{Image, Layout};
use crate::map_pixels;
use crate::value::{Value, ValueType};

use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec,
    SampleContext,
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
    backends: Backends::CpuAndGpu,
    build,
};

/// The built operator.
#[derive(Debug, Clone, Copy)]
pub struct ToLayout {
    /// Target layout.
    pub layout: Layout,
}

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    let layout = Layout::from_name(args.str("layout"))
        .ok_or_else(|| ArgError::arg("layout", "bad layout"))?;
    Ok(Box::new(ToLayout { layout }))
}

impl Operator for ToLayout {
    fn converts_to_layout(&self) -> Option<Layout> {
        Some(self.layout)
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("layout", inputs)?;
        t.layout = self.layout;
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        if im.layout == self.layout {
            return Ok(vec![Value::Image(im)]);
        }
        Ok(vec![Value::Image(to_layout(&im, self.layout))])
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // 1x2 RGB: pixels (1,2,3) (4,5,6) → planes R=[1,4] G=[2,5] B=[3,6].
        let im = Image::from_u8_hwc(1, 2, 3, vec![1, 2, 3, 4, 5, 6]);
        let chw = to_layout(&im, Layout::Chw);
        assert_eq!(chw.pixels, crate::image::Pixels::U8(vec![1, 4, 2, 5, 3, 6]));
        assert_eq!(chw.shape(), [3, 1, 2]);
    }

    proptest! {
        #[test]
        fn round_trip(h in 1usize..8, w in 1usize..8, c in 1usize..5) {
            let src: Vec<u8> = (0..h * w * c).map(|i| (i * 7) as u8).collect();
            let im = Image::from_u8_hwc(h, w, c, src);
            let back = to_layout(&to_layout(&im, Layout::Chw), Layout::Hwc);
            prop_assert_eq!(back, im);
        }
    }
}
