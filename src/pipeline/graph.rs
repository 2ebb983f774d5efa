//! Validation and planning (placeholder).
