//! `cast`: convert image elements to another type.
//!
//! # Specification (the GPU path must reproduce it bit for bit)
//!
//! - u8 → f16 / f32: exact (every 0..=255 is representable).
//! - f16 → f32: exact. f32 → f16: IEEE round to nearest, ties to even; overflow gives ±inf
//!   (`half::f16::from_f32`; CUDA `__float2half_rn`).
//! - f16 / f32 → u8: `x` widened to f32, rounded to the nearest integer with ties to even
//!   (`rintf`), then saturated to `[0, 255]`; NaN → 0 (CUDA: `__float2uint_rn` then `min(., 255)`,
//!   which also sends NaN and negatives to 0).
//! - same type: unchanged.
//!
//! Any layout; the layout and shape are kept.

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use half::f16;

use crate::error::SampleErrorKind;
use crate::image::{DType, Image, Pixels};
use crate::value::{Value, ValueType};

use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec,
    SampleContext,
};

/// Schema of `cast`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "cast",
    doc: "Converts elements to `dtype`. u8 → float is exact; float → u8 rounds half to even and \
          saturates to [0, 255] (NaN → 0); f32 → f16 rounds to nearest even. Any layout.",
    inputs: &[PortSpec {
        name: "images",
        doc: "images, any dtype and layout",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "images of element type `dtype`",
    }],
    args: &[ArgSpec {
        name: "dtype",
        ty: ArgType::Choice(&["u8", "f16", "f32"]),
        default: None,
        doc: "target element type",
    }],
    backends: Backends::CpuAndGpu,
    build,
};

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cast {
    /// Target element type.
    pub dtype: DType,
}

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    let dtype = DType::from_name(args.str("dtype"))
        .ok_or_else(|| ArgError::arg("dtype", "argument 'dtype' must be u8, f16 or f32"))?;
    Ok(Box::new(Cast { dtype }))
}

impl Operator for Cast {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("cast", inputs)?;
        t.dtype = self.dtype;
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let mut im = single_image(inputs, ctx)?;
        im.pixels = cast_pixels(im.pixels, self.dtype);
        Ok(vec![Value::Image(im)])
    }
}

/// A float to u8: round half to even, saturate to [0, 255], NaN → 0.
#[inline]
pub fn f32_to_u8(x: f32) -> u8 {
    // `as` saturates and maps NaN to 0.
    x.round_ties_even() as u8
}

/// Converts a pixel buffer to `to` (see the module docs for the exact rules).
pub fn cast_pixels(p: Pixels, to: DType) -> Pixels {
    match (p, to) {
        (p @ Pixels::U8(_), DType::U8)
        | (p @ Pixels::F16(_), DType::F16)
        | (p @ Pixels::F32(_), DType::F32) => p,
        (Pixels::U8(v), DType::F16) => {
            Pixels::F16(v.iter().map(|&x| f16::from_f32(f32::from(x))).collect())
        }
        (Pixels::U8(v), DType::F32) => Pixels::F32(v.iter().map(|&x| f32::from(x)).collect()),
        (Pixels::F16(v), DType::U8) => {
            Pixels::U8(v.iter().map(|x| f32_to_u8(x.to_f32())).collect())
        }
        (Pixels::F16(v), DType::F32) => Pixels::F32(v.iter().map(|x| x.to_f32()).collect()),
        (Pixels::F32(v), DType::U8) => Pixels::U8(v.iter().map(|&x| f32_to_u8(x)).collect()),
        (Pixels::F32(v), DType::F16) => Pixels::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
    }
}

/// A copy of `im` with elements of type `to`.
pub fn cast_image(im: &Image, to: DType) -> Image {
    Image {
        height: im.height,
        width: im.width,
        channels: im.channels,
        layout: im.layout,
        pixels: cast_pixels(im.pixels.clone(), to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Layout;
    use crate::value::ImageType;
    use proptest::prelude::*;

    #[test]
    fn float_to_u8_rounds_half_even_and_saturates() {
        let cases = [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (3.5, 4),
            (254.5, 254),
            (254.51, 255),
            (0.49, 0),
            (-0.5, 0),
            (-3.0, 0),
            (255.4, 255),
            (300.0, 255),
            (f32::INFINITY, 255),
            (f32::NEG_INFINITY, 0),
            (f32::NAN, 0),
            (127.0, 127),
        ];
        for (x, want) in cases {
            assert_eq!(f32_to_u8(x), want, "{x}");
        }
        let p = cast_pixels(
            Pixels::F16(vec![f16::from_f32(2.5), f16::NAN, f16::from_f32(-7.0)]),
            DType::U8,
        );
        assert_eq!(p, Pixels::U8(vec![2, 0, 0]));
    }

    #[test]
    fn f32_to_f16_rounds_to_nearest_even() {
        // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even gives 1.
        let p = cast_pixels(
            Pixels::F32(vec![1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 1e6]),
            DType::F16,
        );
        let Pixels::F16(v) = p else { panic!("not f16") };
        assert_eq!(v[0].to_f32(), 1.0);
        assert_eq!(v[1].to_f32(), 1.0 + 2.0 * 2f32.powi(-10));
        assert!(v[2].is_infinite());
    }

    proptest! {
        #[test]
        fn u8_round_trips(v in proptest::collection::vec(any::<u8>(), 0..64)) {
            for mid in [DType::F16, DType::F32] {
                let back = cast_pixels(cast_pixels(Pixels::U8(v.clone()), mid), DType::U8);
                prop_assert_eq!(back, Pixels::U8(v.clone()));
            }
        }

        #[test]
        fn f16_round_trips_through_f32(bits in proptest::collection::vec(any::<u16>(), 0..64)) {
            let v: Vec<f16> = bits.into_iter().map(f16::from_bits).filter(|x| !x.is_nan()).collect();
            let back = cast_pixels(cast_pixels(Pixels::F16(v.clone()), DType::F32), DType::F16);
            prop_assert_eq!(back, Pixels::F16(v));
        }

        #[test]
        fn f32_to_u8_is_nearest(x in -50.0f32..400.0) {
            let y = f32::from(f32_to_u8(x));
            let c = x.clamp(0.0, 255.0);
            prop_assert!((y - c).abs() <= 0.5);
        }
    }

    #[test]
    fn keeps_layout_and_shape_and_infers_dtype() {
        let mut im = Image::from_u8_hwc(2, 3, 1, vec![0, 1, 2, 3, 4, 255]);
        im.layout = Layout::Chw;
        let out = cast_image(&im, DType::F32);
        assert_eq!(
            (out.height, out.width, out.channels, out.layout),
            (2, 3, 1, Layout::Chw)
        );
        assert_eq!(
            out.pixels,
            Pixels::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 255.0])
        );
        let op = Cast { dtype: DType::F16 };
        let t = op
            .infer(&[ValueType::Image(ImageType::decoded(3))])
            .unwrap();
        assert!(matches!(
            t[0],
            ValueType::Image(ImageType {
                dtype: DType::F16,
                ..
            })
        ));
        assert!(op.infer(&[ValueType::Label]).is_err());
    }

    #[test]
    fn dtype_is_required() {
        let e = crate::ops::Args::validate(&SCHEMA, &Default::default()).unwrap_err();
        assert_eq!(e.arg.as_deref(), Some("dtype"));
        let given = [("dtype".to_string(), crate::ops::ArgValue::Str("f16".into()))].into();
        let args = crate::ops::Args::validate(&SCHEMA, &given).unwrap();
        assert!((SCHEMA.build)(&args).is_ok());
    }
}
