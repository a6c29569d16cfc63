//! How a write changes an object: [`patch`] (merge patch and bounded JSON
//! patch), [`strategic`] (strategic merge) and [`apply`] (server-side apply
//! with `managedFields`). Pure functions of values: no store, no HTTP.

pub mod apply;
mod fieldset;
pub mod patch;
pub mod strategic;

pub(crate) use fieldset::element_segment;
