//! A `wasi:cli/command` component: valid, but not a kubewasm plugin.

fn main() {
    println!("I am a command, not a controller");
}
