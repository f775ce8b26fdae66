//! Which session and thread a sample belongs to: its process's identity attributes (over the
//! sample, then the resource layer) decide the session, its `thread.id` (else `process.pid`)
//! and `thread.name` the thread. Both are computed once per resource and distinct list of
//! identity and thread attributes, and remembered.

use super::Collector;
use crate::dictionary::{Attr, AttrValue};
use crate::error::TranslateError;
use crate::otlp_to_sentry::ids::digest64;
use crate::otlp_to_sentry::observations::{Session, ThreadInfo};
use crate::otlp_to_sentry::platform::{hint_from_runtime_name, hint_from_sdk_language};
use crate::otlp_to_sentry::samples::thread_id_text;
use crate::otlp_to_sentry::session::{ProcessIdentity, derive_profiler_id};
use profilink_proto::otlp::Sample;
use profilink_proto::sentry::CompactString;

/// A resource (by address, stable during a translation) and attribute indices.
pub(super) type AttrKey = (usize, Box<[i32]>);

pub(super) const ATTR_UNKNOWN: u8 = 0;
const ATTR_PROCESS: u8 = 1;
const ATTR_THREAD: u8 = 2;
const ATTR_OTHER: u8 = 3;

/// A borrowed key of [`Collector::identity_cache`] (hashes like the owned key).
#[derive(Hash)]
struct IdentityKey<'k>(usize, &'k [i32]);

impl hashbrown::Equivalent<AttrKey> for IdentityKey<'_> {
    fn equivalent(&self, key: &AttrKey) -> bool {
        self.0 == key.0 && self.1 == &*key.1
    }
}

/// Attribute lookup over the sample layer, then the resource layer; the last occurrence of a
/// key in a layer wins.
fn lookup<'x, 'a>(
    sample: &'x [Attr<'a>],
    resource: &'x [Attr<'a>],
    key: &str,
) -> Option<&'x AttrValue<'a>> {
    sample
        .iter()
        .rev()
        .find(|a| a.key == key)
        .or_else(|| resource.iter().rev().find(|a| a.key == key))
        .map(|a| &a.value)
}

fn non_empty_str(v: Option<&AttrValue<'_>>) -> Option<String> {
    v.and_then(AttrValue::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl<'a> Collector<'a> {
    /// How an attribute counts for a sample's identity ([`ATTR_PROCESS`], [`ATTR_THREAD`]
    /// or [`ATTR_OTHER`]), remembered per attribute-table index.
    fn attribute_class(&mut self, index: i32) -> Result<u8, TranslateError> {
        let slot = usize::try_from(index)
            .ok()
            .filter(|&i| i < self.attr_class.len());
        if let Some(i) = slot
            && self.attr_class[i] != ATTR_UNKNOWN
        {
            return Ok(self.attr_class[i]);
        }
        let class = match self.dict.attribute(index)? {
            Some(a) if ProcessIdentity::is_identity_key(a.key) => ATTR_PROCESS,
            Some(a) if a.key == "thread.id" || a.key == "thread.name" => ATTR_THREAD,
            _ => ATTR_OTHER,
        };
        if let Some(i) = slot {
            self.attr_class[i] = class;
        }
        Ok(class)
    }

    /// The session and thread of a sample, computed once per resource and distinct list of
    /// identity and thread attributes (eBPF samples differ in other attributes too).
    pub(super) fn session_thread_cached(
        &mut self,
        resource_id: usize,
        resource: &[Attr<'a>],
        s: &'a Sample,
    ) -> Result<(u32, u32), TranslateError> {
        let mut key = std::mem::take(&mut self.key_scratch);
        key.clear();
        for &i in &s.attribute_indices {
            if self.attribute_class(i)? != ATTR_OTHER {
                key.push(i);
            }
        }
        let v = match self.identity_cache.get(&IdentityKey(resource_id, &key)) {
            Some(&v) => v,
            None => {
                let attrs = self.dict.attributes(&s.attribute_indices)?;
                // The process's attributes alone decide the session.
                let mut process = std::mem::take(&mut self.process_scratch);
                process.clear();
                for &i in &key {
                    if self.attribute_class(i)? == ATTR_PROCESS {
                        process.push(i);
                    }
                }
                let session = match self.session_cache.get(&IdentityKey(resource_id, &process)) {
                    Some(&session) => session,
                    None => {
                        let session = self.session_of(resource, &attrs);
                        self.session_cache
                            .insert((resource_id, process.as_slice().into()), session);
                        session
                    }
                };
                self.process_scratch = process;
                let v = (session, self.thread_of(session, resource, &attrs));
                self.identity_cache
                    .insert((resource_id, key.as_slice().into()), v);
                v
            }
        };
        self.key_scratch = key;
        Ok(v)
    }

    /// The session of a sample's process (created at its first sample).
    fn session_of(&mut self, resource: &[Attr<'a>], attrs: &[Attr<'a>]) -> u32 {
        let identity = ProcessIdentity::from_attributes(resource, attrs);
        let profiler_id = derive_profiler_id(&identity);
        let key = (
            profiler_id,
            self.producer_chunk_id.clone().unwrap_or_default(),
        );
        match self.session_index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.sessions.len() as u32;
                let l = |k| lookup(attrs, resource, k);
                let environment = non_empty_str(l("deployment.environment.name"))
                    .or_else(|| non_empty_str(l("deployment.environment")));
                let platform_hint = l("telemetry.sdk.language")
                    .and_then(AttrValue::as_str)
                    .and_then(hint_from_sdk_language)
                    .or_else(|| {
                        l("process.runtime.name")
                            .and_then(AttrValue::as_str)
                            .and_then(hint_from_runtime_name)
                    });
                self.sessions.push(Session {
                    profiler_id: key.0.clone(),
                    release: non_empty_str(l("service.version")),
                    environment,
                    platform_hint,
                    ..Session::default()
                });
                self.chunk_ids.push(self.producer_chunk_id.clone());
                self.session_index.insert(key, i);
                i
            }
        }
    }

    /// The thread of a sample in `session` (created at its first sample).
    fn thread_of(&mut self, session: u32, resource: &[Attr<'a>], attrs: &[Attr<'a>]) -> u32 {
        let tid = thread_id(attrs, resource);
        let name = non_empty_str(lookup(attrs, resource, "thread.name"));
        let sess = &mut self.sessions[session as usize];
        match sess.thread_index.get(&tid) {
            Some(&t) => {
                let info = &mut sess.threads[t as usize];
                if info.name.is_none() {
                    info.name = name;
                }
                t
            }
            None => {
                let t = sess.threads.len() as u32;
                sess.threads.push(ThreadInfo {
                    digest: digest64(tid.as_bytes()),
                    sample_id: CompactString::from(tid.as_str()),
                    id: tid.clone(),
                    name,
                });
                sess.thread_index.insert(tid, t);
                t
            }
        }
    }
}

/// The Sentry thread id of a sample (see [`samples`](crate::otlp_to_sentry::samples)).
fn thread_id(sample: &[Attr<'_>], resource: &[Attr<'_>]) -> String {
    lookup(sample, resource, "thread.id")
        .and_then(thread_id_text)
        .or_else(|| lookup(sample, resource, "process.pid").and_then(thread_id_text))
        .unwrap_or_else(|| "0".to_owned())
}
