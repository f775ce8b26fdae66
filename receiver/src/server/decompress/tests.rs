use super::*;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn payload() -> Vec<u8> {
    (0..200_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect()
}

#[test]
fn round_trips_every_encoding() {
    let data = payload();
    assert_eq!(
        decode_bytes(&data, Encoding::Identity, usize::MAX).unwrap(),
        data
    );
    assert_eq!(
        decode_bytes(&gzip(&data), Encoding::Gzip, usize::MAX).unwrap(),
        data
    );
    assert_eq!(
        decode_bytes(&zlib(&data), Encoding::Deflate, usize::MAX).unwrap(),
        data
    );
    let z = zstd::encode_all(&data[..], 1).unwrap();
    assert_eq!(decode_bytes(&z, Encoding::Zstd, usize::MAX).unwrap(), data);
    // Two gzip members are one body.
    let mut two = gzip(b"hello ");
    two.extend(gzip(b"world"));
    assert_eq!(
        decode_bytes(&two, Encoding::Gzip, usize::MAX).unwrap(),
        b"hello world"
    );
}

#[test]
fn brotli_decodes() {
    // `printf 'hello brotli\n' | brotli -c` (quality 11).
    let br: &[u8] = &[
        0x0f, 0x06, 0x80, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x62, 0x72, 0x6f, 0x74, 0x6c, 0x69,
        0x0a, 0x03,
    ];
    assert_eq!(
        decode_bytes(br, Encoding::Brotli, 1000).unwrap(),
        b"hello brotli\n"
    );
    assert!(matches!(
        decode_bytes(&br[..br.len() - 1], Encoding::Brotli, 1000),
        Err(BodyError::Decode { .. })
    ));
    assert!(matches!(
        decode_bytes(br, Encoding::Brotli, 5),
        Err(BodyError::TooLarge { limit: 5 })
    ));
}

#[test]
fn caps_output() {
    let zeros = vec![0u8; 4 << 20];
    for (enc, data) in [
        (Encoding::Gzip, gzip(&zeros)),
        (Encoding::Deflate, zlib(&zeros)),
        (Encoding::Zstd, zstd::encode_all(&zeros[..], 1).unwrap()),
        (Encoding::Identity, zeros.clone()),
    ] {
        assert!(
            matches!(
                decode_bytes(&data, enc, 1 << 20),
                Err(BodyError::TooLarge { limit: 1_048_576 })
            ),
            "{enc:?}"
        );
    }
}

/// Found by the `decompress` fuzz target: a small gzip body whose output passes the limit
/// only when the decoder is finished was refused as corrupt instead of too large.
#[test]
fn gzip_over_the_limit_at_the_end_is_too_large() {
    let mut plain = vec![b'a'; 42];
    plain.push(b'_');
    plain.extend(vec![b'a'; 4000]);
    assert!(matches!(
        decode_bytes(&gzip(&plain), Encoding::Gzip, 1024),
        Err(BodyError::TooLarge { limit: 1024 })
    ));
    assert_eq!(
        decode_bytes(&gzip(&plain), Encoding::Gzip, plain.len()).unwrap(),
        plain
    );
}

#[test]
fn detects_truncation_and_garbage() {
    let data = payload();
    let g = gzip(&data);
    let z = zlib(&data);
    let s = zstd::encode_all(&data[..], 1).unwrap();
    for (enc, bytes) in [
        (Encoding::Gzip, &g),
        (Encoding::Deflate, &z),
        (Encoding::Zstd, &s),
    ] {
        let cut = &bytes[..bytes.len() - 5];
        assert!(
            matches!(
                decode_bytes(cut, enc, usize::MAX),
                Err(BodyError::Decode { .. })
            ),
            "{enc:?}"
        );
        assert!(
            matches!(
                decode_bytes(b"this is not compressed at all", enc, usize::MAX),
                Err(BodyError::Decode { .. })
            ),
            "{enc:?}"
        );
    }
}

#[test]
fn parses_content_encoding() {
    let all = [
        Encoding::Gzip,
        Encoding::Deflate,
        Encoding::Brotli,
        Encoding::Zstd,
    ];
    let mut h = HeaderMap::new();
    assert_eq!(Encoding::from_headers(&h, &all), Ok(Encoding::Identity));
    for (v, e) in [
        ("", Encoding::Identity),
        ("identity", Encoding::Identity),
        ("GZIP", Encoding::Gzip),
        (" br ", Encoding::Brotli),
        ("zstd", Encoding::Zstd),
        ("deflate", Encoding::Deflate),
    ] {
        h.insert(CONTENT_ENCODING, v.parse().unwrap());
        assert_eq!(Encoding::from_headers(&h, &all), Ok(e), "{v}");
    }
    for v in ["lz4", "gzip, br", "compress"] {
        h.insert(CONTENT_ENCODING, v.parse().unwrap());
        assert!(Encoding::from_headers(&h, &all).is_err(), "{v}");
    }
    h.insert(CONTENT_ENCODING, "br".parse().unwrap());
    assert!(Encoding::from_headers(&h, &[Encoding::Gzip]).is_err());
}

#[tokio::test]
async fn reads_a_streamed_body() {
    let data = payload();
    let mut body = Body::from(gzip(&data));
    assert_eq!(
        read_body(&mut body, Encoding::Gzip, 1 << 30).await.unwrap(),
        data
    );
    let mut body = Body::from(vec![1u8; 100]);
    assert!(matches!(
        read_body(&mut body, Encoding::Identity, 99).await,
        Err(BodyError::TooLarge { limit: 99 })
    ));
}

/// `body` cut into frames of `size` bytes (the last one shorter).
fn frames(body: &[u8], size: usize) -> Vec<&[u8]> {
    body.chunks(size).collect()
}

#[test]
fn frames_split_anywhere_decode_like_the_whole_body() {
    let data = payload();
    let mut two_members = gzip(&data[..1000]);
    two_members.extend(gzip(&data[1000..5000]));
    let bodies = [
        (Encoding::Identity, data[..5000].to_vec(), &data[..5000]),
        (Encoding::Gzip, two_members, &data[..5000]),
        (Encoding::Deflate, zlib(&data), &data[..]),
        (
            Encoding::Zstd,
            zstd::encode_all(&data[..], 1).unwrap(),
            &data[..],
        ),
    ];
    for (encoding, body, plain) in &bodies {
        for size in [1, 7, 4096, body.len()] {
            let got = decode_frames(frames(body, size), *encoding, usize::MAX);
            assert_eq!(
                got.as_deref().ok(),
                Some(*plain),
                "{encoding:?} in {size}-byte frames"
            );
        }
        // Output one byte over the limit is too large however the body is framed.
        let limit = plain.len() - 1;
        for size in [1, 4096] {
            assert!(matches!(
                decode_frames(frames(body, size), *encoding, limit),
                Err(BodyError::TooLarge { .. })
            ));
        }
    }
    // The compressed input counts across frames too.
    assert!(matches!(
        decode_frames([&b"12345"[..], b"678"], Encoding::Identity, 7),
        Err(BodyError::TooLarge { limit: 7 })
    ));
    // A truncated stream is refused whatever the framing.
    let z = zlib(&data);
    for size in [1, 4096] {
        assert!(
            decode_frames(
                frames(&z[..z.len() - 3], size),
                Encoding::Deflate,
                usize::MAX
            )
            .is_err()
        );
    }
}
