//! Word count over a text file (or stdin), in the Rust DataStream API.
//!
//! ```text
//! cargo run --release --example wordcount -- README.md
//! cargo run --release --example wordcount -- README.md --workers 2 --processes 2
//! echo "a b a" | cargo run --release --example wordcount
//! ```
//!
//! Prints `["word", count]` JSON lines: the rolling count of each word, as Flink's keyed
//! `sum` would. With `--processes`, this same program is started once per process and
//! supervised by the one you started.

use spate::prelude::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut config = JobConfig::local(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> usize {
            match args.next().map(|v| v.parse()) {
                Some(Ok(n)) => n,
                _ => {
                    eprintln!("error: {name} needs a number");
                    std::process::exit(2);
                }
            }
        };
        match arg.as_str() {
            "--workers" => config.workers = number("--workers"),
            "--processes" => config.processes = number("--processes"),
            _ => path = Some(arg),
        }
    }
    let env = StreamEnv::new(config);
    let lines = match path {
        Some(path) => env.read_text_lines(path),
        None => env.stdin_lines(),
    };
    lines
        .flat_map(|line: String| {
            line.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .name("split")
        .key_by(|word: &String| word.clone())
        .count()
        .name("count")
        .print();
    if let Err(e) = env.execute("wordcount") {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
