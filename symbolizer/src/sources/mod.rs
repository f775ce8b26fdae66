//! Where objects and debug files come from: [`debug_dirs`], [`process`], [`debuginfod`] (with
//! its [`disk_cache`] and bounded [`download`]s).

pub(crate) mod debug_dirs;
pub(crate) mod debuginfod;
pub(crate) mod disk_cache;
pub(crate) mod download;
pub(crate) mod process;
