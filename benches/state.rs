//! The cost of named keyed state: a rolling count per key kept as a plain `Option<u64>`
//! (`process_with_state`), as a `ValueState` of a `KeyedState` (with and without a TTL), and
//! lists and maps of a `KeyedState`. One worker, so that the state accesses are most of the
//! work. Prints events/s per variant (best of 3).
//!
//! `cargo bench --bench state` (set `SPATE_STATE_EVENTS` to change the 4M events).

use std::time::{Duration, Instant};

use spate::prelude::*;

const KEYS: u64 = 10_000;

struct Count {
    count: ValueStateDescriptor<u64>,
}

impl KeyedProcessFunction<u64, u64, u64> for Count {
    type State = KeyedState;
    fn process_element(&self, _x: u64, ctx: &mut ProcessContext<'_, u64, KeyedState, u64>) {
        let mut c = ctx.value_state(&self.count);
        let n = c.value().copied().unwrap_or(0) + 1;
        c.update(n);
    }
}

struct Lists {
    items: ListStateDescriptor<u64>,
}

impl KeyedProcessFunction<u64, u64, u64> for Lists {
    type State = KeyedState;
    fn process_element(&self, x: u64, ctx: &mut ProcessContext<'_, u64, KeyedState, u64>) {
        let mut l = ctx.list_state(&self.items);
        if (x / KEYS) % 100 == 0 {
            l.clear();
        } else {
            l.add(x);
        }
    }
}

struct Maps {
    entries: MapStateDescriptor<u64, u64>,
}

impl KeyedProcessFunction<u64, u64, u64> for Maps {
    type State = KeyedState;
    fn process_element(&self, x: u64, ctx: &mut ProcessContext<'_, u64, KeyedState, u64>) {
        let mut m = ctx.map_state(&self.entries);
        let bucket = (x / KEYS) % 16;
        let seen = m.get(&bucket).copied().unwrap_or(0);
        m.put(bucket, seen + 1);
    }
}

fn run(events: u64, name: &str, job: impl Fn(KeyedStream<u64, u64>) -> DataStream<u64>) {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let env = StreamEnv::new(JobConfig::local(1));
        let keyed = env
            .from_source(SequenceSource::new(0, Some(events)))
            .key_by(|x: &u64| x % KEYS);
        job(keyed).sink_to(DiscardSink::new());
        let start = Instant::now();
        env.execute(name).expect("the job runs");
        best = best.min(start.elapsed());
    }
    println!(
        "{name:<32} {:>12.0} events/s",
        events as f64 / best.as_secs_f64()
    );
}

fn main() {
    let events: u64 = std::env::var("SPATE_STATE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let hour = || StateTtlConfig::new(Duration::from_secs(3600));
    run(events, "Option<u64> (process_with_state)", |k| {
        k.process_with_state(
            |_k: &u64, s: &mut Option<u64>, _x: u64, _out: &mut Vec<u64>| {
                *s = Some(s.unwrap_or(0) + 1)
            },
        )
    });
    run(events, "ValueState<u64>", |k| {
        k.process(Count {
            count: ValueStateDescriptor::new("count"),
        })
    });
    run(events, "ValueState<u64> with a TTL", |k| {
        k.process(Count {
            count: ValueStateDescriptor::new("count").enable_time_to_live(hour()),
        })
    });
    run(events, "ListState<u64> add", |k| {
        k.process(Lists {
            items: ListStateDescriptor::new("items"),
        })
    });
    run(events, "MapState<u64, u64> get + put", |k| {
        k.process(Maps {
            entries: MapStateDescriptor::new("entries"),
        })
    });
    run(events, "MapState with a TTL", |k| {
        k.process(Maps {
            entries: MapStateDescriptor::new("entries").enable_time_to_live(hour()),
        })
    });
}
