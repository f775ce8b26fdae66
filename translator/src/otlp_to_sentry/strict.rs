//! Strict out: every chunk [`super::to_chunks`] emits passes profilink's own chunk validator
//! ([`profilink_proto::validate::validate_chunk_errors`]) at error level; a chunk that does not
//! is removed from the output and reported ([`super::InvalidChunk`]).
//!
//! The validator runs once per emitted chunk, on the struct (no serialization: the chunk's size
//! is already bounded by `max_chunk_bytes`, at most Relay's limit, while it is cut). One rule is
//! the caller's choice: with a [`SparseThreadPolicy`] other than `Drop`, threads Relay would drop
//! are emitted on purpose (the service's accumulator merges chunks before it applies Relay's
//! rule), so a chunk *with* samples whose threads all are sparse (`no-samples`) is not an error
//! here. A chunk without any sample always is.

use super::options::{ChunkOptions, SparseThreadPolicy};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::{Finding, validate_chunk_errors};

/// The first error-level finding that keeps `chunk` from being emitted under `options`, if any
/// (also for chunks that were not translated, e.g. passed through from a Sentry SDK).
pub fn blocking_error(chunk: &ProfileChunk, options: &ChunkOptions) -> Option<Finding> {
    let keeps_sparse = options.sparse_thread_policy != SparseThreadPolicy::Drop;
    validate_chunk_errors(chunk).into_iter().find(|f| {
        f.is_error()
            && !(keeps_sparse && f.rule == "no-samples" && !chunk.profile.samples.is_empty())
    })
}
