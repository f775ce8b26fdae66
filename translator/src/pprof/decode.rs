//! Reading pprof bytes: gzip inflated within a limit, then the prost decode.

use super::{PprofError, PprofOptions, PprofProfile};
use prost::Message;
use std::io::Read;

/// True when `bytes` start with the gzip magic number.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Decodes a pprof profile, raw or gzipped; gzip never inflates beyond
/// [`PprofOptions::max_inflated_bytes`] (it stops reading one byte past it).
pub fn decode_pprof(bytes: &[u8], opts: &PprofOptions) -> Result<PprofProfile, PprofError> {
    let limit = opts.max_inflated_bytes;
    if is_gzip(bytes) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(PprofError::Gzip)?;
        if out.len() as u64 > limit {
            return Err(PprofError::TooLarge { limit });
        }
        PprofProfile::decode(out.as_slice()).map_err(PprofError::Decode)
    } else {
        if bytes.len() as u64 > limit {
            return Err(PprofError::TooLarge { limit });
        }
        PprofProfile::decode(bytes).map_err(PprofError::Decode)
    }
}
