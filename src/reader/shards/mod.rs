//! WebDataset tar shards: the `shard_reader` schema, and reading shards from local files or
//! http(s) ([`tar`], [`http`], [`open`]), their samples ([`samples`]), which shards a data set
//! is ([`list`], [`index`], [`set`]), each epoch's schedule for a rank ([`schedule`]), the stream the
//! reader threads take samples from ([`stream`]), and writing shards ([`pack`]).
//!
//! The `shard_reader`'s schema is in the reader's `mod.rs`, beside the file reader's. See
//! `docs/shards.md` for the formats accepted, the shuffle, resume and rank semantics.

pub mod http;
pub mod index;
pub mod list;
pub mod open;
pub mod pack;
pub mod samples;
pub mod schedule;
pub mod set;
pub mod stream;
pub mod tar;

pub use set::KIND;

#[cfg(test)]
mod http_tests;
#[cfg(test)]
mod tests;
