//! The `kubewasm` binary: a thin shell over [`kubewasm::cli`].

use std::process::ExitCode;

mod malloc;

fn main() -> ExitCode {
    malloc::configure();
    kubewasm::cli::main()
}
