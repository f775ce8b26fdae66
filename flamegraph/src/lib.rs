//! profilink's embedded profile store, Sentry's flamegraph API over it, and a viewer.
//!
//! * [`ProfileStore`]: SQLite (bundled, WAL) keeping every profile chunk with its metadata
//!   (project, environment, release, platform, profiler and chunk ids, thread ids, first/last
//!   sample time, linked transaction names, size), its zstd-compressed payload, and its call
//!   trees precomputed at insert. Inserts are idempotent by (project, chunk_id); retention
//!   deletes by age and then oldest-first by size.
//! * [`router`] / [`serve`]: `GET /api/0/organizations/{organization_id_or_slug}/profiling/flamegraph/`
//!   answering like Sentry (vroom's aggregation, see the `flamegraph` module docs) and the
//!   viewer at `/ui/` with an SVG flamegraph rendered by `inferno`.
//! * [`fingerprint`]: Sentry's function fingerprints.
//!
//! The service wires it as two extensions: `profile_store` ([`StoreConfig`]) receives every
//! chunk profilink exports to Sentry or receives from SDKs ([`ProfileStore::insert`], in
//! `spawn_blocking`), and `flamegraph_api` ([`ApiConfig`]) serves [`router`].
#![warn(missing_docs)]

mod api;
mod calltree;
mod config;
pub mod fingerprint;
mod flamegraph;
mod normalize;
mod query;
mod store;
mod ui;
mod web;

pub use api::{router, serve, serve_on};
pub use calltree::CallTreeError;
pub use config::{ApiConfig, StoreConfig};
pub use store::{
    ChunkMeta, Facets, ProfileStore, Result, RetentionStats, StoreError, StoredChunkInfo,
    TransactionLink,
};
