//! Tests of composing a chain into one fused sample (no device needed; the kernels are
//! checked against the CPU in `crate::fusion::chain`).

use super::*;
use crate::image::{DType, Layout};
use crate::resample::Interp;

const BILINEAR: Resample = Resample {
    interp: Interp::Bilinear,
    antialias: true,
};

fn steps(list: &[(&str, ChainStep)]) -> Vec<(String, ChainStep)> {
    list.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn geometry(resample: Option<Resample>) -> ChainStep {
    ChainStep::Geometry { resample }
}

#[test]
fn order_and_rounding_rules_are_checked_before_any_sample() {
    let ok = |l: &[(&str, ChainStep)]| ChainSteps::new(steps(l)).is_ok();
    let refused_at = |l: &[(&str, ChainStep)]| ChainSteps::new(steps(l)).unwrap_err().op;
    // The shipped recipes.
    assert!(ok(&[
        ("rrc", geometry(Some(BILINEAR))),
        ("flip", ChainStep::Flip),
        ("norm", ChainStep::Normalize { dtype: DType::F32 }),
        (
            "chw",
            ChainStep::Layout {
                layout: Layout::Chw
            }
        ),
    ]));
    assert!(ok(&[
        ("resize", geometry(Some(BILINEAR))),
        ("crop", geometry(None)),
        ("norm", ChainStep::Normalize { dtype: DType::F32 }),
        (
            "chw",
            ChainStep::Layout {
                layout: Layout::Chw
            }
        ),
    ]));
    // Crop, resize, crop again; jitter and flip in either order; casts of u8 values.
    assert!(ok(&[
        ("c1", geometry(None)),
        ("r", geometry(Some(BILINEAR))),
        ("c2", geometry(None)),
        ("j", ChainStep::ColorJitter),
        ("f", ChainStep::Flip),
        ("to_f32", ChainStep::Cast { dtype: DType::F32 }),
        ("n", ChainStep::Normalize { dtype: DType::F32 }),
        ("to_u8", ChainStep::Cast { dtype: DType::U8 }),
    ]));
    assert_eq!(
        refused_at(&[
            ("r1", geometry(Some(BILINEAR))),
            ("r2", geometry(Some(BILINEAR)))
        ]),
        "r2"
    );
    assert_eq!(
        refused_at(&[("f", ChainStep::Flip), ("c", geometry(None))]),
        "c"
    );
    assert_eq!(
        refused_at(&[("j", ChainStep::ColorJitter), ("c", geometry(None))]),
        "c"
    );
    assert_eq!(
        refused_at(&[
            ("j1", ChainStep::ColorJitter),
            ("j2", ChainStep::ColorJitter)
        ]),
        "j2"
    );
    assert_eq!(
        refused_at(&[
            ("n", ChainStep::Normalize { dtype: DType::F32 }),
            ("j", ChainStep::ColorJitter)
        ]),
        "j"
    );
    // After an f16 normalize, a cast to f32 would round twice.
    assert_eq!(
        refused_at(&[
            ("n", ChainStep::Normalize { dtype: DType::F16 }),
            ("c", ChainStep::Cast { dtype: DType::F32 })
        ]),
        "c"
    );
    assert_eq!(
        refused_at(&[
            ("n", ChainStep::Normalize { dtype: DType::F32 }),
            ("a", ChainStep::Cast { dtype: DType::F16 }),
            ("b", ChainStep::Cast { dtype: DType::U8 })
        ]),
        "b"
    );
    assert_eq!(
        refused_at(&[
            ("n1", ChainStep::Normalize { dtype: DType::F32 }),
            ("n2", ChainStep::Normalize { dtype: DType::F32 })
        ]),
        "n2"
    );
    let e = ChainSteps::new(steps(&[
        ("r1", geometry(Some(BILINEAR))),
        ("r2", geometry(Some(BILINEAR))),
    ]))
    .unwrap_err();
    assert!(
        e.to_string().starts_with("'r2': 'r1' resamples already"),
        "{e}"
    );
}

#[test]
fn pieces_fold_into_one_sample() {
    let chain = ChainSteps::new(steps(&[
        ("c1", geometry(None)),
        ("r", geometry(Some(BILINEAR))),
        ("c2", geometry(None)),
        ("f1", ChainStep::Flip),
        ("f2", ChainStep::Flip),
        ("n", ChainStep::Normalize { dtype: DType::F16 }),
        (
            "l",
            ChainStep::Layout {
                layout: Layout::Chw,
            },
        ),
    ]))
    .unwrap();
    let pieces = [
        ChainPiece::Geometry {
            window: Some((10, 20, 100, 80)),
            out: (100, 80),
        },
        ChainPiece::Geometry {
            window: None,
            out: (50, 40),
        },
        ChainPiece::Geometry {
            window: Some((5, 6, 30, 20)),
            out: (30, 20),
        },
        ChainPiece::Flip {
            horizontal: true,
            vertical: true,
        },
        ChainPiece::Flip {
            horizontal: true,
            vertical: false,
        },
        ChainPiece::Normalize {
            mean: [1.0, 2.0, 3.0, 0.0],
            inv_std: [0.5; 4],
        },
        ChainPiece::Fixed,
    ];
    let s = chain.sample((200, 300, 3), &pieces).unwrap();
    assert_eq!(s.window, (10, 20, 100, 80));
    assert_eq!((s.out_h, s.out_w, s.keep), (50, 40, Some((5, 6, 30, 20))));
    assert_eq!(s.output_size(), (30, 20));
    assert_eq!((s.flip_h, s.flip_v), (false, true));
    assert_eq!(s.normalize, Some(([1.0, 2.0, 3.0, 0.0], [0.5; 4])));
    assert_eq!(
        (s.dtype, s.layout, s.jitter),
        (DType::F16, Layout::Chw, None)
    );

    // A crop reaching outside the image needs a border: this sample is refused.
    let mut outside = pieces;
    outside[0] = ChainPiece::Geometry {
        window: Some((-1, 0, 100, 80)),
        out: (100, 80),
    };
    let e = chain.sample((200, 300, 3), &outside).unwrap_err();
    assert_eq!(e.op, "c1");
    // A resize to the same size is no resampling.
    let mut same = pieces;
    same[1] = ChainPiece::Geometry {
        window: None,
        out: (100, 80),
    };
    let s = chain.sample((200, 300, 3), &same).unwrap();
    assert_eq!((s.window, s.keep), ((15, 26, 30, 20), None));
    // Wrong counts and kinds of pieces, and channels the kernel does not take.
    assert!(chain.sample((200, 300, 3), &pieces[..2]).is_err());
    assert!(chain.sample((200, 300, 5), &pieces).is_err());
    let mut wrong = pieces;
    wrong[3] = ChainPiece::Fixed;
    assert_eq!(chain.sample((200, 300, 3), &wrong).unwrap_err().op, "f1");
}

#[test]
fn jitter_takes_three_channels_and_splits_the_launch() {
    let chain = ChainSteps::new(steps(&[("j", ChainStep::ColorJitter)])).unwrap();
    let j = ChainPiece::ColorJitter(JitterSample {
        brightness: Some(1.5),
        ..JitterSample::NONE
    });
    assert!(chain.sample((4, 4, 1), &[j]).is_err());
    let s = chain.sample((4, 4, 3), &[j]).unwrap();
    assert!(s.jitter.is_some());
    let stages = launcher::JitterStages::of(&[s, FusedSample { jitter: None, ..s }]).unwrap();
    assert_eq!(stages.jitter[1], JitterSample::NONE);
    assert_eq!(stages.rest[0].window, (0, 0, 4, 4));
    assert!(launcher::JitterStages::of(&[FusedSample { jitter: None, ..s }]).is_none());
    let d = JitterSample {
        order: [3, 1, 0, 2],
        hue_shift: Some(7),
        ..JitterSample::NONE
    }
    .desc(10)
    .unwrap();
    assert_eq!((d.enabled, d.hue_shift, d.pixels), (8, 7, 10));
    assert!(JitterSample {
        order: [4, 1, 0, 2],
        ..JitterSample::NONE
    }
    .desc(1)
    .is_err());
}
