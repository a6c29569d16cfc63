//! What objects must look like: [`conversion`] between a stored form and
//! the view a request names, [`structural`] schemas of custom resources
//! (pruning, defaults, validation, a string's [`pattern`]), [`openapi`]
//! (`/openapi/v3` and `/openapi/v2`, the release's own and a custom
//! resource's as a real server writes it), [`protobuf`]
//! (bodies of every stable built-in kind, by Kubernetes' own
//! `generated.proto` schemas) and the [`validation`] of built-in kinds
//! beyond their names.

pub mod conversion;
pub mod decoding;
pub mod defaults;
pub mod openapi;
mod pattern;
pub mod protobuf;
pub mod structural;
pub mod validation;
