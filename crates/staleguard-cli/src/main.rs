//! The `staleguard` command: everything is in the library, which the Python wheel's console
//! script runs too.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(staleguard_cli::run(std::env::args_os()))
}
