//! Input format detection (being written).
