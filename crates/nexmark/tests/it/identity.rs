//! The Rust generator writes the same bytes as `shared/anchors/nexmark_gen.py`.

use std::path::Path;
use std::process::Command;

use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::json::write_event_flat;

use crate::util::{generate_all, lines, to_jsonl, SHARED};

/// Runs the Python reference generator and returns what it wrote.
fn python_jsonl(dir: &Path, cfg: &GeneratorConfig, flat: bool) -> Vec<u8> {
    let script = Path::new(SHARED).join("anchors/nexmark_gen.py");
    assert!(
        script.is_file(),
        "the reference generator is missing: {}",
        script.display()
    );
    let out = dir.join(format!(
        "py-{}-{}-{:?}.jsonl",
        cfg.seed, cfg.rate, cfg.events
    ));
    let mut cmd = Command::new("python3");
    cmd.arg(&script)
        .args(["--events", &cfg.events.expect("bounded").to_string()])
        .args(["--seed", &cfg.seed.to_string()])
        .args(["--rate", &format!("{:?}", cfg.rate)])
        .args(["--base-time-ms", &cfg.base_time_ms.to_string()])
        .arg("--out")
        .arg(&out);
    if cfg.beam_bidder {
        cmd.arg("--beam-bidder");
    }
    if flat {
        cmd.arg("--flat");
    }
    let run = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run `python3` (it must be on PATH for the byte-identity tests): {e}")
    });
    assert!(
        run.status.success(),
        "the reference generator failed ({}): {}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read(&out).expect("read the reference output")
}

/// Fails with the first differing line instead of two huge buffers.
fn assert_same(rust: &[u8], python: &[u8], what: &str) {
    if rust == python {
        return;
    }
    let (r, p) = (lines(rust), lines(python));
    for (i, (a, b)) in r.iter().zip(&p).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "{what}: line {} differs (left: Rust, right: Python)",
            i + 1
        );
    }
    panic!(
        "{what}: {} lines from Rust, {} from Python",
        r.len(),
        p.len()
    );
}

fn check(cfg: GeneratorConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let python = python_jsonl(dir.path(), &cfg, false);
    let rust = to_jsonl(&generate_all(&cfg));
    assert_same(&rust, &python, &format!("{cfg:?}"));
}

#[test]
fn seed7_rate200_20k() {
    check(GeneratorConfig {
        seed: 7,
        rate: 200.0,
        events: Some(20_000),
        ..Default::default()
    });
}

#[test]
fn seed1_rate10000_50k() {
    check(GeneratorConfig {
        seed: 1,
        rate: 10_000.0,
        events: Some(50_000),
        ..Default::default()
    });
}

#[test]
fn seed42_rate1e6_5k() {
    check(GeneratorConfig {
        seed: 42,
        rate: 1e6,
        events: Some(5_000),
        ..Default::default()
    });
}

#[test]
fn beam_bidder() {
    check(GeneratorConfig {
        seed: 3,
        rate: 1000.0,
        events: Some(10_000),
        beam_bidder: true,
        ..Default::default()
    });
}

#[test]
fn odd_rate_and_leap_day_base_time() {
    // 2000-02-29, and a rate whose inter-event delay is not a round number of microseconds.
    check(GeneratorConfig {
        seed: 11,
        rate: 3.0,
        base_time_ms: 951_782_400_000,
        events: Some(3_000),
        ..Default::default()
    });
}

#[test]
fn flat_form() {
    let cfg = GeneratorConfig {
        seed: 8,
        rate: 500.0,
        events: Some(3_000),
        ..Default::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let python = python_jsonl(dir.path(), &cfg, true);
    let mut rust = Vec::new();
    for e in generate_all(&cfg) {
        write_event_flat(&e, &mut rust);
    }
    assert_same(&rust, &python, "flat form");
}

/// The input of Flink's expected results in `shared/nexmark/expected/seed7-20k`.
#[test]
fn seed7_20k_matches_the_shared_checksum() {
    let path = Path::new(SHARED).join("nexmark/expected/seed7-20k/input.sha256");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let want = text
        .split_whitespace()
        .next()
        .expect("a checksum in input.sha256");
    let cfg = GeneratorConfig {
        seed: 7,
        rate: 200.0,
        events: Some(20_000),
        ..Default::default()
    };
    let rust = to_jsonl(&generate_all(&cfg));
    assert_eq!(hex(&sha256(&rust)), want.to_ascii_lowercase());
}

#[test]
fn sha256_known_answers() {
    assert_eq!(
        hex(&sha256(b"")),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex(&sha256(
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        )),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A small SHA-256 (FIPS 180-4), enough to check a file against a published checksum.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
