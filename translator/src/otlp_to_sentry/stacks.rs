//! OTLP stacks to deduplicated frame-id lists, memoized per stack index.
//!
//! `Stack.location_indices[0]` is the leaf, and so is a Sentry stack's first frame, so the
//! frames of each location are concatenated in order. A stack deeper than `max_stack_depth`
//! frames keeps its leaf-most `max_stack_depth` frames (the root side is cut) and is counted
//! once in [`super::Stats::stacks_truncated`]. Location indices in the cut part are still
//! bounds-checked (an out-of-range index rejects the profile) but not resolved, so a
//! million-deep stack costs one integer comparison per cut entry. Location index 0 contributes
//! no frame. Stack index 0 (and any stack without frames) is the empty stack.
//!
//! Stacks with the same frames are deduplicated; each unique stack also records its digest
//! (for chunk ids) and its *primary runtime*: the runtime of its leaf-most managed frame, else
//! native when it has native frames, else unspecified (used to pick the chunk platform).

use super::frames::FrameTable;
use super::ids::first8;
use super::platform::Runtime;
use crate::error::TranslateError;
use hashbrown::HashMap;
use sha2::{Digest, Sha256};

const UNRESOLVED: u32 = u32::MAX;

/// Id of the empty stack.
pub(crate) const EMPTY_STACK: u32 = 0;

/// A unique stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackInfo {
    /// Start in [`StackTable::frames`].
    pub start: u32,
    /// Number of frames.
    pub len: u32,
    /// Runtime used for platform selection.
    pub primary: Runtime,
    /// Content digest.
    pub digest: u64,
}

/// Stack resolution with per-index memoization and content deduplication.
pub(crate) struct StackTable {
    max_depth: usize,
    slot: Vec<u32>,
    /// Unique stacks; id 0 is the empty stack.
    pub stacks: Vec<StackInfo>,
    /// Frame ids of all stacks.
    pub frames: Vec<u32>,
    dedup: HashMap<Box<[u32]>, u32>,
    scratch: Vec<u32>,
    /// Unique stacks that were truncated.
    pub truncated: u64,
}

impl StackTable {
    pub(crate) fn new(stack_table_len: usize, max_depth: usize) -> Self {
        let empty = StackInfo {
            start: 0,
            len: 0,
            primary: Runtime::Unspecified,
            digest: first8(&Sha256::digest(b"")),
        };
        let mut dedup = HashMap::new();
        dedup.insert(Box::from([]), EMPTY_STACK);
        StackTable {
            max_depth,
            slot: vec![UNRESOLVED; stack_table_len],
            stacks: vec![empty],
            frames: Vec::new(),
            dedup,
            scratch: Vec::new(),
            truncated: 0,
        }
    }

    /// The frame ids of a stack.
    pub(crate) fn frames_of(&self, id: u32) -> &[u32] {
        let s = self.stacks[id as usize];
        &self.frames[s.start as usize..(s.start + s.len) as usize]
    }

    /// Resolves OTLP stack `index` to a unique stack id.
    pub(crate) fn resolve(
        &mut self,
        ft: &mut FrameTable<'_>,
        index: i32,
    ) -> Result<u32, TranslateError> {
        let slot = usize::try_from(index).ok().filter(|i| *i < self.slot.len());
        if let Some(s) = slot.map(|i| self.slot[i]).filter(|s| *s != UNRESOLVED) {
            return Ok(s);
        }
        let Some(locations) = ft.stack_locations(index)? else {
            return Ok(EMPTY_STACK);
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let mut truncated = false;
        for &li in locations {
            if scratch.len() >= self.max_depth {
                truncated = true;
                ft.check_location(li)?;
                continue;
            }
            let (frames, capped) = ft.location(li)?;
            let room = self.max_depth - scratch.len();
            if frames.len() > room || capped {
                truncated = true;
            }
            scratch.extend_from_slice(&frames[..frames.len().min(room)]);
        }
        if truncated {
            self.truncated += 1;
        }
        let id = match self.dedup.get(scratch.as_slice()) {
            Some(&id) => id,
            None => {
                let mut managed = None;
                let mut native = false;
                let mut h = Sha256::new();
                for &f in &scratch {
                    let info = &ft.frames[f as usize];
                    h.update(info.digest.to_be_bytes());
                    if managed.is_none() && info.runtime.is_managed() {
                        managed = Some(info.runtime);
                    }
                    native |= info.runtime.is_native_family();
                }
                let primary = managed.unwrap_or(if native {
                    Runtime::Native
                } else {
                    Runtime::Unspecified
                });
                let id = self.stacks.len() as u32;
                self.stacks.push(StackInfo {
                    start: self.frames.len() as u32,
                    len: scratch.len() as u32,
                    primary,
                    digest: first8(&h.finalize()),
                });
                self.frames.extend_from_slice(&scratch);
                self.dedup.insert(Box::from(scratch.as_slice()), id);
                id
            }
        };
        if let Some(i) = slot {
            self.slot[i] = id;
        }
        self.scratch = scratch;
        Ok(id)
    }
}
