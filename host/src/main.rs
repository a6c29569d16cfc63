//! The `kubewasm` binary: a thin shell over [`kubewasm::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    kubewasm::cli::main()
}
