use super::*;

fn round_trip(f: Frame, images: &[DebugImage]) -> Frame {
    let mut b = DictionaryBuilder::new();
    let frames = [Arc::new(f)];
    let mut fi = FrameInterner::new(&frames, "python", images);
    let i = fi.location(&mut b, 0);
    assert_ne!(i, 0);
    let d = b.finish();
    let dict = Dictionary::new(Some(&d));
    decode_location(&dict, &d.location_table[i as usize]).unwrap()
}

#[test]
fn absent_vs_empty() {
    let s = |x: &str| Some(std::sync::Arc::<str>::from(x));
    let cases = [
        Frame::default(),
        Frame {
            function: s(""),
            ..Default::default()
        },
        Frame {
            abs_path: s(""),
            ..Default::default()
        },
        Frame {
            filename: s(""),
            ..Default::default()
        },
        Frame {
            abs_path: s("/a.py"),
            ..Default::default()
        },
        Frame {
            filename: s("a.py"),
            ..Default::default()
        },
        Frame {
            abs_path: s("/a.py"),
            filename: s(""),
            ..Default::default()
        },
        Frame {
            abs_path: s(""),
            filename: s("a.py"),
            lineno: Some(0),
            colno: Some(0),
            ..Default::default()
        },
        Frame {
            function: s("f"),
            lineno: Some(3),
            colno: Some(4),
            ..Default::default()
        },
        Frame {
            instruction_addr: s("0x0"),
            ..Default::default()
        },
        Frame {
            instruction_addr: s("0X1A"),
            ..Default::default()
        },
        Frame {
            instruction_addr: s("26"),
            ..Default::default()
        },
        Frame {
            instruction_addr: s("zz"),
            ..Default::default()
        },
        Frame {
            instruction_addr: s("0x1a"),
            in_app: Some(false),
            platform: s("native"),
            module: s(""),
            package: s("libc"),
            ..Default::default()
        },
    ];
    for f in cases {
        assert_eq!(round_trip(f.clone(), &[]), f);
    }
}

#[test]
fn synthetic_images_go_back_to_elf_space() {
    let code_id = "2e5abcee94f3bcbed7bba094f341070a2585a2ba";
    let base = profilink_proto::sentry::image_space::slot_base(&hex::decode(code_id).unwrap());
    let img = DebugImage {
        image_type: "symbolic".into(),
        code_file: Some("libc.so.6".into()),
        code_id: Some(code_id.into()),
        image_addr: Some(format_instruction_addr(base)),
        image_size: Some(0x1b_0000),
        ..Default::default()
    };
    let frame = Frame {
        instruction_addr: Some(format_instruction_addr(base + 0x2_a1ca).into()),
        ..Default::default()
    };
    let mut b = DictionaryBuilder::new();
    let images = [img.clone()];
    let frames = [Arc::new(frame.clone())];
    let mut fi = FrameInterner::new(&frames, "rust", &images);
    let l = fi.location(&mut b, 0);
    let d = b.finish();
    let loc = &d.location_table[l as usize];
    assert_eq!(loc.address, 0x2_a1ca);
    let m = &d.mapping_table[loc.mapping_index as usize];
    assert_eq!(
        (m.memory_start, m.memory_limit, m.file_offset),
        (0, 0x1b_0000, 0)
    );
    let dict = Dictionary::new(Some(&d));
    assert_eq!(decode_location(&dict, loc).unwrap(), frame);
    // The slot base itself (ELF address 0) is kept as a string.
    let at_base = Frame {
        instruction_addr: Some(format_instruction_addr(base).into()),
        ..Default::default()
    };
    assert_eq!(
        round_trip(at_base.clone(), std::slice::from_ref(&img)),
        at_base
    );
    // An image outside its build id's slot is not synthetic: addresses stay as they are.
    let moved = DebugImage {
        image_addr: Some(format_instruction_addr(base + (1 << 32))),
        ..img
    };
    let far = Frame {
        instruction_addr: Some(format_instruction_addr(base + (1 << 32) + 5).into()),
        ..Default::default()
    };
    let mut b = DictionaryBuilder::new();
    let images = [moved];
    let frames = [Arc::new(far)];
    let mut fi = FrameInterner::new(&frames, "rust", &images);
    let l = fi.location(&mut b, 0);
    let d = b.finish();
    assert_eq!(d.location_table[l as usize].address, base + (1 << 32) + 5);
}

#[test]
fn address_maps_to_its_image() {
    let img = DebugImage {
        image_type: "symbolic".into(),
        code_file: Some("/lib/libc.so".into()),
        code_id: Some("abcd".into()),
        image_addr: Some("0x1000".into()),
        image_size: Some(0x100),
        ..Default::default()
    };
    let frames = [
        Arc::new(Frame {
            instruction_addr: Some("0x1010".into()),
            ..Default::default()
        }),
        Arc::new(Frame {
            instruction_addr: Some("0x1100".into()),
            ..Default::default()
        }),
    ];
    let mut b = DictionaryBuilder::new();
    let images = [img];
    let mut fi = FrameInterner::new(&frames, "native", &images);
    let a = fi.location(&mut b, 0);
    let c = fi.location(&mut b, 1);
    let d = b.finish();
    assert_eq!(d.location_table[a as usize].mapping_index, 1);
    assert_eq!(d.location_table[c as usize].mapping_index, 0);
    let m = &d.mapping_table[1];
    assert_eq!((m.memory_start, m.memory_limit), (0x1000, 0x1100));
    assert_eq!(d.string_table[m.filename_strindex as usize], "/lib/libc.so");
}
