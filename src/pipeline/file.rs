//! Pipeline files (TOML): parsing with source locations (placeholder).
