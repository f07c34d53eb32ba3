//! What the fuzz targets share: sessions written as scripts the fuzzer mutates, rendered in
//! every wire format ([`script`]), and the assertions the fixture tests make about a
//! projection ([`check`]).

pub mod check;
pub mod script;
