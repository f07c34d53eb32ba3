//! Any lines from either side of the MCP guard: never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard_mcp::{McpConfig, Options, Relay};

fuzz_target!(|data: &[u8]| {
    let mut relay = Relay::new(Options::new(
        staleguard::Config::default(),
        &McpConfig::default(),
    ));
    // The first byte of each line says which side sent it.
    for line in data.split(|b| *b == b'\n') {
        match line.split_first() {
            Some((side, rest)) if side % 2 == 0 => drop(relay.from_client(rest)),
            Some((_, rest)) => drop(relay.from_server(rest)),
            None => {}
        }
    }
});
