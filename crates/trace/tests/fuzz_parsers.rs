//! Feeds every parser random and mutated lines: each must answer with a trace or an error
//! naming the input and line, never panic. The default run is short; set
//! `FLASHLAB_FUZZ_LINES` for a long one (e.g. `FLASHLAB_FUZZ_LINES=1000000 cargo test
//! --release -p trace --test fuzz_parsers`).

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use trace::formats::{parse, FORMATS};
use trace::TraceError;

const VALID: &[&str] = &[
    "  8,0    1        3     0.000002000  1234  D  WS 2048 + 8 [dd]",
    "  8,0    1        4     0.000102000     0  C  WS 2048 + 8 [0]",
    "  8,0    0        8     0.000502000   99  D  FWS [kworker]",
    "  8,0    0        7     0.000402000   99  D  DS 0 + 2048 [fstrim]",
    "CPU0 (8,0):",
    "              dd-4321    [001] d..1.   100.000010: block_rq_issue: 7,0 WS 4096 () 2048 + 8 none,0,0 [dd]",
    "          <idle>-0       [001] d.h1.   100.000110: block_rq_complete: 7,0 WS () 2048 + 8 none,0,0 [0]",
    "              dd-4321    [001] d..1.   100.000610: block_rq_issue: 8,0 R 8192 () 4096 + 16 [dd]",
    "# tracer: nop",
    "128166372003061629,wdev,0,Read,3154509824,4096,1331",
    "128166372003161629,wdev,0,Write,8192,16384,500",
    "flashlab-trace v1 closed",
    "flashlab-trace v1 open",
    "0 W 0 4096 0",
    "3 T 1048576 65536 100",
    "0 F 0 0 0",
    "device_id,opcode,offset,length,timestamp",
    "0,R,126703644672,4096,1577808000000626",
    "Timestamp,Offset,Size,IOType,VolumeID",
    "1538323200,2048,8,1,1063",
    "0,20941264,8192,W,0.551706,Alpha/NT",
    "89968195792462 20782 gzip 283193184 8 R 8 0 56f11b711d91a065a2b6458eca924523",
    "13.191135 0 1024 5 0x1",
    "4851300 1 524288 16 0",
    "fio version 2 iolog",
    "fio version 3 iolog",
    "/dev/sdb write 0 4096",
    "/dev/sdb wait 2000 0",
    "878 /dev/sdb trim 0 16384",
    "2 /dev/sdb add",
];

const ALPHABET: &[&str] = &[
    " ",
    ",",
    ".",
    "+",
    "-",
    "[",
    "]",
    "(",
    ")",
    ":",
    "#",
    "0",
    "1",
    "9",
    "18446744073709551615",
    "99999999999999999999",
    "R",
    "W",
    "D",
    "F",
    "N",
    "block_rq_issue",
    "block_rq_complete",
    ": ",
    "é",
    "\u{1F4BE}",
    "\t",
    "Read",
    "Write",
    "flashlab-trace",
    "v1",
    "0x",
    "wait",
    "sync",
    "fio version 3 iolog",
];

fn mutate(rng: &mut Xoshiro256PlusPlus, line: &str) -> String {
    let mut s: Vec<char> = line.chars().collect();
    for _ in 0..rng.random_range(1..4) {
        match rng.random_range(0..6) {
            0 if !s.is_empty() => {
                let i = rng.random_range(0..s.len());
                s.remove(i);
            }
            1 => {
                let i = rng.random_range(0..=s.len());
                let piece = ALPHABET[rng.random_range(0..ALPHABET.len())];
                for (k, c) in piece.chars().enumerate() {
                    s.insert(i + k, c);
                }
            }
            2 if !s.is_empty() => {
                let i = rng.random_range(0..s.len());
                s[i] = char::from_u32(rng.random_range(0..0x2FFFu32)).unwrap_or('?');
            }
            3 => {
                let cut = rng.random_range(0..=s.len());
                s.truncate(cut);
            }
            4 if !s.is_empty() => {
                let i = rng.random_range(0..s.len());
                let j = rng.random_range(i..s.len());
                let dup: Vec<char> = s[i..=j].to_vec();
                s.splice(j..j, dup);
            }
            _ => {
                let i = rng.random_range(0..=s.len());
                s.insert(i, if rng.random_bool(0.5) { '0' } else { ' ' });
            }
        }
    }
    s.into_iter().collect()
}

fn random_line(rng: &mut Xoshiro256PlusPlus) -> String {
    match rng.random_range(0..4) {
        0 => VALID[rng.random_range(0..VALID.len())].to_string(),
        1 => {
            let n = rng.random_range(0..12);
            (0..n)
                .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
                .collect()
        }
        2 => {
            let mut bytes = vec![0u8; rng.random_range(0..40)];
            rng.fill_bytes(&mut bytes);
            String::from_utf8_lossy(&bytes).replace('\n', " ")
        }
        _ => {
            let base = VALID[rng.random_range(0..VALID.len())];
            mutate(rng, base)
        }
    }
}

#[test]
fn parsers_never_panic_on_random_and_mutated_lines() {
    let total: u64 = std::env::var("FLASHLAB_FUZZ_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let seed: u64 = std::env::var("FLASHLAB_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    eprintln!("fuzzing parsers with {total} lines, seed {seed} (FLASHLAB_FUZZ_LINES / FLASHLAB_FUZZ_SEED)");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let formats = FORMATS;
    let (mut lines, mut ok, mut errors) = (0u64, 0u64, 0u64);
    while lines < total {
        // A small document: sometimes led by a valid header so later lines get parsed.
        let n = rng.random_range(1..8);
        let mut doc = String::new();
        if rng.random_bool(0.3) {
            doc.push_str(VALID[rng.random_range(0..VALID.len())]);
            doc.push('\n');
        }
        for _ in 0..n {
            doc.push_str(&random_line(&mut rng));
            doc.push('\n');
        }
        lines += n as u64;
        for &f in &formats {
            match parse("fuzz.txt", &doc, f) {
                Ok(_) => ok += 1,
                Err(e) => {
                    errors += 1;
                    let msg = e.to_string();
                    assert!(
                        msg.starts_with("fuzz.txt"),
                        "error does not name the input: {msg}"
                    );
                    if let TraceError::Parse { line, .. } = e {
                        assert!(
                            line >= 1 && line <= doc.lines().count(),
                            "line {line} out of range in {doc:?}"
                        );
                    }
                }
            }
        }
    }
    eprintln!("{lines} lines: {ok} documents parsed, {errors} rejected with an error");
    assert!(
        ok > 0 && errors > 0,
        "the generator should produce both good and bad documents"
    );
}
