//! Hostile ELF/DWARF in the test suite: the fuzz target's seeds (`fuzz/seeds/symbolize_elf/`:
//! DWARF, zlib-compressed DWARF, `.dynsym` only, MiniDebugInfo) mutated deterministically
//! (byte flips, overwritten header fields, truncation) and looked up through the same entry
//! point as the cargo-fuzz target `symbolize_elf`. Nothing may panic; the untouched seeds
//! name their functions.

use std::path::Path;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/symbolize_elf");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(out.len() >= 4, "{dir:?}");
    out
}

const ADDRESSES: [u64; 6] = [0x1110, 0x1120, 0x1140, 0x1000, 0, u64::MAX];

#[test]
fn seeds_name_their_functions() {
    for (name, data) in seeds() {
        let frames = profilink_symbolizer::fuzz_lookup(&data, &ADDRESSES);
        assert!(frames >= 2, "{name}: {frames} frames");
    }
}

#[test]
fn mutated_objects_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 16
    };
    let mut runs = 0;
    for (_, data) in seeds() {
        for round in 0..300 {
            let mut d = data.clone();
            match round % 3 {
                0 => {
                    for _ in 0..1 + next() % 16 {
                        let i = next() as usize % d.len();
                        d[i] = next() as u8;
                    }
                }
                1 => {
                    // ELF header and section header fields: sizes, offsets, counts.
                    let i = (next() as usize % 64).min(d.len() - 8);
                    d[i..i + 8].copy_from_slice(&next().to_le_bytes());
                    let shoff = u64::from_le_bytes(d[0x28..0x30].try_into().unwrap()) as usize;
                    if shoff + 64 * 40 < d.len() {
                        let j = shoff + (next() as usize % (64 * 40));
                        d[j..j + 8].copy_from_slice(&(next() | 1 << 40).to_le_bytes());
                    }
                }
                _ => d.truncate(next() as usize % d.len()),
            }
            let _ = profilink_symbolizer::fuzz_lookup(&d, &ADDRESSES);
            runs += 1;
        }
    }
    eprintln!("hostile_elf: {runs} mutated objects");
}
