//! The decoder of this format's records (versions 1 and 2), checking every length, index and
//! string; [`decode`] hands legacy records to [`super::legacy`].

use super::error::DecodeError;
use super::legacy::decode_legacy;
use super::*;
use crate::merge::frame_hash;
use profilink_proto::sentry::{
    ClientSdk, CompactString, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue,
    ProfileChunk, Sample, ThreadMetadata,
};
use std::sync::Arc;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::BadNumber);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadNumber)
    }

    fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.var()?).map_err(|_| DecodeError::BadNumber)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.var()?).map_err(|_| DecodeError::BadNumber)
    }

    /// A count of elements each at least `min_size` bytes long (bounded by what is left, so a
    /// corrupt count cannot make us allocate much).
    fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = self.usize()?;
        if n.saturating_mul(min_size.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(b)
    }

    fn str(&mut self) -> Result<&'a str, DecodeError> {
        let n = self.usize()?;
        std::str::from_utf8(self.bytes(n)?).map_err(|_| DecodeError::BadUtf8)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        self.str().map(str::to_owned)
    }

    fn tag(&mut self) -> Result<bool, DecodeError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(DecodeError::BadTag(t)),
        }
    }

    fn opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(if self.tag()? {
            Some(self.string()?)
        } else {
            None
        })
    }

    fn f64(&mut self) -> Result<f64, DecodeError> {
        let b: [u8; 8] = self
            .bytes(8)?
            .try_into()
            .map_err(|_| DecodeError::Truncated)?;
        Ok(f64::from_bits(u64::from_le_bytes(b)))
    }
}

fn decode_frame(r: &mut Reader<'_>, strings: &[Arc<str>]) -> Result<Frame, DecodeError> {
    let mask = r.var()?;
    if mask & !F_ALL != 0 {
        return Err(DecodeError::BadNumber);
    }
    let mut s = |bit: u64| -> Result<Option<Arc<str>>, DecodeError> {
        if mask & bit == 0 {
            return Ok(None);
        }
        let i = r.usize()?;
        strings
            .get(i)
            .cloned()
            .map(Some)
            .ok_or(DecodeError::BadIndex)
    };
    let abs_path = s(F_ABS_PATH)?;
    let filename = s(F_FILENAME)?;
    let function = s(F_FUNCTION)?;
    let instruction_addr = s(F_INSTRUCTION_ADDR)?;
    let module = s(F_MODULE)?;
    let package = s(F_PACKAGE)?;
    let platform = s(F_PLATFORM)?;
    let colno = if mask & F_COLNO != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    let lineno = if mask & F_LINENO != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    let in_app = (mask & F_IN_APP != 0).then_some(mask & F_IN_APP_TRUE != 0);
    Ok(Frame {
        abs_path,
        colno,
        filename,
        function,
        in_app,
        instruction_addr,
        lineno,
        module,
        package,
        platform,
    })
}

fn decode_chunk(
    r: &mut Reader<'_>,
    frames: &[Arc<Frame>],
    hashes: &[u64],
    version: u8,
) -> Result<DecodedInput, DecodeError> {
    let route = r.string()?;
    let approx_bytes = r.var()?;
    // Struct literal fields are evaluated in the order written: the encoding's order.
    let mut c = ProfileChunk {
        chunk_id: r.string()?,
        profiler_id: r.string()?,
        environment: r.opt_string()?,
        platform: r.string()?,
        release: r.opt_string()?,
        content_type: r.opt_string()?,
        ..Default::default()
    };
    if r.tag()? {
        c.client_sdk = Some(ClientSdk {
            name: r.string()?,
            version: r.string()?,
        });
    }
    c.version = r.string()?;
    if r.tag()? {
        let n = r.count(8)?;
        let mut images = Vec::with_capacity(n);
        for _ in 0..n {
            let mut im = DebugImage {
                image_type: r.string()?,
                code_file: r.opt_string()?,
                debug_id: r.opt_string()?,
                code_id: r.opt_string()?,
                image_addr: r.opt_string()?,
                image_vmaddr: r.opt_string()?,
                image_size: if r.tag()? { Some(r.var()?) } else { None },
                ..Default::default()
            };
            let len = r.usize()?;
            if len > 0 {
                im.other = serde_json::from_slice(r.bytes(len)?).map_err(DecodeError::ImageJson)?;
            }
            images.push(im);
        }
        c.debug_meta = Some(DebugMeta { images });
    }
    let n = r.count(3)?;
    for _ in 0..n {
        let name = r.string()?;
        let unit = r.string()?;
        let k = r.count(16)?;
        let mut values = Vec::with_capacity(k);
        for _ in 0..k {
            values.push(MeasurementValue {
                timestamp: r.f64()?,
                value: r.f64()?,
            });
        }
        c.measurements.insert(name, Measurement { unit, values });
    }
    let p = &mut c.profile;
    let n = r.count(1)?;
    p.frames.reserve(n);
    let mut frame_hashes = Vec::with_capacity(n);
    for _ in 0..n {
        let i = r.usize()?;
        let (Some(f), Some(h)) = (frames.get(i), hashes.get(i)) else {
            return Err(DecodeError::BadIndex);
        };
        p.frames.push(Arc::clone(f));
        frame_hashes.push(*h);
    }
    let n = r.count(1)?;
    p.stacks.reserve(n);
    for _ in 0..n {
        let k = r.count(1)?;
        let mut st = Vec::with_capacity(k);
        for _ in 0..k {
            st.push(r.usize()?);
        }
        p.stacks.push(st);
    }
    let n = r.count(1)?;
    let mut threads = Vec::with_capacity(n);
    for _ in 0..n {
        threads.push(CompactString::from(r.str()?));
    }
    let n = r.count(10)?;
    p.samples.reserve(n);
    for _ in 0..n {
        let timestamp = r.f64()?;
        let stack_id = r.usize()?;
        let t = r.usize()?;
        p.samples.push(Sample {
            timestamp,
            stack_id,
            thread_id: threads.get(t).cloned().ok_or(DecodeError::BadIndex)?,
        });
    }
    let n = r.count(3)?;
    for _ in 0..n {
        let tid = r.string()?;
        let name = r.opt_string()?;
        let priority = if r.tag()? { Some(r.u32()?) } else { None };
        p.thread_metadata
            .insert(tid, ThreadMetadata { name, priority });
    }
    let mut linked_threads = Vec::new();
    if version >= VERSION {
        let n = r.count(1)?;
        linked_threads.reserve(n);
        for _ in 0..n {
            linked_threads.push(CompactString::from(r.str()?));
        }
    }
    Ok(DecodedInput {
        route,
        chunk: c,
        approx_bytes,
        frame_hashes,
        linked_threads,
    })
}

/// Decodes an input record: this format, or a legacy single-chunk JSON record.
pub fn decode(body: &[u8]) -> Result<Vec<DecodedInput>, DecodeError> {
    if body.get(..4) != Some(&MARKER[..]) {
        return decode_legacy(body).map(|d| vec![d]);
    }
    let mut r = Reader { buf: body, pos: 4 };
    let version = r.byte()?;
    if version != VERSION && version != VERSION_1 {
        return Err(DecodeError::BadTag(version));
    }
    r.bytes(8)?;
    let n = r.count(1)?;
    let mut strings: Vec<Arc<str>> = Vec::with_capacity(n);
    for _ in 0..n {
        strings.push(Arc::from(r.str()?));
    }
    let n = r.count(1)?;
    let mut frames = Vec::with_capacity(n);
    for _ in 0..n {
        frames.push(Arc::new(decode_frame(&mut r, &strings)?));
    }
    let hashes: Vec<u64> = frames.iter().map(|f| frame_hash(f)).collect();
    let n = r.count(12)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(decode_chunk(&mut r, &frames, &hashes, version)?);
    }
    if r.remaining() != 0 {
        return Err(DecodeError::BadNumber);
    }
    Ok(out)
}
