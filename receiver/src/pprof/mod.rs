//! The `pprof` receiver, with the Collector contrib `pprofreceiver`'s modes: `server`
//! (`server.rs`: `POST /v1/pprof`), `remote` (`remote.rs`: scrapes of `/debug/pprof/...`) and
//! `file` (`file.rs`: a glob of pprof files). Every profile is translated to OTLP (the
//! translator's pprof mapping, bounded by the mode's size limit) and handed to the pipeline as
//! an OTLP batch; the pull modes count their pulls in the shared stats (`stats/scrape.rs`).

pub mod config;
pub(crate) mod file;
pub(crate) mod pull;
pub(crate) mod remote;
pub(crate) mod server;
