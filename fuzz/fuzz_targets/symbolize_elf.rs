//! Hostile ELF/DWARF through the symbolizer (`profilink_symbolizer::fuzz_lookup`): the ELF
//! parse, build id and `.gnu_debuglink` reads, DWARF sections (compressed ones inflated within
//! bounds), `addr2line`'s line tables and inline chains, `.symtab`/`.dynsym`, and MiniDebugInfo
//! (`.gnu_debugdata`, xz). Looked up at addresses taken from the input's last bytes and at a
//! few fixed ones. Nothing may panic, hang or allocate without bound (`-rss_limit_mb`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut addresses = vec![0, 0x1000, 0x1110, 0x1140, 0x401000, u64::MAX];
    for w in data.rchunks_exact(8).take(8) {
        addresses.push(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])) & 0xffff_ffff);
    }
    let _ = profilink_symbolizer::fuzz_lookup(data, &addresses);
});
