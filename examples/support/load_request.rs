//! The load test's request shape, shared by `examples/load/` and `benches/request_path.rs`:
//! the real eBPF fixture with several copies of its resources (distinct
//! `service.instance.id`s, so distinct profiler sessions), shifted in time per round.

use profilink_proto::otlp::{AnyValue, ExportProfilesServiceRequest, KeyValue, any_value};
use std::io::Write;

/// The fixture with `copies` copies of its resources, copy `i` tagged
/// `service.instance.id = "{tag}-{i}"`.
pub fn replicated(
    fixture: &ExportProfilesServiceRequest,
    tag: &str,
    copies: usize,
) -> ExportProfilesServiceRequest {
    let mut req = ExportProfilesServiceRequest {
        dictionary: fixture.dictionary.clone(),
        resource_profiles: Vec::new(),
    };
    for i in 0..copies {
        for rp in &fixture.resource_profiles {
            let mut rp = rp.clone();
            rp.resource
                .get_or_insert_with(Default::default)
                .attributes
                .push(KeyValue {
                    key: "service.instance.id".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(format!("{tag}-{i}"))),
                    }),
                    ..Default::default()
                });
            req.resource_profiles.push(rp);
        }
    }
    req
}

/// Moves every profile and sample timestamp of `req` `ns` later.
pub fn shift(req: &mut ExportProfilesServiceRequest, ns: u64) {
    for rp in &mut req.resource_profiles {
        for sp in &mut rp.scope_profiles {
            for p in &mut sp.profiles {
                p.time_unix_nano += ns;
                for s in &mut p.samples {
                    for t in &mut s.timestamps_unix_nano {
                        *t += ns;
                    }
                }
            }
        }
    }
}

/// `bytes` gzipped (default level), in memory.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}
