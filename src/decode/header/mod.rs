//! The one JPEG header parser: a bounds-checked walk of the markers (SOF, DQT, DHT, SOS, DRI,
//! APPn) into a [`JpegHeader`], read once per sample and handed to every decoder — our
//! entropy decoders, the libjpeg-turbo hand-over, [`super::probe`], window and scaled
//! decodes, and the nvJPEG routing ([`crate::nvjpeg::fallback`]).
//!
//! What we decode, what is [unsupported](crate::error::DecodeError::Unsupported) and what is
//! truncated is decided here, once, as the walk meets it:
//! - lossless (SOF3, SOF7, SOF11, SOF15), hierarchical (SOF5–SOF7, SOF13–SOF15, DHP) and
//!   12/16-bit precision are `Unsupported`, with a message naming the feature;
//!   arithmetic-coded sequential and progressive JPEGs (SOF9, SOF10) are decoded
//!   (libjpeg-turbo is built with arithmetic decoding, Pillow decodes them too);
//! - frames of 1, 3 or 4 components with sampling factors 1..=4 are decoded;
//! - frame dimensions are checked against the [limits](super::Limits) before anything is
//!   allocated;
//! - bytes before SOI (within the first 64 KiB) or between segments (garbage that libjpeg
//!   skips with a warning) are tolerated, as Pillow does.
//!
//! # Truncated files
//!
//! [`JpegHeader::read`] follows every scan to the end-of-image marker: a JPEG whose data ends
//! inside a scan or before EOI is rejected as
//! [corrupt](crate::error::DecodeError::Corrupt) ("truncated: ..."). libjpeg would otherwise
//! fill the missing blocks with gray and only warn, and a silently gray-filled image poisons
//! training. Pillow also refuses such files unless
//! `ImageFile.LOAD_TRUNCATED_IMAGES` is set. [`JpegHeader::read_to_first_scan`] stops at the
//! first scan, for what only needs the size.
//!
//! # Damaged data: what libjpeg refuses
//!
//! A marker libjpeg has no meaning for (`FF 04`, which one flipped bit makes of a stuffed
//! `FF 00` in the image data), a progressive scan whose progression libjpeg refuses, and
//! after the first scan's data a malformed DHT, DQT, DRI or SOS segment or a second scan
//! where none can follow, are [`DecodeError::Corrupt`](crate::error::DecodeError::Corrupt)
//! ("damaged data: ..."): libjpeg refuses them when Pillow finishes the decode
//! (`jpeg_finish_decompress`), which our decoders never call (see `refusals.rs`). Every
//! decoder, nvJPEG's routing included, takes this verdict from the one header read, so both
//! devices skip such a file, as Pillow does. Other damage in the data (an invalid Huffman
//! code, restart markers out of order) only makes libjpeg warn: the file decodes, as in
//! Pillow.
//!
//! # What the walk leaves to libjpeg
//!
//! Before the first scan, tables are recorded as found and judged only as far as libjpeg
//! judges them when it decodes; what it refuses or only warns about is noted in
//! [`JpegHeader::irregular_at`], not refused here: a malformed DHT, DQT, SOS or DRI segment
//! (or one of another length than libjpeg needs), a frame header longer than its components
//! need or a side above 65500 pixels, a scan naming a component out of the frame or its
//! order, a table it decodes with that is not defined or that libjpeg refuses (codes that
//! overflow their lengths, a DC symbol above 15: `jpeg_make_d_derived_tbl`; a bad table no
//! scan uses is only marked, [`HuffmanTable::refused`]), and garbage between segments (which
//! libjpeg skips). Our entropy decoders then leave the file to libjpeg-turbo
//! ([`JpegHeader::own_sequential_fit`], [`JpegHeader::own_progressive_fit`] say which files
//! they take), so that such files decode, or fail, exactly as libjpeg has them; and the
//! nvJPEG routing sends them to the CPU decoder, as the JPEG engines report no error per
//! image.
//!
//! What a header holds is in `fields.rs`, the walk that reads it in `walk.rs`, the refusals
//! in `refusals.rs`, and what a header says beyond its fields (subsampling, the colour space
//! libjpeg reads, which of our entropy decoders takes the file) in `facts.rs`.

mod facts;
mod fields;
mod refusals;
mod walk;

pub use facts::{ColorSpace, Subsampling};
pub(crate) use fields::slot;
pub use fields::{
    Frame, FrameComponent, HuffmanTable, JpegHeader, QuantTable, Scan, ScanComponent,
    TablesInEffect,
};
pub(crate) use walk::find_soi;
