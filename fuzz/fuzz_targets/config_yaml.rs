//! Configuration YAML + `${env:VAR}` expansion (`Config::from_yaml`): never a panic, hang or
//! unbounded allocation. A few variables are set (one holding YAML-looking text, one with a
//! `$`); others are unset (an error naming the key).
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink::config::Config;

fn lookup(name: &str) -> Option<String> {
    match name {
        "A" => Some("127.0.0.1:4317".into()),
        "B" => Some("{x: [1, 2]}\n- y".into()),
        "C" => Some("$$ ${A} $".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Config::from_yaml(text, &lookup);
});
