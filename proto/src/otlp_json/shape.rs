//! The messages every OTLP signal shares in shape, described once so that one decoder and one
//! encoder serve them all: the export response with its partial success, and the resource and
//! scope envelopes around the signal's items (`ResourceProfiles` / `ResourceSpans`,
//! `ScopeProfiles` / `ScopeSpans`).

use crate::otlp::{
    ExportProfilesPartialSuccess, ExportProfilesServiceResponse, ExportTracePartialSuccess,
    ExportTraceServiceResponse, InstrumentationScope, Profile, Resource, ResourceProfiles,
    ResourceSpans, ScopeProfiles, ScopeSpans, Span,
};

/// An `Export…PartialSuccess`: a rejected count and an error message.
pub(super) trait PartialShape: Default {
    /// `"an ExportProfilesPartialSuccess object"`.
    const WHAT: &'static str;
    /// The rejected count's JSON name and proto name.
    const REJECTED: [&'static str; 2];
    fn parts_mut(&mut self) -> (&mut i64, &mut String);
    fn parts(&self) -> (i64, &str);
}

/// An `Export…ServiceResponse`: an optional partial success.
pub(super) trait ResponseShape: Default {
    type Partial: PartialShape;
    /// `"an ExportProfilesServiceResponse object"`.
    const WHAT: &'static str;
    fn partial_mut(&mut self) -> &mut Option<Self::Partial>;
    fn partial(&self) -> Option<&Self::Partial>;
}

/// A `Resource…` or `Scope…` message: a head (resource or scope), a list of children and a
/// schema URL.
pub(super) trait EnvelopeShape: Default {
    type Head;
    type Child;
    /// `"a ResourceProfiles object"`.
    const WHAT: &'static str;
    /// The head's JSON name (`"resource"`, `"scope"`).
    const HEAD: &'static str;
    /// The children's JSON name and proto name.
    const CHILDREN: [&'static str; 2];
    fn parts_mut(&mut self) -> (&mut Option<Self::Head>, &mut Vec<Self::Child>, &mut String);
    fn parts(&self) -> (Option<&Self::Head>, &[Self::Child], &str);
}

macro_rules! partial_shape {
    ($ty:ty, $what:literal, $json:literal, $proto:literal, $field:ident) => {
        impl PartialShape for $ty {
            const WHAT: &'static str = $what;
            const REJECTED: [&'static str; 2] = [$json, $proto];
            fn parts_mut(&mut self) -> (&mut i64, &mut String) {
                (&mut self.$field, &mut self.error_message)
            }
            fn parts(&self) -> (i64, &str) {
                (self.$field, &self.error_message)
            }
        }
    };
}

macro_rules! response_shape {
    ($ty:ty, $partial:ty, $what:literal) => {
        impl ResponseShape for $ty {
            type Partial = $partial;
            const WHAT: &'static str = $what;
            fn partial_mut(&mut self) -> &mut Option<$partial> {
                &mut self.partial_success
            }
            fn partial(&self) -> Option<&$partial> {
                self.partial_success.as_ref()
            }
        }
    };
}

macro_rules! envelope_shape {
    ($ty:ty, $head_ty:ty, $child_ty:ty, $what:literal, $head:ident, $json:literal, $children:ident) => {
        impl EnvelopeShape for $ty {
            type Head = $head_ty;
            type Child = $child_ty;
            const WHAT: &'static str = $what;
            const HEAD: &'static str = stringify!($head);
            const CHILDREN: [&'static str; 2] = [$json, stringify!($children)];
            fn parts_mut(&mut self) -> (&mut Option<$head_ty>, &mut Vec<$child_ty>, &mut String) {
                (&mut self.$head, &mut self.$children, &mut self.schema_url)
            }
            fn parts(&self) -> (Option<&$head_ty>, &[$child_ty], &str) {
                (self.$head.as_ref(), &self.$children, &self.schema_url)
            }
        }
    };
}

partial_shape!(
    ExportProfilesPartialSuccess,
    "an ExportProfilesPartialSuccess object",
    "rejectedProfiles",
    "rejected_profiles",
    rejected_profiles
);
partial_shape!(
    ExportTracePartialSuccess,
    "an ExportTracePartialSuccess object",
    "rejectedSpans",
    "rejected_spans",
    rejected_spans
);
response_shape!(
    ExportProfilesServiceResponse,
    ExportProfilesPartialSuccess,
    "an ExportProfilesServiceResponse object"
);
response_shape!(
    ExportTraceServiceResponse,
    ExportTracePartialSuccess,
    "an ExportTraceServiceResponse object"
);
envelope_shape!(
    ResourceProfiles,
    Resource,
    ScopeProfiles,
    "a ResourceProfiles object",
    resource,
    "scopeProfiles",
    scope_profiles
);
envelope_shape!(
    ScopeProfiles,
    InstrumentationScope,
    Profile,
    "a ScopeProfiles object",
    scope,
    "profiles",
    profiles
);
envelope_shape!(
    ResourceSpans,
    Resource,
    ScopeSpans,
    "a ResourceSpans object",
    resource,
    "scopeSpans",
    scope_spans
);
envelope_shape!(
    ScopeSpans,
    InstrumentationScope,
    Span,
    "a ScopeSpans object",
    scope,
    "spans",
    spans
);
