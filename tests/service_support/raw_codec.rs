//! A gRPC codec for the service tests that sends a request's bytes as they are (a body prost
//! would not encode: undecodable, stray bytes, another proto layout) and decodes the answer.

use bytes::BufMut;
use profilink_proto::otlp::ExportProfilesServiceResponse;
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Sends its bytes as they are and decodes an `ExportProfilesServiceResponse`.
#[derive(Default, Clone, Copy)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        Message::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }
}
