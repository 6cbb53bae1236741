//! A deterministic Nexmark generator, byte-identical to the Python reference.
//!
//! It follows `shared/anchors/nexmark_gen.py` (itself a port of the logic of the Nexmark
//! suite's generator) step by step: event kinds by event number modulo 50 (person 1,
//! auction 3, bid 46), hot auctions, sellers and bidders, 100 in-flight auctions, prices
//! `10^(U·6)·100`, `extra` payloads cut from a 1 MiB random string, 4 hot channels and 10000
//! cached ones. The randomness is a bit-exact port of `java.util.SplittableRandom`, seeded
//! explicitly:
//!
//! * events: `SplittableRandom(seed)` for one partition;
//! * the 1 MiB `extra` source string: `SplittableRandom(seed + 1)`;
//! * the channel urls: `SplittableRandom(seed + 2)`.
//!
//! With one partition, the JSON lines written by [`crate::json::write_event`] are
//! byte-identical to `python3 nexmark_gen.py --events N --seed S --rate R` (the integration
//! tests check it against the script).
//!
//! # Partitions
//!
//! A generator of `K` partitions splits the event numbers `0, 1, 2, ...` round-robin:
//! partition `p` generates `n = p, p+K, p+2K, ...`. Ids, event kinds and event times depend on
//! `n` only, so they are the same for every `K`; the random choices come from one
//! `SplittableRandom` per partition (the reference stream's own for `K == 1`, a well-mixed
//! seed derived from `(seed, p)` for `K > 1`). The data therefore depends on
//! `(seed, rate, base time, events, partitions, beam_bidder)`, **never on the number of
//! workers** that the partitions are spread over: keep `partitions` fixed to compare runs on
//! different worker counts.
//!
//! # Speed
//!
//! The strings that repeat (channels, urls, names, cities, states) and the `extra` payloads
//! (slices of the 1 MiB string) are handed out as [`Text::from_static`]: a bid costs no
//! allocation and no reference count, to make or to drop. Only e-mail addresses, credit cards
//! and auction names and descriptions are one allocation each. The 1 MiB string, the 10000
//! channels and the 99 names ([`GeneratorShared`], a few milliseconds to build) are built once
//! per seed and process, and kept for the life of the process (about 2 MB per seed; see
//! [`GeneratorShared::cached`]).
//!
//! # Limits
//!
//! Where the reference cannot run, this generator still does, and differs from it: at rates
//! below about 0.0016 events per second an auction's expiry draw would need a bound above
//! `i32::MAX` (the Python script loops forever there; here the bound is capped), and event
//! times that overflow an `i64` saturate.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Mutex;

use spate_types::{SpateError, SpateResult};

use crate::model::{Auction, Bid, Event, Person, Text};

// ------------------------------------------------------------------------ SplittableRandom

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
const M64A: u64 = 0xBF58_476D_1CE4_E5B9;
const M64B: u64 = 0x94D0_49BB_1331_11EB;
const M32A: u64 = 0x62A9_D9ED_7997_05F5;
const M32B: u64 = 0xCB24_D0A5_C88C_35B3;
const DOUBLE_UNIT: f64 = 1.0 / (1u64 << 53) as f64;

/// A bit-exact port of `java.util.SplittableRandom(long seed)` (SplitMix64), for the methods
/// the Nexmark generator uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplittableRandom {
    seed: u64,
}

impl SplittableRandom {
    /// A generator seeded like `new SplittableRandom(seed)`.
    pub fn new(seed: u64) -> Self {
        SplittableRandom { seed }
    }

    #[inline(always)]
    fn next_seed(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(GOLDEN_GAMMA);
        self.seed
    }

    #[inline(always)]
    fn mix32(s: u64) -> u32 {
        let z = (s ^ (s >> 33)).wrapping_mul(M32A);
        ((z ^ (z >> 28)).wrapping_mul(M32B) >> 32) as u32
    }

    /// The next 32 random bits, unsigned.
    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        Self::mix32(self.next_seed())
    }

    /// Java's `nextInt()`: a signed 32-bit integer.
    #[inline(always)]
    pub fn next_int(&mut self) -> i32 {
        self.next_u32() as i32
    }

    /// Java's `nextInt(bound)`: uniform in `0..bound`, with Java's rejection loop.
    ///
    /// Java throws for a bound outside `1..=i32::MAX`; here a bound below 1 is taken as 1 and
    /// one above `i32::MAX` as `i32::MAX` (the Python reference would loop forever on it).
    #[inline(always)]
    pub fn next_bounded(&mut self, bound: i64) -> i64 {
        // All of Java's arithmetic here fits 32 unsigned bits (u < 2^31, m < 2^31), and a
        // 32-bit division is much cheaper than a 64-bit one for the non-constant bounds.
        let bound = bound.clamp(1, i64::from(i32::MAX)) as u32;
        let r = self.next_u32();
        let m = bound - 1;
        if bound & m == 0 {
            return i64::from(r & m);
        }
        let mut u = r >> 1;
        loop {
            let r = u % bound;
            // Java: `u + m - r < 0` in int arithmetic, i.e. the sum overflows 31 bits.
            if u + m - r < 0x8000_0000 {
                return i64::from(r);
            }
            u = self.next_u32() >> 1;
        }
    }

    /// Java's `nextLong()`, as the unsigned bit pattern.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        mix64(self.next_seed())
    }

    /// Java's `nextDouble()`: uniform in `[0, 1)` with 53 random bits.
    #[inline(always)]
    pub fn next_double(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * DOUBLE_UNIT
    }
}

/// SplittableRandom's 64-bit mixer (Stafford's variant 13).
#[inline(always)]
fn mix64(s: u64) -> u64 {
    let z = (s ^ (s >> 30)).wrapping_mul(M64A);
    let z = (z ^ (z >> 27)).wrapping_mul(M64B);
    z ^ (z >> 31)
}

/// Java's `Math.round(x)` for the values the generator sees: `floor(x + 0.5)`.
#[inline(always)]
pub fn java_round(x: f64) -> i64 {
    floor_to_i64(x + 0.5)
}

/// `floor(x)` as an integer (saturating), without a call into libm: the x86-64 baseline has
/// no rounding instruction, and `f64::floor` is a function call there.
#[inline(always)]
fn floor_to_i64(x: f64) -> i64 {
    let t = x as i64; // truncates toward zero
    if (t as f64) > x {
        t - 1
    } else {
        t
    }
}

/// `Math.abs(Integer.reverse(i))` with Java's int overflow (`abs(MIN_VALUE) == MIN_VALUE`).
pub fn java_abs_reverse(i: i32) -> i32 {
    ((i as u32).reverse_bits() as i32).wrapping_abs()
}

// ------------------------------------------------------------------------------ constants

const FIRST_AUCTION_ID: i64 = 1000;
const FIRST_PERSON_ID: i64 = 1000;
const FIRST_CATEGORY_ID: i64 = 10;
const NUM_CATEGORIES: i64 = 5;
const AUCTION_ID_LEAD: i64 = 10;
const PERSON_ID_LEAD: i64 = 10;
const HOT_SELLER_RATIO: i64 = 100;
const HOT_AUCTION_RATIO: i64 = 100;
const HOT_BIDDER_RATIO: i64 = 100;
const HOT_CHANNELS_RATIO: i64 = 2;
const CHANNELS_NUMBER: usize = 10_000;
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const MIN_STRING_LENGTH: i64 = 3;
/// The length of the reusable string that `extra` payloads are cut from (1 MiB).
pub const REUSABLE_LEN: usize = 1024 * 1024;

const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const BID_PROPORTION: u64 = 46;
const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;
const HOT_AUCTION_RATIO_P: i64 = 2;
const HOT_SELLERS_RATIO_P: i64 = 4;
const HOT_BIDDERS_RATIO_P: i64 = 4;
const NUM_IN_FLIGHT_AUCTIONS: i64 = 100;
const NUM_ACTIVE_PEOPLE: i64 = 1000;
const AVG_PERSON_BYTES: usize = 200;
const AVG_AUCTION_BYTES: usize = 500;
const AVG_BID_BYTES: usize = 100;
const BID_EXTRA_BASE: usize = 8 + 8 + 8 + 8;
const NUM_EVENTS_FOR_AUCTIONS: u64 =
    (NUM_IN_FLIGHT_AUCTIONS as u64 * TOTAL_PROPORTION) / AUCTION_PROPORTION;

/// The default event-time rate: events per second of event time (Nexmark's default).
pub const DEFAULT_RATE: f64 = 10_000.0;
/// The default event time of event 0: 2024-01-01T00:00:00Z, in epoch milliseconds.
pub const DEFAULT_BASE_TIME_MS: i64 = 1_704_067_200_000;
/// The default seed (the Python reference's default).
pub const DEFAULT_SEED: u64 = 42;

// --------------------------------------------------------------------------------- config

/// What to generate. The data depends on all of these fields and on nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorConfig {
    /// The seed of all randomness (default 42, as the Python reference).
    pub seed: u64,
    /// Events per second of event time (default 10000); sets the spacing of `date_time`.
    pub rate: f64,
    /// The event time of event 0, epoch milliseconds (default 2024-01-01T00:00:00Z).
    pub base_time_ms: i64,
    /// The number of events over all partitions, or `None` for an unbounded stream.
    pub events: Option<u64>,
    /// The number of generator partitions (default 1). One partition is the reference stream.
    pub partitions: usize,
    /// Add `FIRST_PERSON_ID` to bidder ids once, as Apache Beam does, instead of twice as the
    /// Nexmark suite for Flink does (`--beam-bidder` of the Python reference).
    pub beam_bidder: bool,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            seed: DEFAULT_SEED,
            rate: DEFAULT_RATE,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            events: None,
            partitions: 1,
            beam_bidder: false,
        }
    }
}

impl GeneratorConfig {
    /// Checks that the rate is a positive finite number and that there is a partition.
    pub fn validate(&self) -> SpateResult<()> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(SpateError::Config(format!(
                "nexmark rate {}: expected a positive number of events per second",
                self.rate
            )));
        }
        if self.partitions == 0 {
            return Err(SpateError::Config(
                "nexmark partitions 0: expected at least one generator partition".into(),
            ));
        }
        Ok(())
    }

    /// The spacing of event times, in microseconds: `1e6 / rate`.
    pub fn inter_event_delay_us(&self) -> f64 {
        1_000_000.0 / self.rate
    }

    /// The event time of event number `n`:
    /// `base_time_ms + trunc(n · 1e6 / rate) / 1000`, with the reference's float arithmetic.
    pub fn event_time_ms(&self, n: u64) -> i64 {
        event_time_ms(self.base_time_ms, self.inter_event_delay_us(), n)
    }

    /// The number of events partition `partition` generates, or `None` when unbounded.
    pub fn events_in_partition(&self, partition: usize) -> Option<u64> {
        let k = self.partitions.max(1) as u64;
        let p = partition as u64;
        self.events
            .map(|n| if p < n { (n - p).div_ceil(k) } else { 0 })
    }
}

#[inline(always)]
fn event_time_ms(base_time_ms: i64, delay_us: f64, n: u64) -> i64 {
    // Python: `base_time + int(n * inter_event_delay_us) // 1000`. Everything is non-negative,
    // so the floor division is a truncating one; `as` truncates the float (and saturates).
    let us = (n as f64 * delay_us) as i64;
    base_time_ms.saturating_add(us / 1000)
}

// --------------------------------------------------------------------------------- shared

/// What all partitions of one seed share: the 1 MiB `extra` source string, the channel
/// cache and the names. Generators borrow it for `'static`, so that the events can borrow
/// their strings from it: [`GeneratorShared::cached`] builds it once per seed and process.
#[derive(Debug)]
pub struct GeneratorShared {
    seed: u64,
    extra_source: Box<str>,
    hot_urls: [Box<str>; 4],
    channels: Box<[(Box<str>, Box<str>)]>,
    /// `FIRST_NAMES[i] + " " + LAST_NAMES[j]` at `i * 9 + j`.
    names: Box<[Box<str>]>,
}

static SHARED_CACHE: Mutex<Vec<&'static GeneratorShared>> = Mutex::new(Vec::new());

impl GeneratorShared {
    /// Builds the shared data of `cfg.seed` (the extra string from `seed + 1`, the channels
    /// from `seed + 2`). This takes a few milliseconds.
    pub fn new(cfg: &GeneratorConfig) -> Self {
        Self::for_seed(cfg.seed)
    }

    fn for_seed(seed: u64) -> Self {
        let extra_source = make_reusable_string(
            &mut SplittableRandom::new(seed.wrapping_add(1)),
            REUSABLE_LEN,
        );
        let mut crnd = SplittableRandom::new(seed.wrapping_add(2));
        let hot_urls: [Box<str>; 4] = std::array::from_fn(|_| base_url(&mut crnd).into());
        let mut channels = Vec::with_capacity(CHANNELS_NUMBER);
        for i in 0..CHANNELS_NUMBER {
            let mut url = base_url(&mut crnd);
            if crnd.next_bounded(10) > 0 {
                let id = java_abs_reverse(i as i32);
                write!(url, "&channel_id={id}").expect("writing to a String cannot fail");
            }
            channels.push((format!("channel-{i}").into(), url.into()));
        }
        let mut names = Vec::with_capacity(FIRST_NAMES.len() * LAST_NAMES.len());
        for first in FIRST_NAMES {
            for last in LAST_NAMES {
                names.push(format!("{first} {last}").into_boxed_str());
            }
        }
        GeneratorShared {
            seed,
            extra_source: extra_source.into_boxed_str(),
            hot_urls,
            channels: channels.into_boxed_slice(),
            names: names.into_boxed_slice(),
        }
    }

    /// The shared data of `cfg.seed`, from a process-wide cache: built on first use and kept
    /// for the life of the process (about 2 MB per seed), so that events can borrow their
    /// strings from it without reference counts.
    pub fn cached(cfg: &GeneratorConfig) -> &'static Self {
        let mut cache = SHARED_CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(shared) = cache.iter().find(|shared| shared.seed == cfg.seed) {
            return shared;
        }
        let shared: &'static Self = Box::leak(Box::new(Self::for_seed(cfg.seed)));
        cache.push(shared);
        shared
    }

    /// The seed this was built for.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 1 MiB string that `extra` payloads are cut from.
    pub fn extra_source(&self) -> &str {
        &self.extra_source
    }

    /// The url of each of the 4 hot channels (`Google`, `Facebook`, `Baidu`, `Apple`).
    pub fn hot_urls(&self) -> &[Box<str>; 4] {
        &self.hot_urls
    }

    /// The 10000 cold channels, as `(channel-N, url)`.
    pub fn channels(&self) -> &[(Box<str>, Box<str>)] {
        &self.channels
    }
}

/// The reference's `make_reusable_string`: Nexmark's `nextExactString` with Java's signed,
/// truncating `%` and `/`, so it holds the characters `H` to `z`, not only `a` to `z`.
fn make_reusable_string(rnd: &mut SplittableRandom, length: usize) -> String {
    let mut out = String::with_capacity(length);
    let mut r: i32 = 0;
    let mut left = 0;
    for _ in 0..length {
        if left == 0 {
            r = rnd.next_int();
            left = 6;
        }
        // Rust's `%` and `/` on i32 truncate toward zero, exactly as Java's.
        let c = (i32::from(b'a') + r % 26) as u8;
        out.push(char::from(c));
        r /= 26;
        left -= 1;
    }
    out
}

/// Nexmark's `nextString(maxLength, special)`, appended to `out`: 3 to `max_length - 1`
/// characters, each `special` with probability 1/13, else a lowercase letter. With the space
/// as `special`, leading and trailing spaces of the new part are stripped.
#[inline]
fn next_string_into(rnd: &mut SplittableRandom, max_length: i64, special: u8, out: &mut String) {
    // Built in a buffer on the stack (the callers ask for at most 99 characters).
    const MAX: usize = 128;
    let n = (MIN_STRING_LENGTH + rnd.next_bounded(max_length - MIN_STRING_LENGTH)) as usize;
    let mut buf = [0u8; MAX];
    let mut long = Vec::new();
    let chars = if n <= MAX {
        &mut buf[..n]
    } else {
        long.resize(n, 0);
        &mut long[..]
    };
    if !string_chars_fast(rnd, chars, special) {
        string_chars_exact(rnd, chars, special);
    }
    let mut part = &*chars;
    if special == b' ' {
        while let [b' ', rest @ ..] = part {
            part = rest;
        }
        while let [rest @ .., b' '] = part {
            part = rest;
        }
    }
    out.push_str(std::str::from_utf8(part).expect("letters and `special` are ASCII"));
}

/// The characters of [`next_string_into`], the reference's way: per character,
/// `nextInt(13)`, then `nextInt(26)` unless the first was 0.
#[cold]
#[inline(never)]
fn string_chars_exact(rnd: &mut SplittableRandom, chars: &mut [u8], special: u8) {
    for slot in chars.iter_mut() {
        *slot = if rnd.next_bounded(13) == 0 {
            special
        } else {
            b'a' + rnd.next_bounded(26) as u8
        };
    }
}

/// The characters of [`string_chars_exact`] without its rejection loops.
///
/// `nextInt(b)` keeps `u = nextInt() >>> 1` unless `u >= 2^31 - 2^31 % b` (11 values of
/// 2^31 for 13, 24 for 26), when it draws again. This only tracks the largest `u`: if any
/// draw could have been rejected (about once in ten million strings), it leaves `rnd` as it
/// was and returns `false`, and the caller takes the exact path.
#[inline(always)]
fn string_chars_fast(rnd: &mut SplittableRandom, chars: &mut [u8], special: u8) -> bool {
    // The stricter of the two limits, for both draws.
    const LIMIT: u32 = 0x8000_0000 - 0x8000_0000 % 26;
    let mut seed = rnd.seed;
    let mut highest = 0u32;
    for slot in chars.iter_mut() {
        seed = seed.wrapping_add(GOLDEN_GAMMA);
        let u = SplittableRandom::mix32(seed) >> 1;
        highest = highest.max(u);
        *slot = if u % 13 == 0 {
            special
        } else {
            seed = seed.wrapping_add(GOLDEN_GAMMA);
            let v = SplittableRandom::mix32(seed) >> 1;
            highest = highest.max(v);
            b'a' + (v % 26) as u8
        };
    }
    if highest < LIMIT {
        rnd.seed = seed;
        true
    } else {
        false
    }
}

fn base_url(rnd: &mut SplittableRandom) -> String {
    let mut url = String::with_capacity(48);
    url.push_str("https://www.nexmark.com/");
    next_string_into(rnd, 5, b'_', &mut url);
    url.push('/');
    next_string_into(rnd, 5, b'_', &mut url);
    url.push('/');
    next_string_into(rnd, 5, b'_', &mut url);
    url.push_str("/item.htm?query=1");
    url
}

// ------------------------------------------------------------------------------ generator

/// The seed of partition `p` when there are several: well mixed, distinct for each `p`.
fn partition_seed(seed: u64, partition: usize) -> u64 {
    // "nexmark!" keeps the partition streams apart from the seed + 1 and seed + 2 streams.
    let base = mix64(seed ^ 0x6E65_786D_6172_6B21);
    mix64(
        base.wrapping_add(
            (partition as u64)
                .wrapping_add(1)
                .wrapping_mul(GOLDEN_GAMMA),
        ),
    )
}

/// One partition of the Nexmark event stream.
///
/// Partition `p` of `K` generates the events numbered `p, p+K, p+2K, ...` (below
/// `events`), in that order. See the [module docs](self) for what the data depends on.
#[derive(Debug)]
pub struct NexmarkGenerator {
    shared: &'static GeneratorShared,
    rng: SplittableRandom,
    /// The number of the next event.
    next_n: u64,
    /// The distance between two event numbers of this partition (`K`).
    step: u64,
    /// One past the last event number (`u64::MAX` when unbounded).
    end: u64,
    bounded: bool,
    delay_us: f64,
    base_time_ms: i64,
    bidder_offset: i64,
    scratch: String,
}

impl NexmarkGenerator {
    /// The generator of `partition` (in `0..cfg.partitions`), sharing the seed's data through
    /// [`GeneratorShared::cached`].
    pub fn new(cfg: &GeneratorConfig, partition: usize) -> SpateResult<Self> {
        cfg.validate()?;
        Self::with_shared(cfg, partition, GeneratorShared::cached(cfg))
    }

    /// The generator of `partition`, with shared data built beforehand for `cfg.seed`.
    pub fn with_shared(
        cfg: &GeneratorConfig,
        partition: usize,
        shared: &'static GeneratorShared,
    ) -> SpateResult<Self> {
        cfg.validate()?;
        if partition >= cfg.partitions {
            return Err(SpateError::Config(format!(
                "nexmark partition {partition}: expected one of 0..{}",
                cfg.partitions
            )));
        }
        if shared.seed != cfg.seed {
            return Err(SpateError::Config(format!(
                "nexmark shared data was built for seed {}, not {}",
                shared.seed, cfg.seed
            )));
        }
        let seed = if cfg.partitions == 1 {
            cfg.seed
        } else {
            partition_seed(cfg.seed, partition)
        };
        Ok(NexmarkGenerator {
            shared,
            rng: SplittableRandom::new(seed),
            next_n: partition as u64,
            step: cfg.partitions as u64,
            end: cfg.events.unwrap_or(u64::MAX),
            bounded: cfg.events.is_some(),
            delay_us: cfg.inter_event_delay_us(),
            base_time_ms: cfg.base_time_ms,
            bidder_offset: if cfg.beam_bidder {
                FIRST_PERSON_ID
            } else {
                2 * FIRST_PERSON_ID
            },
            scratch: String::with_capacity(128),
        })
    }

    /// The number of the event that the next call generates.
    pub fn next_event_number(&self) -> u64 {
        self.next_n
    }

    /// How many events this generator has left, or `None` when unbounded.
    pub fn remaining(&self) -> Option<u64> {
        if !self.bounded {
            None
        } else if self.next_n >= self.end {
            Some(0)
        } else {
            Some((self.end - self.next_n).div_ceil(self.step))
        }
    }

    /// The next event of this partition, or `None` when it is exhausted.
    #[inline]
    pub fn next_event(&mut self) -> Option<Event> {
        if self.next_n >= self.end {
            return None;
        }
        let n = self.next_n;
        self.next_n = n.saturating_add(self.step);
        Some(self.event(n))
    }

    /// Appends up to `max` events to `out`; returns how many (0 once exhausted).
    pub fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> usize {
        // Unbounded generators stop at event number `u64::MAX` too.
        let left = self.end.saturating_sub(self.next_n).div_ceil(self.step);
        let count = max.min(usize::try_from(left).unwrap_or(usize::MAX));
        out.reserve(count);
        for _ in 0..count {
            let n = self.next_n;
            self.next_n = n.saturating_add(self.step);
            out.push(self.event(n));
        }
        count
    }

    #[inline(always)]
    fn ts_for(&self, n: u64) -> i64 {
        event_time_ms(self.base_time_ms, self.delay_us, n)
    }

    /// Generates event number `n` (the reference's loop body).
    #[inline(always)]
    fn event(&mut self, n: u64) -> Event {
        let ts = self.ts_for(n);
        let rem = n % TOTAL_PROPORTION;
        if rem >= PERSON_PROPORTION + AUCTION_PROPORTION {
            Event::Bid(self.bid(n, ts))
        } else if rem >= PERSON_PROPORTION {
            Event::Auction(Box::new(self.auction(n, ts)))
        } else {
            Event::Person(Box::new(self.person(n, ts)))
        }
    }

    #[inline(always)]
    fn bid(&mut self, eid: u64, ts: i64) -> Bid {
        // The random draws come first, in the reference's order; the work on their results
        // (the price's `pow`, the copies) comes after, so that the cache misses on a cold
        // channel and on the extra string overlap with the `pow`.
        let auction = if self.rng.next_bounded(HOT_AUCTION_RATIO_P) > 0 {
            (last_auction_id(eid) / HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
        } else {
            self.next_auction_id(eid)
        } + FIRST_AUCTION_ID;
        let bidder = if self.rng.next_bounded(HOT_BIDDERS_RATIO_P) > 0 {
            (last_person_id(eid) / HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
        } else {
            self.next_person_id(eid)
        } + self.bidder_offset;
        let price_draw = self.rng.next_double();
        let shared: &'static GeneratorShared = self.shared;
        let (channel, url): (&'static str, &'static str) =
            if self.rng.next_bounded(HOT_CHANNELS_RATIO) > 0 {
                let i = self.rng.next_bounded(4) as usize;
                (HOT_CHANNELS[i], &shared.hot_urls[i])
            } else {
                let i = self.rng.next_bounded(CHANNELS_NUMBER as i64) as usize;
                let (c, u) = &shared.channels[i];
                (c, u)
            };
        let extra = extra_range(&mut self.rng, BID_EXTRA_BASE, AVG_BID_BYTES);
        let price = price_from(price_draw);
        Bid {
            auction,
            bidder,
            price,
            channel: Text::from_static(channel),
            url: Text::from_static(url),
            date_time: ts,
            extra: Text::from_static(&shared.extra_source[extra]),
        }
    }

    #[inline(never)]
    fn auction(&mut self, eid: u64, ts: i64) -> Auction {
        let id = last_auction_id(eid) + FIRST_AUCTION_ID;
        let seller = if self.rng.next_bounded(HOT_SELLERS_RATIO_P) > 0 {
            (last_person_id(eid) / HOT_SELLER_RATIO) * HOT_SELLER_RATIO
        } else {
            self.next_person_id(eid)
        } + FIRST_PERSON_ID;
        let category = FIRST_CATEGORY_ID + self.rng.next_bounded(NUM_CATEGORIES);
        let initial_bid = self.next_price();
        let horizon = self.ts_for(eid.saturating_add(NUM_EVENTS_FOR_AUCTIONS)) - ts;
        let h2 = horizon.saturating_mul(2);
        let expires = ts.saturating_add(1 + self.rng.next_bounded(if h2 > 1 { h2 } else { 1 }));
        self.scratch.clear();
        next_string_into(&mut self.rng, 20, b' ', &mut self.scratch);
        let item_name = Text::from(self.scratch.as_str());
        self.scratch.clear();
        next_string_into(&mut self.rng, 100, b' ', &mut self.scratch);
        let description = Text::from(self.scratch.as_str());
        let reserve = initial_bid + self.next_price();
        let current = 8 + item_name.len() + description.len() + 8 + 8 + 8 + 8 + 8;
        let extra = self.next_extra(current, AVG_AUCTION_BYTES);
        Auction {
            id,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time: ts,
            expires,
            seller,
            category,
            extra,
        }
    }

    #[inline(never)]
    fn person(&mut self, eid: u64, ts: i64) -> Person {
        let id = last_person_id(eid) + FIRST_PERSON_ID;
        let first = self.rng.next_bounded(FIRST_NAMES.len() as i64) as usize;
        let last = self.rng.next_bounded(LAST_NAMES.len() as i64) as usize;
        let shared: &'static GeneratorShared = self.shared;
        let name = Text::from_static(&shared.names[first * LAST_NAMES.len() + last]);
        self.scratch.clear();
        next_string_into(&mut self.rng, 7, b' ', &mut self.scratch);
        self.scratch.push('@');
        next_string_into(&mut self.rng, 5, b' ', &mut self.scratch);
        self.scratch.push_str(".com");
        let email_address = Text::from(self.scratch.as_str());
        let mut card = [b' '; 19];
        for group in 0..4 {
            let v = self.rng.next_bounded(10_000) as u16;
            let at = group * 5;
            card[at] = b'0' + (v / 1000) as u8;
            card[at + 1] = b'0' + (v / 100 % 10) as u8;
            card[at + 2] = b'0' + (v / 10 % 10) as u8;
            card[at + 3] = b'0' + (v % 10) as u8;
        }
        let credit_card =
            Text::from(std::str::from_utf8(&card).expect("a credit card is ASCII digits"));
        let city =
            Text::from_static(US_CITIES[self.rng.next_bounded(US_CITIES.len() as i64) as usize]);
        let state =
            Text::from_static(US_STATES[self.rng.next_bounded(US_STATES.len() as i64) as usize]);
        let current =
            8 + name.len() + email_address.len() + credit_card.len() + city.len() + state.len();
        let extra = self.next_extra(current, AVG_PERSON_BYTES);
        Person {
            id,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time: ts,
            extra,
        }
    }

    #[inline(always)]
    fn next_person_id(&mut self, eid: u64) -> i64 {
        let num_people = last_person_id(eid) + 1;
        let active = num_people.min(NUM_ACTIVE_PEOPLE);
        num_people - active + self.rng.next_bounded(active + PERSON_ID_LEAD)
    }

    #[inline(always)]
    fn next_auction_id(&mut self, eid: u64) -> i64 {
        let max = last_auction_id(eid);
        let min = (max - NUM_IN_FLIGHT_AUCTIONS).max(0);
        min + self.rng.next_bounded(max - min + 1 + AUCTION_ID_LEAD)
    }

    #[inline(always)]
    fn next_price(&mut self) -> i64 {
        price_from(self.rng.next_double())
    }

    #[inline(always)]
    fn next_extra(&mut self, current: usize, desired: usize) -> Text {
        let range = extra_range(&mut self.rng, current, desired);
        let shared: &'static GeneratorShared = self.shared;
        Text::from_static(&shared.extra_source[range])
    }
}

/// `2^(j/32)` for `j` in `0..32`, as the bits of the nearest `f64`.
const EXP2_32THS: [u64; 32] = [
    0x3FF0000000000000,
    0x3FF059B0D3158574,
    0x3FF0B5586CF9890F,
    0x3FF11301D0125B51,
    0x3FF172B83C7D517B,
    0x3FF1D4873168B9AA,
    0x3FF2387A6E756238,
    0x3FF29E9DF51FDEE1,
    0x3FF306FE0A31B715,
    0x3FF371A7373AA9CB,
    0x3FF3DEA64C123422,
    0x3FF44E086061892D,
    0x3FF4BFDAD5362A27,
    0x3FF5342B569D4F82,
    0x3FF5AB07DD485429,
    0x3FF6247EB03A5585,
    0x3FF6A09E667F3BCD,
    0x3FF71F75E8EC5F74,
    0x3FF7A11473EB0187,
    0x3FF82589994CCE13,
    0x3FF8ACE5422AA0DB,
    0x3FF93737B0CDC5E5,
    0x3FF9C49182A3F090,
    0x3FFA5503B23E255D,
    0x3FFAE89F995AD3AD,
    0x3FFB7F76F2FB5E47,
    0x3FFC199BDD85529C,
    0x3FFCB720DCEF9069,
    0x3FFD5818DCFBA487,
    0x3FFDFC97337B9B5F,
    0x3FFEA4AFA2A490DA,
    0x3FFF50765B6E4540,
];

/// The reference's `next_price` from its uniform draw: `floor(10^(u·6) · 100 + 0.5)`.
///
/// `10.0 ** x` in Python is C's `pow`, which is not correctly rounded, so no other
/// formula is guaranteed to give its bits. But only the rounded integer matters: a fast
/// `10^x` with a relative error below 1e-14 (so an absolute error below 1e-6 on values
/// below 1e8) decides it whenever the value is farther than 1e-4 from a rounding boundary,
/// where `pow`'s own error (under one ulp) cannot change it either. The rare values closer
/// to a boundary (about 2 in 10000) take the exact path through `pow`.
#[inline(always)]
fn price_from(draw: f64) -> i64 {
    let x = draw * 6.0;
    let fast = exp10_approx(x) * 100.0 + 0.5;
    let rounded = floor_to_i64(fast);
    let frac = fast - rounded as f64;
    if frac > 1e-4 && frac < 1.0 - 1e-4 {
        rounded
    } else {
        price_exact(x)
    }
}

/// The reference's price by way of `pow`, for values close to a rounding boundary.
#[cold]
#[inline(never)]
fn price_exact(x: f64) -> i64 {
    // `black_box` hides the constant base, so that LLVM cannot turn `pow(10, x)` into
    // `exp10(x)`, which may round differently.
    let base = std::hint::black_box(10.0f64);
    java_round(base.powf(x) * 100.0)
}

/// `10^x` for `x` in `[0, 6]`, with a relative error below 1e-14: `2^(n/32) · e^r` with
/// `x · log2(10) · 32 = n + r'` and `|r| <= ln(2)/64`, `2^(n/32)` from a table and `e^r`
/// from its Taylor polynomial of degree 6 (truncation error below 1e-17).
#[inline(always)]
fn exp10_approx(x: f64) -> f64 {
    const LOG2_10_X32: f64 = std::f64::consts::LOG2_10 * 32.0;
    const LN2_DIV32: f64 = std::f64::consts::LN_2 / 32.0;
    let t = x * LOG2_10_X32; // in [0, 638]
    let n = (t + 0.5) as i64; // round to nearest; t is non-negative
    let r = (t - n as f64) * LN2_DIV32;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let frac = f64::from_bits(EXP2_32THS[(n & 31) as usize]);
    let scale = f64::from_bits(((1023 + (n >> 5)) as u64) << 52);
    frac * p * scale
}

/// The reference's `next_extra`: the random slice of the extra source string that pads an
/// event of `current` bytes to about `desired` (empty, without a draw, if it is already
/// larger).
#[inline(always)]
fn extra_range(rng: &mut SplittableRandom, current: usize, desired: usize) -> Range<usize> {
    if current > desired {
        return 0..0;
    }
    let desired = (desired - current) as i64;
    let delta = java_round(desired as f64 * 0.2);
    let size = desired - delta
        + if delta != 0 {
            rng.next_bounded(2 * delta)
        } else {
            0
        };
    let off = rng.next_bounded(REUSABLE_LEN as i64 - size) as usize;
    off..off + size as usize
}

impl Iterator for NexmarkGenerator {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        self.next_event()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining() {
            Some(left) => {
                let left = usize::try_from(left).unwrap_or(usize::MAX);
                (left, Some(left))
            }
            None => (usize::MAX, None),
        }
    }
}

/// The id offset (from 0) of the last person created by event `eid`.
#[inline(always)]
fn last_person_id(eid: u64) -> i64 {
    let epoch = eid / TOTAL_PROPORTION;
    let rem = eid % TOTAL_PROPORTION;
    let off = if rem >= PERSON_PROPORTION {
        PERSON_PROPORTION - 1
    } else {
        rem
    };
    (epoch * PERSON_PROPORTION + off) as i64
}

/// The id offset (from 0) of the last auction created by event `eid` (-1 before the first).
#[inline(always)]
fn last_auction_id(eid: u64) -> i64 {
    let mut epoch = (eid / TOTAL_PROPORTION) as i64;
    let mut off = (eid % TOTAL_PROPORTION) as i64;
    if off < PERSON_PROPORTION as i64 {
        epoch -= 1;
        off = AUCTION_PROPORTION as i64 - 1;
    } else if off >= (PERSON_PROPORTION + AUCTION_PROPORTION) as i64 {
        off = AUCTION_PROPORTION as i64 - 1;
    } else {
        off -= PERSON_PROPORTION as i64;
    }
    epoch * AUCTION_PROPORTION as i64 + off
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splittable_random_matches_java() {
        // Values printed by Java 17's `java.util.SplittableRandom`.
        let mut r = SplittableRandom::new(42);
        let longs: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            longs,
            [
                13679457532755275413,
                2949826092126892291,
                5139283748462763858
            ]
        );
        let mut r = SplittableRandom::new(0);
        let ints: Vec<i32> = (0..3).map(|_| r.next_int()).collect();
        assert_eq!(ints, [821115357, 1660418793, -1699405221]);
        let mut r = SplittableRandom::new(5);
        let bounded: Vec<i64> = (0..5).map(|_| r.next_bounded(13)).collect();
        assert_eq!(bounded, [2, 12, 5, 6, 10]);
        assert_eq!(r.next_double(), 0.38060892761862153);
    }

    #[test]
    fn fast_price_agrees_with_pow() {
        let mut r = SplittableRandom::new(11);
        for _ in 0..2_000_000 {
            let draw = r.next_double();
            assert_eq!(price_from(draw), price_exact(draw * 6.0), "draw {draw}");
        }
        // The ends of the range, and values next to rounding boundaries.
        for draw in [0.0, 1.0 - f64::EPSILON / 2.0, 1.0 / 6.0, 0.5, 2.0 / 3.0] {
            assert_eq!(price_from(draw), price_exact(draw * 6.0), "draw {draw}");
        }
        for k in 100..20_000i64 {
            // x with 10^x · 100 = k + 0.5: the boundary itself, and its neighbours.
            let x = ((k as f64 + 0.5) / 100.0).log10();
            for x in [x, x.next_up(), x.next_down()] {
                let draw = x / 6.0;
                assert_eq!(price_from(draw), price_exact(draw * 6.0), "draw {draw}");
            }
        }
    }

    /// The seed whose next `nextInt() >>> 1` is `u` (inverting SplitMix64's `mix32`).
    fn seed_drawing(u: u32) -> u64 {
        fn inverse(a: u64) -> u64 {
            // Newton's iteration for the inverse of an odd number modulo 2^64.
            let mut x = a;
            for _ in 0..6 {
                x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
            }
            x
        }
        fn unshift(y: u64, k: u32) -> u64 {
            // The inverse of `x ^ (x >> k)`.
            let mut x = y;
            for _ in 0..64 / k {
                x = y ^ (x >> k);
            }
            x
        }
        let z = (u64::from(u) << 33) | 0x1234_5678;
        let z = unshift(z.wrapping_mul(inverse(M32B)), 28);
        let s = unshift(z.wrapping_mul(inverse(M32A)), 33);
        let seed = s.wrapping_sub(GOLDEN_GAMMA);
        assert_eq!(SplittableRandom::new(seed).next_u32() >> 1, u);
        seed
    }

    #[test]
    fn fast_strings_match_the_exact_draws() {
        let mut r = SplittableRandom::new(5);
        for _ in 0..20_000 {
            let seed = r.next_u64();
            let n = 1 + r.next_bounded(120) as usize;
            let special = if r.next_bounded(2) == 0 { b' ' } else { b'_' };
            let (mut fast, mut exact) = (vec![0; n], vec![0; n]);
            let (mut a, mut b) = (SplittableRandom::new(seed), SplittableRandom::new(seed));
            assert!(string_chars_fast(&mut a, &mut fast, special));
            string_chars_exact(&mut b, &mut exact, special);
            assert_eq!((fast, a), (exact, b));
        }
        // Draws that `nextInt(13)` or `nextInt(26)` rejects, first or later in the string.
        for u in [
            0x7FFF_FFFF,
            0x8000_0000 - 11,
            0x8000_0000 - 24,
            0x8000_0000 - 25,
        ] {
            let seed = seed_drawing(u);
            for skip in [0u64, 1, 2, 5] {
                let seed = seed.wrapping_sub(skip.wrapping_mul(GOLDEN_GAMMA));
                let (mut a, mut b) = (SplittableRandom::new(seed), SplittableRandom::new(seed));
                let (mut got, mut want) = (String::new(), String::new());
                next_string_into(&mut a, 40, b'_', &mut got);
                let n = (MIN_STRING_LENGTH + b.next_bounded(40 - MIN_STRING_LENGTH)) as usize;
                let mut chars = vec![0; n];
                string_chars_exact(&mut b, &mut chars, b'_');
                want.push_str(std::str::from_utf8(&chars).unwrap());
                assert_eq!((got, a), (want, b), "u {u:#x}, skip {skip}");
            }
        }
        let seed = seed_drawing(0x7FFF_FFFF);
        let mut r = SplittableRandom::new(seed);
        assert!(!string_chars_fast(&mut r, &mut [0; 4], b' '));
        assert_eq!(r, SplittableRandom::new(seed), "left as it was");
    }

    #[test]
    fn java_abs_reverse_wraps() {
        assert_eq!(java_abs_reverse(0), 0);
        assert_eq!(java_abs_reverse(1), i32::MIN);
        assert_eq!(java_abs_reverse(2), 1 << 30);
        assert_eq!(java_abs_reverse(3), (0xC000_0000u32 as i32).wrapping_abs());
    }

    #[test]
    fn next_bounded_stays_in_range() {
        let mut r = SplittableRandom::new(7);
        for bound in [1, 2, 3, 13, 26, 97, 1000, 10_000, i64::from(i32::MAX)] {
            for _ in 0..1000 {
                let v = r.next_bounded(bound);
                assert!((0..bound).contains(&v), "{v} out of 0..{bound}");
            }
        }
        // Out-of-range bounds are clamped instead of looping forever.
        assert_eq!(r.next_bounded(0), 0);
        assert!(r.next_bounded(i64::MAX) < i64::from(i32::MAX));
    }

    #[test]
    fn reusable_string_has_java_signed_chars() {
        let s = make_reusable_string(&mut SplittableRandom::new(8), 100_000);
        assert!(s.bytes().all(|b| (b'H'..=b'z').contains(&b)));
        assert!(s.contains('\\') && s.contains('a'));
    }

    #[test]
    fn partitions_cover_event_numbers() {
        let cfg = GeneratorConfig {
            events: Some(1000),
            partitions: 3,
            ..Default::default()
        };
        let mut times = Vec::new();
        for p in 0..3 {
            let g = NexmarkGenerator::new(&cfg, p).unwrap();
            assert_eq!(g.remaining(), cfg.events_in_partition(p));
            times.extend(g.map(|e| e.date_time()));
        }
        assert_eq!(times.len(), 1000);
        times.sort_unstable();
        let want: Vec<i64> = (0..1000).map(|n| cfg.event_time_ms(n)).collect();
        assert_eq!(times, want);
    }

    #[test]
    fn fill_matches_next_event() {
        let cfg = GeneratorConfig {
            events: Some(777),
            ..Default::default()
        };
        let mut a = NexmarkGenerator::new(&cfg, 0).unwrap();
        let mut b = NexmarkGenerator::new(&cfg, 0).unwrap();
        let mut out = Vec::new();
        while a.fill(&mut out, 100) > 0 {}
        let want: Vec<Event> = std::iter::from_fn(|| b.next_event()).collect();
        assert_eq!(out, want);
        assert_eq!(a.remaining(), Some(0));
    }

    #[test]
    fn rejects_bad_config() {
        for cfg in [
            GeneratorConfig {
                rate: 0.0,
                ..Default::default()
            },
            GeneratorConfig {
                rate: f64::NAN,
                ..Default::default()
            },
            GeneratorConfig {
                partitions: 0,
                ..Default::default()
            },
        ] {
            assert!(matches!(
                NexmarkGenerator::new(&cfg, 0),
                Err(SpateError::Config(_))
            ));
        }
        let cfg = GeneratorConfig {
            partitions: 2,
            ..Default::default()
        };
        assert!(NexmarkGenerator::new(&cfg, 2).is_err());
    }
}
