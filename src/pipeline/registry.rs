//! Every kind a pipeline may name — the readers and the operators — with its schema, and
//! how each operator is built. It lives here, where the reader and the operators are both
//! known, so neither needs the other.

use crate::ops::{self, BuildFn};
use crate::schema::OpSchema;

/// A kind: its schema, and how to build it (`None` for the readers, which are not
/// operators: they run on the reader threads).
struct Kind {
    schema: &'static OpSchema,
    build: Option<BuildFn>,
}

static KINDS: &[Kind] = &[
    Kind {
        schema: &crate::reader::SCHEMA,
        build: None,
    },
    Kind {
        schema: &crate::reader::SHARD_SCHEMA,
        build: None,
    },
    Kind {
        schema: &ops::decode::SCHEMA,
        build: Some(ops::decode::build),
    },
    Kind {
        schema: &ops::crop::SCHEMA,
        build: Some(ops::crop::build),
    },
    Kind {
        schema: &ops::random_resized_crop::SCHEMA,
        build: Some(ops::random_resized_crop::build),
    },
    Kind {
        schema: &ops::resize::SCHEMA,
        build: Some(ops::resize::build),
    },
    Kind {
        schema: &ops::flip::SCHEMA,
        build: Some(ops::flip::build),
    },
    Kind {
        schema: &ops::color_jitter::SCHEMA,
        build: Some(ops::color_jitter::build),
    },
    Kind {
        schema: &ops::normalize::SCHEMA,
        build: Some(ops::normalize::build),
    },
    Kind {
        schema: &ops::cast::SCHEMA,
        build: Some(ops::cast::build),
    },
    Kind {
        schema: &ops::layout::SCHEMA,
        build: Some(ops::layout::build),
    },
    Kind {
        schema: &ops::pad::SCHEMA,
        build: Some(ops::pad::build),
    },
];

/// The schemas of all kinds, the readers first.
///
/// ```
/// let kinds: Vec<&str> = stokehold::pipeline::registry::schemas().map(|s| s.kind).collect();
/// assert_eq!(kinds[0], "file_reader");
/// assert!(kinds.contains(&"random_resized_crop"));
/// ```
pub fn schemas() -> impl Iterator<Item = &'static OpSchema> {
    KINDS.iter().map(|k| k.schema)
}

/// The schema of `kind`, if there is such a kind.
pub fn find(kind: &str) -> Option<&'static OpSchema> {
    schemas().find(|s| s.kind == kind)
}

/// How to build operator `kind` (`None` for the reader and for unknown kinds).
pub fn builder(kind: &str) -> Option<BuildFn> {
    KINDS
        .iter()
        .find(|k| k.schema.kind == kind)
        .and_then(|k| k.build)
}

/// Whether `kind` is a reader (the file reader or the shard reader).
pub fn is_reader(kind: &str) -> bool {
    crate::reader::is_reader_kind(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_builds_and_the_reader_does_not() {
        for k in KINDS {
            assert_eq!(
                k.build.is_none(),
                is_reader(k.schema.kind),
                "{}",
                k.schema.kind
            );
        }
        let mut kinds: Vec<&str> = schemas().map(|s| s.kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), KINDS.len(), "a kind is listed twice");
    }

    #[test]
    fn every_fusion_rule_names_known_kinds() {
        for r in crate::fusion::RULES {
            for k in r.kinds {
                assert!(builder(k).is_some(), "{k}");
            }
        }
    }
}
