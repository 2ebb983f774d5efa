//! CPU decoding of JPEG and PNG (placeholder).
