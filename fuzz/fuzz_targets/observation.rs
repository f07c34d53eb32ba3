//! Any text as a browser result: every format's parser, the fingerprint, the archive and
//! neutralisation. Never a panic, and neutralised text holds no ref token.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard::internal::observation::{self, FORMATS};
use staleguard::internal::refs::{has_ref_token, neutralise};

fuzz_target!(|text: &str| {
    for format in FORMATS {
        let _ = format.parse(text);
        let _ = format.parse_header(text);
    }
    if let Some(obs) = observation::parse(text) {
        if let Some(tree) = obs.tree {
            let _ = staleguard::internal::observation::aria::tree_nodes(tree);
        }
    }
    let _ = staleguard::internal::receipt::verification_lines(text);
    let mut archive = staleguard::Archive::new(2);
    archive.record(text, 1);
    let _ = archive.list(1);
    let out = neutralise(text);
    assert!(
        !has_ref_token(&out),
        "neutralised text keeps a ref: {out:?}"
    );
});
