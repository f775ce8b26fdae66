//! profilink's processing stage: what happens between a receiver accepting data and the
//! exporters taking it.

pub mod counters;
pub mod join;
pub mod linking;
pub mod profiles;
pub mod sampling;
pub mod spec;
pub mod store;
pub mod traces;
