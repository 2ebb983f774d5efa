//! Fusion: the table of rules by which the graph builder replaces a run of adjacent operators
//! by one fused CPU operator, those fused operators, and the composition of the operators
//! after the decoder into the GPU's fused chain ([`chain`]). Operators don't know each other; the
//! fused operators here import the pieces they combine, and each rule rebuilds the concrete
//! operators from the nodes' validated arguments (no downcasts).
//!
//! Every fusion gives the same values and records the same parameters (under the same
//! operator names, drawn from the same random streams) as running the operators one by one,
//! except where a rule says its result differs on purpose (an opt-in approximation, which
//! `stokehold check` prints). The graph builder (`crate::pipeline::graph`) offers a run of
//! nodes only when each feeds the next alone and none of the intermediate edges is a pipeline
//! output.
//!
//! | kinds                                 | fused operator                          |
//! |---------------------------------------|-----------------------------------------|
//! | decode → resize → crop                | [`resize_crop::DecodeResizeCrop`]       |
//! | decode → random_resized_crop          | [`decode_random_crop::DecodeRandomCrop`] |
//! | resize → crop                         | [`resize_crop::ResizeCrop`]             |
//! | flip → normalize → layout             | [`normalize_layout::NormalizeToLayout`] (mirroring) |
//! | normalize → layout                    | [`normalize_layout::NormalizeToLayout`] |

use std::sync::Arc;

use crate::ops::crop::Crop;
use crate::ops::decode::Decode;
use crate::ops::flip::Flip;
use crate::ops::layout::ToLayout;
use crate::ops::normalize::Normalize;
use crate::ops::random_resized_crop::RandomResizedCrop;
use crate::ops::resize::Resize;
use crate::ops::{Args, Operator};

pub mod chain;
pub mod decode_random_crop;
pub mod normalize_layout;
#[cfg(target_arch = "x86_64")]
mod normalize_layout_simd;
pub mod resize_crop;

pub use decode_random_crop::{
    decode_and_crop, decode_and_crop_scaled, DecodeAndCropError, DecodeRandomCrop,
};
pub use normalize_layout::{FusedFlip, NormalizeToLayout};
pub use resize_crop::{DecodeResizeCrop, ResizeCrop};

/// One operator offered to the rules: its kind, its name and random-stream key (which a
/// fused operator keeps using, so its draws and records don't change), and its validated
/// arguments.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Operator kind.
    pub kind: &'a str,
    /// Its name in the pipeline.
    pub name: &'a Arc<str>,
    /// Its random-stream key.
    pub key: u64,
    /// Its validated arguments (defaults filled in).
    pub args: &'a Args,
}

/// A fusion rule: the kinds it matches, in data-flow order, and how it builds the fused
/// operator (`None` when the rule's conditions don't hold for these arguments).
pub struct Rule {
    /// The kinds of the run, in data-flow order.
    pub kinds: &'static [&'static str],
    /// Builds the fused operator from the run's parts (exactly `kinds.len()` of them).
    pub build: fn(&[Part<'_>]) -> Option<Box<dyn Operator>>,
    /// What differs from the unfused operators on purpose, if anything, for these parts.
    pub differs: fn(&[Part<'_>]) -> Option<&'static str>,
}

/// A run of parts replaced by one operator.
#[derive(Debug)]
pub struct Fused {
    /// How many parts (from the first) it replaces.
    pub len: usize,
    /// The fused operator.
    pub op: Box<dyn Operator>,
    /// What differs from the unfused operators on purpose (`None`: nothing).
    pub differs: Option<&'static str>,
}

/// For rules whose fused operator gives exactly the unfused results.
fn same(_: &[Part<'_>]) -> Option<&'static str> {
    None
}

/// The rules, longest first, so a run takes the largest fusion that matches it.
pub static RULES: &[Rule] = &[
    Rule {
        kinds: &["decode", "resize", "crop"],
        build: |p| {
            Some(Box::new(DecodeResizeCrop {
                decode: *Decode::from_args(p[0].args).options(),
                rest: resize_crop(&p[1..])?,
            }))
        },
        differs: same,
    },
    Rule {
        kinds: &["flip", "normalize", "layout"],
        build: |p| {
            Some(Box::new(NormalizeToLayout {
                mirror: Some(FusedFlip {
                    flip: Flip::from_args(p[0].args),
                    name: p[0].name.clone(),
                    key: p[0].key,
                }),
                ..normalize_layout(&p[1..])?
            }))
        },
        differs: same,
    },
    Rule {
        kinds: &["decode", "random_resized_crop"],
        build: |p| {
            Some(Box::new(DecodeRandomCrop {
                decode: *Decode::from_args(p[0].args).options(),
                rrc: RandomResizedCrop::from_args(p[1].args).ok()?,
                rrc_name: p[1].name.clone(),
                rrc_key: p[1].key,
            }))
        },
        differs: |p| {
            RandomResizedCrop::from_args(p[1].args)
                .ok()
                .filter(|r| r.dct_downscale)
                .map(|_| {
                    "dct_downscale = true, large windows are decoded downscaled in the DCT \
                     domain (close to, not the same as, the unfused pair)"
                })
        },
    },
    Rule {
        kinds: &["resize", "crop"],
        build: |p| Some(Box::new(resize_crop(p)?)),
        differs: same,
    },
    Rule {
        kinds: &["normalize", "layout"],
        build: |p| Some(Box::new(normalize_layout(p)?)),
        differs: same,
    },
];

fn resize_crop(p: &[Part<'_>]) -> Option<ResizeCrop> {
    Some(ResizeCrop {
        resize: Resize::from_args(p[0].args).ok()?,
        crop: Crop::from_args(p[1].args).ok()?,
        resize_name: p[0].name.clone(),
        crop_name: p[1].name.clone(),
    })
}

fn normalize_layout(p: &[Part<'_>]) -> Option<NormalizeToLayout> {
    Some(NormalizeToLayout {
        normalize: Normalize::from_args(p[0].args).ok()?,
        layout: ToLayout::from_args(p[1].args).ok()?.layout,
        mirror: None,
        simd: true,
    })
}

/// The first rule (longest first) that matches a prefix of `run` and whose conditions hold,
/// applied: what replaces `run[..len]`. `run` is a run of operators each feeding the next
/// alone (the graph builder checks that).
pub fn fuse(run: &[Part<'_>]) -> Option<Fused> {
    RULES.iter().find_map(|rule| {
        let n = rule.kinds.len();
        let matches = run.len() >= n && run.iter().zip(rule.kinds).all(|(p, k)| p.kind == *k);
        if !matches {
            return None;
        }
        let parts = &run[..n];
        Some(Fused {
            len: n,
            op: (rule.build)(parts)?,
            differs: (rule.differs)(parts),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ops::{ArgValue, OpSchema};

    fn schema(kind: &str) -> &'static OpSchema {
        match kind {
            "decode" => &crate::ops::decode::SCHEMA,
            "resize" => &crate::ops::resize::SCHEMA,
            "crop" => &crate::ops::crop::SCHEMA,
            "random_resized_crop" => &crate::ops::random_resized_crop::SCHEMA,
            "flip" => &crate::ops::flip::SCHEMA,
            other => panic!("no schema for {other} in this test"),
        }
    }

    fn args(kind: &str, given: &[(&str, ArgValue)]) -> Args {
        let given: BTreeMap<String, ArgValue> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Args::validate(schema(kind), &given).expect("valid")
    }

    fn part<'a>(name: &'a Arc<str>, kind: &'a str, args: &'a Args) -> Part<'a> {
        Part {
            kind,
            name,
            key: name.len() as u64,
            args,
        }
    }

    #[test]
    fn no_rule_hides_a_longer_one() {
        for (i, a) in RULES.iter().enumerate() {
            for b in &RULES[i + 1..] {
                assert!(
                    !(b.kinds.len() > a.kinds.len() && b.kinds.starts_with(a.kinds)),
                    "{:?} hides {:?}",
                    a.kinds,
                    b.kinds
                );
            }
        }
    }

    #[test]
    fn runs_take_the_longest_rule_and_say_what_differs() {
        let (a, b, c): (Arc<str>, Arc<str>, Arc<str>) = ("a".into(), "bb".into(), "ccc".into());
        let decode = args("decode", &[]);
        let resize = args("resize", &[("shorter", 8.into())]);
        let crop = args("crop", &[("size", 4.into())]);
        let rrc = args("random_resized_crop", &[("size", 4.into())]);
        let dct = args(
            "random_resized_crop",
            &[("size", 4.into()), ("dct_downscale", true.into())],
        );
        let flip = args("flip", &[]);
        let run = [
            part(&a, "decode", &decode),
            part(&b, "resize", &resize),
            part(&c, "crop", &crop),
        ];
        let f = fuse(&run).unwrap();
        assert_eq!((f.len, f.differs), (3, None));
        let f = fuse(&run[1..]).unwrap();
        assert_eq!(f.len, 2);
        assert!(fuse(&run[2..]).is_none());
        let f = fuse(&[
            part(&a, "decode", &decode),
            part(&b, "random_resized_crop", &rrc),
        ]);
        assert_eq!(f.map(|f| (f.len, f.differs)), Some((2, None)));
        let f = fuse(&[
            part(&a, "decode", &decode),
            part(&b, "random_resized_crop", &dct),
        ]);
        assert!(f
            .unwrap()
            .differs
            .is_some_and(|d| d.contains("dct_downscale")));
        assert!(fuse(&[part(&a, "flip", &flip), part(&b, "crop", &crop)]).is_none());
    }
}
