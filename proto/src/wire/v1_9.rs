//! The proto 1.9 schema of the messages whose field numbers differ from 1.10, as prost
//! messages: for encoding what producers before proto 1.10 send (tests, fuzzing, tools).
//!
//! Field numbers are those of opentelemetry-proto v1.9.0's `profiles.proto`: `Sample` has
//! `stack_index = 1, values = 2, attribute_indices = 3, link_index = 4,
//! timestamps_unix_nano = 5`; every other message is numbered as in 1.10, so the 1.10 types
//! are used for them.

use crate::otlp::{
    ExportProfilesServiceRequest, InstrumentationScope, ProfilesDictionary, Resource, ValueType,
};
use prost::Message;

/// `Sample` in proto 1.9.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// `stack_index = 1`.
    #[prost(int32, tag = "1")]
    pub stack_index: i32,
    /// `values = 2`.
    #[prost(int64, repeated, tag = "2")]
    pub values: Vec<i64>,
    /// `attribute_indices = 3`.
    #[prost(int32, repeated, tag = "3")]
    pub attribute_indices: Vec<i32>,
    /// `link_index = 4`.
    #[prost(int32, tag = "4")]
    pub link_index: i32,
    /// `timestamps_unix_nano = 5`.
    #[prost(fixed64, repeated, tag = "5")]
    pub timestamps_unix_nano: Vec<u64>,
}

/// `Profile` in proto 1.9 (numbered as in 1.10; its samples are 1.9 samples).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// `sample_type = 1`.
    #[prost(message, optional, tag = "1")]
    pub sample_type: Option<ValueType>,
    /// `samples = 2`.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// `time_unix_nano = 3`.
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// `duration_nano = 4`.
    #[prost(uint64, tag = "4")]
    pub duration_nano: u64,
    /// `period_type = 5`.
    #[prost(message, optional, tag = "5")]
    pub period_type: Option<ValueType>,
    /// `period = 6`.
    #[prost(int64, tag = "6")]
    pub period: i64,
    /// `profile_id = 7`.
    #[prost(bytes = "vec", tag = "7")]
    pub profile_id: Vec<u8>,
    /// `dropped_attributes_count = 8`.
    #[prost(uint32, tag = "8")]
    pub dropped_attributes_count: u32,
    /// `original_payload_format = 9`.
    #[prost(string, tag = "9")]
    pub original_payload_format: String,
    /// `original_payload = 10`.
    #[prost(bytes = "vec", tag = "10")]
    pub original_payload: Vec<u8>,
    /// `attribute_indices = 11`.
    #[prost(int32, repeated, tag = "11")]
    pub attribute_indices: Vec<i32>,
}

/// `ScopeProfiles` holding 1.9 profiles.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeProfiles {
    /// `scope = 1`.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// `profiles = 2`.
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<Profile>,
    /// `schema_url = 3`.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `ResourceProfiles` holding 1.9 profiles.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceProfiles {
    /// `resource = 1`.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// `scope_profiles = 2`.
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
    /// `schema_url = 3`.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `ExportProfilesServiceRequest` in proto 1.9.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// `resource_profiles = 1`.
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
    /// `dictionary = 2`.
    #[prost(message, optional, tag = "2")]
    pub dictionary: Option<ProfilesDictionary>,
}

/// `request` encoded as a proto 1.9 producer sends it (the same content, 1.9 field numbers).
pub fn encode(request: &ExportProfilesServiceRequest) -> Vec<u8> {
    let r = Request {
        dictionary: request.dictionary.clone(),
        resource_profiles: request
            .resource_profiles
            .iter()
            .map(|rp| ResourceProfiles {
                resource: rp.resource.clone(),
                schema_url: rp.schema_url.clone(),
                scope_profiles: rp
                    .scope_profiles
                    .iter()
                    .map(|sp| ScopeProfiles {
                        scope: sp.scope.clone(),
                        schema_url: sp.schema_url.clone(),
                        profiles: sp
                            .profiles
                            .iter()
                            .map(|p| Profile {
                                sample_type: p.sample_type,
                                samples: p
                                    .samples
                                    .iter()
                                    .map(|s| Sample {
                                        stack_index: s.stack_index,
                                        values: s.values.clone(),
                                        attribute_indices: s.attribute_indices.clone(),
                                        link_index: s.link_index,
                                        timestamps_unix_nano: s.timestamps_unix_nano.clone(),
                                    })
                                    .collect(),
                                time_unix_nano: p.time_unix_nano,
                                duration_nano: p.duration_nano,
                                period_type: p.period_type,
                                period: p.period,
                                profile_id: p.profile_id.clone(),
                                dropped_attributes_count: p.dropped_attributes_count,
                                original_payload_format: p.original_payload_format.clone(),
                                original_payload: p.original_payload.clone(),
                                attribute_indices: p.attribute_indices.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    };
    r.encode_to_vec()
}
