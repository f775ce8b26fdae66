//! Validators (being written).
