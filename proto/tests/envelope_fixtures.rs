//! The real SDK envelopes survive read -> write -> read unchanged.

use profilink_proto::sentry::Envelope;

#[test]
fn fixture_envelopes_survive_read_write_read() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/sentry");
    let mut seen = 0;
    for sub in ["python", "python-v1"] {
        for entry in std::fs::read_dir(format!("{root}/{sub}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "envelope") {
                continue;
            }
            let raw = std::fs::read(&path).unwrap();
            let first = Envelope::parse(&raw).unwrap();
            assert!(!first.items.is_empty(), "{}", path.display());
            let written = first.to_bytes();
            let second = Envelope::parse(&written).unwrap();
            assert_eq!(first, second, "{}", path.display());
            // Writing is deterministic: a second write gives the same bytes.
            assert_eq!(written, second.to_bytes(), "{}", path.display());
            seen += 1;
        }
    }
    assert_eq!(seen, 5);
}
