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

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::error::SampleErrorKind;
use crate::image::{DType, Image, Pixels};
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec,
    SampleContext, SampleKey, Setup, SetupInput,
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
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cast {
    /// Target element type.
    pub dtype: DType,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Cast::from_args(args)?))
}

impl Cast {
    /// The operator from validated arguments.
    pub fn from_args(args: &Args) -> Result<Cast, ArgError> {
        let dtype = DType::from_name(args.str("dtype"))
            .ok_or_else(|| ArgError::arg("dtype", "argument 'dtype' must be u8, f16 or f32"))?;
        Ok(Cast { dtype })
    }
}

impl Operator for Cast {
    /// The same image with the target element type; nothing is drawn.
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let mut s = input.image()?;
        s.dtype = self.dtype;
        Ok(Setup::shape(s))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("cast", inputs)?;
        t.dtype = self.dtype;
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let mut im = single_image(inputs, ctx)?;
        im.pixels = cast_pixels(im.pixels, self.dtype);
        Ok(smallvec![Value::Image(im)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
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
            // Every u8 is an f16 exactly: 256 conversions, then a lookup an element.
            let table: [f16; 256] = std::array::from_fn(|x| f16::from_f32(x as f32));
            Pixels::F16(v.iter().map(|&x| table[usize::from(x)]).collect())
        }
        (Pixels::U8(v), DType::F32) => Pixels::F32(v.iter().map(|&x| f32::from(x)).collect()),
        (Pixels::F16(v), DType::U8) => {
            Pixels::U8(v.iter().map(|x| f32_to_u8(x.to_f32())).collect())
        }
        (Pixels::F16(v), DType::F32) => {
            // Eight at a time where the CPU has F16C; the same values as `to_f32`.
            let mut out = vec![0f32; v.len()];
            v.convert_to_f32_slice(&mut out);
            Pixels::F32(out)
        }
        (Pixels::F32(v), DType::U8) => Pixels::U8(v.iter().map(|&x| f32_to_u8(x)).collect()),
        (Pixels::F32(v), DType::F16) => {
            // Eight at a time where the CPU has F16C; rounded as `from_f32` rounds.
            let mut out = vec![f16::ZERO; v.len()];
            out.convert_from_f32_slice(&v);
            Pixels::F16(out)
        }
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
