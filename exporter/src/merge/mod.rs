//! Merging pieces of chunks of one profiler session into one chunk.
//!
//! [`ChunkBuilder`] takes metadata (platform, release, environment, client SDK, content type,
//! profiler id) from the first chunk it sees and then adds selected samples of any number of
//! chunks: frames and stacks are deduplicated and re-indexed, thread metadata and debug images
//! are unioned, measurement values are concatenated per key. [`ChunkBuilder::finish`] sorts the
//! samples by time and gives the chunk its deterministic id ([`merged_chunk_id`]).
//!
//! Invalid references (a sample's `stack_id` or a stack's frame index out of range) would make
//! Relay reject the whole merged chunk, so such samples and frame references are left out.
//!
//! Files: `builder` holds the [`ChunkBuilder`] and [`frame_hash`]; `chunk_id` the
//! content-derived chunk id ([`merged_chunk_id`], [`content_checksum`]) and its frame-digest
//! cache.

mod builder;
mod chunk_id;
#[cfg(test)]
mod tests;

pub use builder::{ChunkBuilder, frame_hash};
pub use chunk_id::{content_checksum, merged_chunk_id};
