//! Conformance checks for OTLP profiles and Sentry chunks, V1 profiles and envelopes.
//!
//! Every validator returns a list of [`Finding`]s. An **error** means the data cannot be used as
//! it is (a consumer would misread it, or Relay would reject it); a **warning** flags a spec rule
//! that real producers break while the data stays usable. Each finding names a rule id (short
//! kebab-case) and the path of the offending table or field, e.g.
//! `dictionary.location_table[5].mapping_index` or `items[0].profile.samples[3].stack_id`.
//!
//! Output is bounded: per object (the dictionary, one profile, one chunk, one envelope item) at
//! most [`MAX_FINDINGS_PER_RULE`] findings of one rule are listed, followed by one summary
//! finding ("... and N more") at the object's path.
//!
//! # OTLP rules (`validate_otlp`, `validate_dictionary`, `validate_profile`)
//!
//! | rule | severity | what |
//! |---|---|---|
//! | `string-table-zero` | error | `string_table[0]` is not `""` |
//! | `table-zero` | error | another table's `[0]` is not the zero value |
//! | `table-zero-missing` | warning | a referenced table is empty (only index 0, "unset", can point into it; any other index is `index-out-of-range`) |
//! | `attribute-table-zero-empty-value` | warning | `attribute_table[0]` holds an empty `AnyValue` (eBPF profiler, Collector pdata) |
//! | `index-out-of-range` | error | any `*_index`, `*_strindex`, `*_indices` entry negative or past its table |
//! | `duplicate-attribute-key` | error | one `attribute_indices` list sets a key twice |
//! | `link-id-length` | error | `trace_id` not 16 bytes / `span_id` not 8 bytes (empty is fine) |
//! | `mapping-range` | error | `memory_start > memory_limit` |
//! | `negative-line-number` | warning | negative `line`, `column` or `start_line` |
//! | `profile-id-length` | error | `profile_id` neither 16 bytes nor empty |
//! | `sample-type-missing` | warning | no `sample_type` |
//! | `sample-empty` | error | a sample with neither values nor timestamps |
//! | `sample-length-mismatch` | error | values and timestamps both set with different lengths |
//! | `timestamp-at-window-end` | warning | a timestamp equal to `time_unix_nano + duration_nano` (eBPF profiler) |
//! | `timestamp-outside-profile` | warning | a timestamp outside `[time_unix_nano, +duration_nano)` (a SHOULD) |
//!
//! # Sentry rules (`validate_chunk`, `validate_chunk_json`, `validate_v1_profile_json`, `validate_envelope`)
//!
//! | rule | severity | what |
//! |---|---|---|
//! | `json-parse` | error | the payload does not parse; the path is the JSON path |
//! | `json-shape` | error | `null` or missing where Relay needs a value (`debug_meta.images`, `profile.samples`…) |
//! | `chunk-size` / `profile-size` | error | payload over [`MAX_CHUNK_BYTES`] (50 MiB) |
//! | `chunk-version` | error | `version` is not `"2"` |
//! | `chunk-id-format` / `profiler-id-format` | error | not a UUID |
//! | `id-not-canonical` | warning | a UUID, but not 32 lowercase hex characters |
//! | `client-sdk` | error | `client_sdk` missing, or empty `name`/`version` |
//! | `platform` | error | `platform` empty |
//! | `thread-id-type` | error | chunk: empty `thread_id`; V1: not an unsigned integer |
//! | `thread-id-not-decimal` | warning | chunk `thread_id` not decimal (cannot link to spans) |
//! | `stack-id-range` | error | `stack_id` past `stacks` |
//! | `frame-index-range` | error | a frame index in a stack past `frames` |
//! | `timestamp-not-finite` | error | NaN/infinite sample or measurement timestamp |
//! | `measurement-value-not-finite` | error | NaN/infinite measurement value |
//! | `chunk-duration` | error | kept samples span more than 66 s |
//! | `thread-too-few-samples` | warning | a thread with < 2 samples with a non-empty stack (Relay drops it) |
//! | `no-samples` | error | nothing left after Relay drops such threads (V1: no samples) |
//! | `instruction-addr-format` | error | `instruction_addr` not `"0x…"` hex or decimal |
//! | `image-addr-format` | error | `image_addr`/`image_vmaddr` not an address |
//! | `debug-image-type` | error | image `type` not macho/symbolic/sourcemap/proguard/jvm (e.g. `elf`) |
//! | `debug-image-overlap` | warning | two debug images' `[image_addr, image_addr + image_size)` overlap: Symbolicator gives each address to one of them |
//! | `instruction-addr-outside-image` | warning | a frame address in profilink's synthetic image space ([`crate::sentry::image_space`]) that lies in no debug image: it cannot be symbolicated |
//! | `measurement-unit` | error | unit not ns/nanosecond/hz/hertz/byte/percent/nj/nanojoule |
//! | `envelope-profile-items` | error | more than one `profile`/`profile_chunk` item (Relay: 413) |
//! | `envelope-item-count` | error | more than 500 items |
//! | `envelope-sent-at` | error | `sent_at` header not RFC 3339 |
//! | `item-type` | error | an item without `type` |
//! | `item-platform-mismatch` | error | chunk item header `platform` differs from the payload's |
//! | `item-platform-missing` | warning | chunk item header has no `platform` |
//! | `item-meta-length` | error | `meta_length` header on a JSON chunk |
//! | `perfetto-not-checked` | warning | Perfetto chunk payload, not validated |

mod chunk;
mod dictionary;
mod envelope;
mod finding;
mod otlp;
mod otlp_refs;
mod sentry_common;
mod v1;

pub use chunk::{
    MAX_CHUNK_DURATION_SECS, validate_chunk, validate_chunk_errors, validate_chunk_json,
};
pub use dictionary::validate_dictionary;
pub use envelope::validate_envelope;
pub use finding::{Finding, MAX_FINDINGS_PER_RULE, Severity, has_errors, has_warnings};
pub use otlp::{validate_otlp, validate_profile};
pub use sentry_common::MAX_CHUNK_BYTES;
pub use v1::{validate_v1_profile, validate_v1_profile_json};
