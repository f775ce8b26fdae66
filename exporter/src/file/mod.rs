//! The file exporter: one `<chunk_id>.envelope` per merged chunk in a directory, written
//! atomically (temporary file in the same directory, fsync, rename, directory fsync). It
//! accumulates and queues exactly like the Sentry exporter; it is the default when no DSN is
//! configured.
//!
//! Files: [`config`] (`exporters.file`), `export` (the exporter and its sink), `write` (atomic
//! writes and envelope file names, shared with the Sentry exporter's dead letters).

pub mod config;
mod export;
mod write;

pub use config::FileExporterConfig;
pub use export::FileExporter;
pub use write::{WritebackFile, envelope_file_name, write_atomic, write_atomic_with};
