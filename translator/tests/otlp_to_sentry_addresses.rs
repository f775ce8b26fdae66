//! Which frames get an `instruction_addr`, and which: address 0 is unset (no address, no
//! invented name), native addresses of images with a build id go into the image's slot,
//! other addresses stay as they are.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{B, check_chunk, int_value, kv, resource, sample};
use profilink_proto::sentry::image_space::{self, SLOT_SIZE};
use profilink_proto::sentry::parse_instruction_addr;
use profilink_proto::sentry::{Frame, ProfileChunk};
use profilink_proto::validate::{Severity, validate_chunk};
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};

const T0: u64 = 1_795_317_063_000_000_000;
const MS: u64 = 1_000_000;
const LIBC_BUILD_ID: &str = "274eec488d230825a136fa9c4d85370fed7a0a5e";

/// The frame at position `i` of the first sample's stack.
fn frame(c: &ProfileChunk, i: usize) -> &Frame {
    &c.profile.frames[c.profile.stacks[c.profile.samples[0].stack_id][i]]
}

#[test]
fn address_zero_is_unset_and_native_addresses_go_into_their_image() {
    let mut b = B::new();
    // A Node SDK / eBPF v8js anonymous function: no name, its file, line and column.
    let anon = b.func("", "/srv/app/server.js");
    let js = b.loc(0, 0, &[(anon, 12, 7)], Some("v8js"));
    // An eBPF v8js frame the profiler could not symbolize: nothing but its type.
    let unknown_js = b.loc(0, 0, &[], Some("v8js"));
    // libc as the eBPF profiler maps it (ELF space: memory_start = file_offset).
    let libc = b.mapping("libc.so.6", 0x28000, 0x1b0000, Some(LIBC_BUILD_ID));
    let in_libc = b.loc(libc, 0x76_2d4, &[], Some("native"));
    let outside_libc = b.loc(libc, 0x1c_0000, &[], Some("native"));
    let unknown_native = b.loc(libc, 0, &[], Some("native"));
    // A mapping without a build id, and no mapping at all.
    let jit = b.mapping("libjit.so", 0x1000, 0x2000, None);
    let in_jit = b.loc(jit, 0x1500, &[], Some("native"));
    let bare = b.loc(0, 0x77, &[], Some("native"));
    let stack = b.stack(&[
        js,
        unknown_js,
        in_libc,
        outside_libc,
        unknown_native,
        in_jit,
        bare,
    ]);
    let t1 = b.attr_int("thread.id", 7);
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(stack, vec![t1], vec![T0, T0 + 50 * MS])],
    );
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(7))],
        vec![p],
    )]);
    let opts = ChunkOptions::default();
    let t = request_to_chunks(&req, &opts);
    assert_eq!(t.chunks.len(), 1, "{:?}", t.rejected);
    let c = &t.chunks[0];
    check_chunk(c, &opts, false);
    let errors: Vec<_> = validate_chunk(c)
        .into_iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    let f = frame(c, 0);
    assert_eq!(f.function, None);
    assert_eq!(f.instruction_addr, None);
    assert_eq!(f.abs_path.as_deref(), Some("/srv/app/server.js"));
    assert_eq!(f.filename.as_deref(), Some("server.js"));
    assert_eq!((f.lineno, f.colno), (Some(12), Some(7)));

    let f = frame(c, 1);
    assert_eq!((&f.function, &f.instruction_addr), (&None, &None));

    // libc's image: its slot, from ELF address 0; its frame at slot + ELF address.
    let images = &c.debug_meta.as_ref().expect("debug_meta").images;
    assert_eq!(images.len(), 1);
    let image_addr = parse_instruction_addr(images[0].image_addr.as_deref().unwrap()).unwrap();
    let base = image_space::slot_of(image_addr).expect("a synthetic image address");
    let id = hex::decode(LIBC_BUILD_ID).unwrap();
    assert_eq!(base, image_space::slot_base(&id));
    assert_eq!(image_addr, base);
    assert_eq!(images[0].image_size, Some(0x1b0000));
    let addr = |i: usize| parse_instruction_addr(frame(c, i).instruction_addr.as_deref().unwrap());
    assert_eq!(addr(2), Some(base + 0x76_2d4));
    // Past the mapping: the raw address, outside every slot.
    assert_eq!(addr(3), Some(0x1c_0000));
    assert!(image_space::slot_of(0x1c_0000).is_none() && 0x1c_0000 < SLOT_SIZE);
    // Address 0 of a native frame: no address, but still its library.
    let f = frame(c, 4);
    assert_eq!(f.instruction_addr, None);
    assert_eq!(f.package.as_deref(), Some("libc.so.6"));
    // No build id, no mapping: raw addresses.
    assert_eq!(addr(5), Some(0x1500));
    assert_eq!(addr(6), Some(0x77));
}

/// The image of one build id lands at the same address in every request, whatever the mapping
/// table looks like, so chunks cut from separate requests (the exporter merges 5 s parts into
/// 60 s chunks) agree on it.
#[test]
fn an_image_has_the_same_place_in_every_request() {
    let placed = |other_mappings: usize| {
        let mut b = B::new();
        for i in 0..other_mappings {
            let id = format!("{:040x}", i + 1);
            b.mapping(&format!("lib{i}.so"), 0x1000, 0x9000, Some(&id));
        }
        let libc = b.mapping("libc.so.6", 0x28000, 0x1b0000, Some(LIBC_BUILD_ID));
        let n = b.loc(libc, 0x76_2d4, &[], Some("native"));
        let stack = b.stack(&[n]);
        let p = b.cpu_profile(
            T0,
            1_000 * MS,
            vec![sample(stack, vec![], vec![T0, T0 + MS])],
        );
        let req = b.request(vec![resource(
            vec![kv("process.pid", int_value(7))],
            vec![p],
        )]);
        let t = request_to_chunks(&req, &ChunkOptions::default());
        let c = &t.chunks[0];
        let images = &c.debug_meta.as_ref().unwrap().images;
        (
            images[0].image_addr.clone().unwrap(),
            frame(c, 0).instruction_addr.clone().unwrap(),
        )
    };
    assert_eq!(placed(0), placed(3));
}
