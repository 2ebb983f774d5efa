//! `decode`: encoded JPEG/PNG bytes to 8-bit HWC images (RGB or gray), applying the EXIF
//! orientation. The CPU path is [`crate::decode::decode`]; see that module for what is
//! supported and how files that end early are treated.

use crate::decode::{decode, ColorMode, DecodeOptions, EntropyDecoder, Limits, Upsampling};
use crate::error::SampleErrorKind;
use crate::value::{smallvec, ImageType, Value, ValueType, Values};

use crate::image::{DType, Layout};

use super::{
    ArgError, ArgSpec, ArgType, Args, Backends, ImageShape, OpSchema, Operator, PortSpec,
    SampleContext, SampleKey, Setup, SetupInput,
};

/// Schema of `decode`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "decode",
    doc: "Decodes JPEG (baseline and progressive, Huffman or arithmetic, 8-bit; gray, YCbCr, \
          RGB, CMYK, YCCK; libjpeg-turbo, the same pixels as Pillow) and PNG (any color type \
          and bit depth; alpha dropped, 16-bit to 8 by the high byte) into u8 HWC images, RGB \
          or gray, applying the EXIF orientation like Pillow's exif_transpose. The format is \
          sniffed from the bytes. Truncated files, lossless, hierarchical and 12-bit JPEGs are \
          errors, as are images over the limits (checked from the header before allocating).",
    inputs: &[PortSpec {
        name: "encoded",
        doc: "encoded file bytes",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "decoded u8 HWC images",
    }],
    args: &[
        ArgSpec {
            name: "color",
            ty: ArgType::Choice(&["rgb", "gray"]),
            default: Some("\"rgb\""),
            doc: "output colour: \"rgb\" (3 channels) or \"gray\" (1 channel, Pillow's L formula)",
        },
        ArgSpec {
            name: "exif",
            ty: ArgType::Bool,
            default: Some("true"),
            doc: "apply the EXIF orientation tag",
        },
        ArgSpec {
            name: "max_pixels",
            ty: ArgType::Int {
                min: 1,
                max: i64::MAX,
            },
            default: Some("178956970"),
            doc:
                "largest width × height decoded; larger images are errors (checked from the header)",
        },
        ArgSpec {
            name: "max_file_bytes",
            ty: ArgType::Int {
                min: 1,
                max: i64::MAX,
            },
            default: Some("268435456"),
            doc: "largest encoded file decoded, in bytes",
        },
        ArgSpec {
            name: "sequential_decoder",
            ty: ArgType::Choice(EntropyDecoder::NAMES),
            default: Some("\"stokehold\""),
            doc: "who entropy-decodes sequential Huffman-coded JPEGs: \"stokehold\" (faster) or \
                  \"libjpeg\" (libjpeg-turbo alone); the pixels are the same, an A/B switch \
                  for comparisons (the CLI sets it from STOKEHOLD_LIBJPEG_SEQUENTIAL=1)",
        },
        ArgSpec {
            name: "progressive_decoder",
            ty: ArgType::Choice(EntropyDecoder::NAMES),
            default: Some("\"stokehold\""),
            doc: "who entropy-decodes progressive Huffman-coded JPEGs: \"stokehold\" (several \
                  times faster) or \"libjpeg\" (libjpeg-turbo alone); the pixels are the same, \
                  an A/B switch for comparisons (the CLI sets it from \
                  STOKEHOLD_LIBJPEG_PROGRESSIVE=1)",
        },
        ArgSpec {
            name: "upsampling",
            ty: ArgType::Choice(Upsampling::NAMES),
            default: Some("\"fancy\""),
            doc: "chroma upsampling of subsampled JPEGs (4:2:0, 4:2:2, 4:4:0): \"fancy\" \
                  (libjpeg's interpolation, as Pillow and torchvision decode) or \"nearest\" \
                  (each chroma sample repeated over its block, as libjpeg's -nosmooth and the \
                  GPU's JPEG engines write it, and DALI's GPU decoder by default: on the GPU \
                  path about 3x less host time per image, docs/gpu.md). The CPU and GPU paths \
                  give the same pixels either way",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator.
#[derive(Debug, Clone, Copy)]
pub struct Decode {
    options: DecodeOptions,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Decode::from_args(args)))
}

impl Decode {
    /// Builds from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Decode {
        let color = match args.str("color") {
            "gray" => ColorMode::Gray,
            _ => ColorMode::Rgb,
        };
        // Validated as ≥ 1 by the schema.
        let positive = |name: &str| u64::try_from(args.int(name)).unwrap_or(1);
        // Validated as one of the names by the schema.
        let entropy = |name: &str| EntropyDecoder::from_name(args.str(name)).unwrap_or_default();
        Decode {
            options: DecodeOptions {
                color,
                apply_exif: args.bool("exif"),
                limits: Limits {
                    max_pixels: positive("max_pixels"),
                    max_file_bytes: positive("max_file_bytes"),
                },
                sequential_decoder: entropy("sequential_decoder"),
                progressive_decoder: entropy("progressive_decoder"),
                // Validated as one of the names by the schema.
                upsampling: Upsampling::from_name(args.str("upsampling")).unwrap_or_default(),
            },
        }
    }

    /// An operator with the given options.
    pub fn new(options: DecodeOptions) -> Decode {
        Decode { options }
    }

    /// The decoding options (used by the running pipeline and the GPU decoder).
    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }
}

impl Operator for Decode {
    fn max_input_bytes(&self) -> Option<u64> {
        Some(self.options().limits.max_file_bytes)
    }

    /// The decoded image's shape from the parsed header (`crate::decode::probe` with this
    /// operator's options, so the size is after the EXIF orientation when it is applied);
    /// nothing is drawn. The GPU path decodes with nvJPEG, which the GPU stage drives itself
    /// (this operator has no [`super::GpuOperator`]).
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        match input {
            SetupInput::Encoded(info) => Ok(Setup::shape(ImageShape {
                height: info.height,
                width: info.width,
                channels: self.options.color.channels(),
                dtype: DType::U8,
                layout: Layout::Hwc,
            })),
            SetupInput::Image(_) => Err("expected encoded bytes, got an image".into()),
        }
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        infer_decoded(&self.options, None, inputs)
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        match inputs.into_iter().next() {
            Some(Value::Encoded(bytes)) => {
                let im = decode(&bytes, &self.options);
                crate::scratch::recycle_encoded(bytes);
                Ok(smallvec![Value::Image(im?)])
            }
            Some(other) => Err(ctx.error(format!(
                "expected encoded bytes, got {}",
                other.value_type()
            ))),
            None => Err(ctx.error("missing input")),
        }
    }
}

/// Output type of a decoder (fused or not) producing `size` images, for
/// [`Operator::infer`]: it takes encoded bytes.
pub(crate) fn infer_decoded(
    opts: &DecodeOptions,
    size: Option<(usize, usize)>,
    inputs: &[ValueType],
) -> Result<Vec<ValueType>, String> {
    match inputs {
        [ValueType::Encoded] => {
            let mut t = ImageType::decoded(opts.color.channels());
            t.size = size;
            Ok(vec![ValueType::Image(t)])
        }
        [other] => Err(format!(
            "'decode' takes encoded bytes (from a file_reader), but its input carries {other}"
        )),
        _ => Err("'decode' takes exactly one input".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ArgValue;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    fn built(pairs: &[(&str, ArgValue)]) -> Decode {
        let given: BTreeMap<String, ArgValue> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let args = Args::validate(&SCHEMA, &given).expect("valid args");
        Decode::from_args(&args)
    }

    #[test]
    fn defaults_and_arguments() {
        let d = built(&[]);
        assert_eq!(*d.options(), DecodeOptions::default());
        let d = built(&[
            ("color", "gray".into()),
            ("exif", false.into()),
            ("max_pixels", 100i64.into()),
            ("max_file_bytes", 1000i64.into()),
        ]);
        assert_eq!(d.options().color, ColorMode::Gray);
        assert!(!d.options().apply_exif);
        assert_eq!(d.options().limits.max_pixels, 100);
        assert_eq!(d.options().limits.max_file_bytes, 1000);
        assert_eq!(
            d.infer(&[ValueType::Encoded]).unwrap(),
            vec![ValueType::Image(ImageType::decoded(1))]
        );
        assert!(d.infer(&[ValueType::Label]).is_err());

        // The entropy decoders (an A/B switch per pipeline).
        assert_eq!(d.options().sequential_decoder, EntropyDecoder::Stokehold);
        let d = built(&[
            ("sequential_decoder", "libjpeg".into()),
            ("progressive_decoder", "libjpeg".into()),
        ]);
        assert_eq!(d.options().sequential_decoder, EntropyDecoder::Libjpeg);
        assert_eq!(d.options().progressive_decoder, EntropyDecoder::Libjpeg);
        let bad: BTreeMap<String, ArgValue> =
            [("progressive_decoder".to_string(), "zune".into())].into();
        assert!(Args::validate(&SCHEMA, &bad).is_err());
    }

    #[test]
    fn runs_and_maps_errors() {
        let src = crate::testutil::pattern_rgb(20, 30);
        let jpg = crate::testutil::encode_jpeg(&src, 20, 30, 3, 95, crate::testutil::Sub::S444);
        let d = built(&[]);
        let name: Arc<str> = "decode".into();
        let mut params = crate::ops::SampleParams::new();
        let mut ctx = SampleContext {
            seed: 0,
            epoch: 0,
            index: 0,
            path: Path::new("x.jpg"),
            op_key: 0,
            op_name: &name,
            params: &mut params,
        };
        let out = d
            .run_cpu(smallvec![Value::Encoded(jpg.into())], &mut ctx)
            .unwrap();
        match &out[0] {
            Value::Image(im) => assert_eq!((im.height, im.width, im.channels), (20, 30, 3)),
            v => panic!("unexpected {v:?}"),
        }
        let err = d
            .run_cpu(
                smallvec![Value::Encoded(Arc::new(b"hello".to_vec()))],
                &mut ctx,
            )
            .unwrap_err();
        assert_eq!(err.category(), "decode:unknown-format");
        let err = d.run_cpu(smallvec![Value::Label(3)], &mut ctx).unwrap_err();
        assert_eq!(err.category(), "operator");
    }

    #[test]
    fn setup_from_the_header_predicts_the_decoded_shape() {
        let src = crate::testutil::pattern_rgb(20, 30);
        let jpg = crate::testutil::encode_jpeg_opts(
            &src,
            20,
            30,
            3,
            &crate::testutil::JpegOpts {
                quality: 90,
                sub: crate::testutil::Sub::S420,
                progressive: false,
                exif_tiff: Some(crate::testutil::exif_orientation_tiff(6, false)),
            },
        );
        for pairs in [
            vec![],
            vec![("color", "gray".into()), ("exif", false.into())],
        ] {
            let d = built(&pairs);
            let info = crate::decode::probe(&jpg, d.options()).unwrap();
            let key = SampleKey {
                seed: 0,
                epoch: 0,
                index: 0,
                op_key: 0,
            };
            let s = d.setup(SetupInput::Encoded(&info), &key).unwrap();
            let im = decode(&jpg, d.options()).unwrap();
            assert_eq!(s.output, ImageShape::of(&im));
            assert_eq!(s.params, None);
        }
    }
}
