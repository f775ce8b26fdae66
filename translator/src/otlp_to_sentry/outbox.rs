//! Where a session's chunks go: validated (strict out) and emitted with their links, the first
//! one held while the session's producer chunk id may still name it.

use super::{ChunkOptions, InvalidChunk, Stats, strict};
use crate::sample_link::SampleLink;
use profilink_proto::sentry::ProfileChunk;

/// Where a session's chunks go: validated and emitted with their links (see *Strict out* in
/// the module docs), the first one held while the session's producer chunk id may still name
/// it.
pub(crate) struct Outbox<'e, 'o> {
    pub(crate) emit: &'e mut dyn FnMut(ProfileChunk, Vec<SampleLink>),
    pub(crate) options: &'o ChunkOptions,
    /// The producer's chunk id of the session, until it has more than one chunk.
    pub(crate) producer_chunk_id: Option<String>,
    /// The session's first chunk, while it may be the only one.
    pub(crate) held: Option<(ProfileChunk, Vec<SampleLink>)>,
    pub(crate) invalid: &'o mut Vec<InvalidChunk>,
}

impl Outbox<'_, '_> {
    /// A chunk the splitter cut, with the links of its samples.
    pub(crate) fn cut(&mut self, chunk: ProfileChunk, links: Vec<SampleLink>, stats: &mut Stats) {
        if self.producer_chunk_id.is_some() {
            match self.held.take() {
                None => {
                    self.held = Some((chunk, links));
                    return;
                }
                Some((first, first_links)) => {
                    // More than one chunk: all get derived ids.
                    self.producer_chunk_id = None;
                    self.pass(first, first_links, stats);
                }
            }
        }
        self.pass(chunk, links, stats);
    }

    /// The end of the session: a held chunk was its only one and takes the producer's id.
    pub(crate) fn end_of_session(&mut self, stats: &mut Stats) {
        if let (Some((mut chunk, links)), Some(id)) =
            (self.held.take(), self.producer_chunk_id.take())
        {
            chunk.chunk_id = id;
            self.pass(chunk, links, stats);
        }
    }

    /// Emits a valid chunk with its links; counts and reports an invalid one, and drops its
    /// links.
    fn pass(&mut self, chunk: ProfileChunk, links: Vec<SampleLink>, stats: &mut Stats) {
        let Some(finding) = strict::blocking_error(&chunk, self.options) else {
            (self.emit)(chunk, links);
            return;
        };
        let samples = chunk.profile.samples.len() as u64;
        stats.chunks -= 1;
        stats.chunks_invalid += 1;
        stats.samples_out -= samples;
        stats.samples_dropped_invalid += samples;
        stats.links -= links.len() as u64;
        self.invalid.push(InvalidChunk {
            chunk_id: chunk.chunk_id,
            profiler_id: chunk.profiler_id,
            samples,
            finding,
        });
    }
}
