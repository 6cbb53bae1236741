//! Native side outputs: a process function's main output and two side outputs of other types
//! equal a naive oracle; reading a side output adds no operator (it is one of the process
//! operator's own outputs); a side output nobody reads is dropped; and a checkpointed job
//! with side outputs that fails and restores writes every output exactly as a failure-free
//! run does.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use spate::dataflow::plan::NodeKind;
use spate::dataflow::{KeyedProcessFunction, ProcessContext};
use spate::prelude::*;

use crate::checkpoints::{rows, Flaky};

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        rng_seed: RngSeed::Fixed(10),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The tags of the split: negative values as text, large magnitudes as `u64`, and a tag that
/// no job reads.
#[derive(Clone)]
struct Tags {
    negative: OutputTag<String>,
    large: OutputTag<u64>,
    unread: OutputTag<u8>,
}

impl Tags {
    fn new() -> Self {
        Tags {
            negative: OutputTag::new("negative"),
            large: OutputTag::new("large"),
            unread: OutputTag::new("unread"),
        }
    }
}

/// What the split emits for `(key, v)`: to the main output `(key, v)` when `v >= 0`, to
/// `negative` its text otherwise; to `large` `|v|` when `|v| >= 50`; to `unread` always.
#[derive(Debug, Default, PartialEq)]
struct Split {
    main: Vec<(u32, i64)>,
    negative: Vec<String>,
    large: Vec<u64>,
}

/// The naive oracle of the split.
fn oracle(input: &[(u32, i64)]) -> Split {
    let mut split = Split::default();
    for &(k, v) in input {
        if v >= 0 {
            split.main.push((k, v));
        } else {
            split.negative.push(format!("{k}:{v}"));
        }
        if v.unsigned_abs() >= 50 {
            split.large.push(v.unsigned_abs());
        }
    }
    split.sort();
    split
}

impl Split {
    fn sort(&mut self) {
        self.main.sort();
        self.negative.sort();
        self.large.sort();
    }
}

/// The split as a keyed process function (counting records per key in its state).
struct KeyedSplit(Tags);

impl KeyedProcessFunction<u32, (u32, i64), (u32, i64)> for KeyedSplit {
    type State = u64;

    fn process_element(
        &self,
        (k, v): (u32, i64),
        ctx: &mut ProcessContext<'_, u32, u64, (u32, i64)>,
    ) {
        *ctx.state().get_or_insert(0) += 1;
        if v >= 0 {
            ctx.collect((k, v));
        } else {
            ctx.output(&self.0.negative, format!("{k}:{v}"));
        }
        if v.unsigned_abs() >= 50 {
            ctx.output(&self.0.large, v.unsigned_abs());
        }
        ctx.output(&self.0.unread, 1);
    }
}

/// The split as a non-keyed process function.
#[derive(Clone)]
struct PlainSplit(Tags);

impl ProcessFunction<(u32, i64), (u32, i64)> for PlainSplit {
    fn process_element(
        &mut self,
        (k, v): (u32, i64),
        ctx: &mut ProcessFunctionContext<'_, (u32, i64)>,
    ) -> FunctionResult {
        if v >= 0 {
            ctx.collect((k, v));
        } else {
            ctx.output(&self.0.negative, format!("{k}:{v}"));
        }
        if v.unsigned_abs() >= 50 {
            ctx.output(&self.0.large, v.unsigned_abs());
        }
        ctx.output(&self.0.unread, 1);
        Ok(())
    }
}

/// Runs the split (keyed or not) on `workers` workers and collects its three read outputs.
fn run_split(input: &[(u32, i64)], workers: usize, keyed: bool) -> Split {
    let env = StreamEnv::new(JobConfig::local(workers));
    let tags = Tags::new();
    let source = env.from_collection(input.to_vec());
    let main = if keyed {
        source
            .key_by(|r: &(u32, i64)| r.0)
            .process(KeyedSplit(tags.clone()))
    } else {
        source.process(PlainSplit(tags.clone()))
    };
    let (m, n, l) = (
        main.collect(),
        main.side_output(&tags.negative).collect(),
        main.side_output(&tags.large).collect(),
    );
    env.execute("split").unwrap();
    let mut split = Split {
        main: m.take(),
        negative: n.take(),
        large: l.take(),
    };
    split.sort();
    split
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn a_main_and_two_typed_side_outputs_equal_the_oracle(
        input in prop::collection::vec((0u32..6, -100i64..100), 0..120),
        workers in 1usize..4,
        keyed in any::<bool>(),
    ) {
        prop_assert_eq!(run_split(&input, workers, keyed), oracle(&input));
    }
}

/// The timely operators of `source → process → main sink`, plus a sink per side output read
/// when `sides`, and the plan's description.
fn operators(keyed: bool, sides: bool) -> (usize, String) {
    let env = StreamEnv::new(JobConfig::local(1));
    let tags = Tags::new();
    let source = env.from_collection(vec![(1u32, -70i64), (2, 3), (3, 80)]);
    let main = if keyed {
        source
            .key_by(|r: &(u32, i64)| r.0)
            .process(KeyedSplit(tags.clone()))
    } else {
        source.process(PlainSplit(tags.clone()))
    };
    let out = main.collect();
    let read = sides.then(|| {
        (
            main.side_output(&tags.negative).collect(),
            main.side_output(&tags.large).collect(),
        )
    });
    let plan = env.plan().describe();
    let result = env.execute("count operators").unwrap();
    assert_eq!(out.take().len(), 2);
    if let Some((n, l)) = read {
        assert_eq!(n.take(), vec!["1:-70".to_owned()]);
        assert_eq!(l.take().len(), 2);
    }
    (result.operators, plan)
}

#[test]
fn reading_side_outputs_adds_no_operator_and_the_plan_has_no_split_nodes() {
    // The same job without the process function: what the source and a sink build; and
    // what one more sink builds.
    let base = |sinks: usize| {
        let env = StreamEnv::new(JobConfig::local(1));
        let source = env.from_collection(vec![(1u32, -70i64)]);
        let _outs: Vec<_> = (0..sinks).map(|_| source.collect()).collect();
        env.execute("base").unwrap().operators
    };
    let (base, sink) = (base(1), base(2) - base(1));
    assert!(sink >= 1);
    for keyed in [false, true] {
        let (without, _) = operators(keyed, false);
        let (with, plan) = operators(keyed, true);
        // Two more sinks, nothing else: the side outputs are the operator's own outputs.
        assert_eq!(with, without + 2 * sink, "keyed {keyed}: {plan}");
        assert!(!plan.contains("main"), "{plan}");
        assert_eq!(plan.matches(" Side ").count(), 2, "{plan}");
        assert_eq!(plan.matches("(side)").count(), 2, "{plan}");
        if !keyed {
            // One operator for the process function (it was one more, splitting its output).
            assert_eq!(without, base + 1, "{plan}");
        }
    }
}

#[test]
fn the_plan_marks_side_nodes_as_outputs_of_their_operator() {
    let env = StreamEnv::new(JobConfig::local(1));
    let tags = Tags::new();
    let main = env
        .from_collection(vec![(1u32, 1i64)])
        .process(PlainSplit(tags.clone()))
        .name("split");
    let _side = main.side_output(&tags.large).collect();
    let plan = env.plan();
    let side = plan
        .nodes
        .iter()
        .position(|n| n.kind == NodeKind::Side)
        .expect("a side node");
    let split = plan.nodes.iter().position(|n| n.name == "split").unwrap();
    assert_eq!(plan.nodes[side].inputs, vec![split]);
    assert_eq!(plan.nodes[side].edge, "side");
}

#[test]
fn records_for_side_outputs_nobody_reads_are_dropped_without_error() {
    let input: Vec<(u32, i64)> = (0..200).map(|i| (i % 7, i as i64 - 100)).collect();
    for keyed in [false, true] {
        let env = StreamEnv::new(JobConfig::local(2));
        let tags = Tags::new();
        let source = env.from_collection(input.clone());
        let main = if keyed {
            source
                .key_by(|r: &(u32, i64)| r.0)
                .process(KeyedSplit(tags.clone()))
        } else {
            source.process(PlainSplit(tags))
        };
        let out = main.collect();
        env.execute("unread sides").unwrap();
        let mut got = out.take();
        got.sort();
        assert_eq!(got, oracle(&input).main, "keyed {keyed}");
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints and restarts
// ---------------------------------------------------------------------------------------------

const EVENTS: u64 = 30_000;

/// Counts per key `v % 5`: `(key, n)` to the main output, except every tenth count of a key,
/// which goes to the side output `tens` as text; multiples of 100 go to `hundreds` as well.
struct Counting {
    tens: OutputTag<String>,
    hundreds: OutputTag<u64>,
}

impl KeyedProcessFunction<u64, u64, (u64, u64)> for Counting {
    type State = u64;

    fn process_element(&self, v: u64, ctx: &mut ProcessContext<'_, u64, u64, (u64, u64)>) {
        let n = ctx.state().get_or_insert(0);
        *n += 1;
        let n = *n;
        let k = *ctx.key();
        if n % 10 == 0 {
            ctx.output(&self.tens, format!("{k}:{n}"));
        } else {
            ctx.collect((k, n));
        }
        if v % 100 == 0 {
            ctx.output(&self.hundreds, v);
        }
    }
}

/// The counting job, its three outputs written exactly once under `out`.
fn counting(
    out: &Path,
    config: JobConfig,
    fail_after: u64,
    ckpt: Option<&Path>,
) -> SpateResult<JobResult> {
    let env = StreamEnv::new(config);
    let source =
        Flaky::new(EVENTS, 30_000.0, fail_after).after_a_checkpoint_in(ckpt.map(Path::to_path_buf));
    let tens = OutputTag::<String>::new("tens");
    let hundreds = OutputTag::<u64>::new("hundreds");
    let main = env
        .from_source(source)
        .key_by(|v: &u64| v % 5)
        .process(Counting {
            tens: tens.clone(),
            hundreds: hundreds.clone(),
        });
    main.write_jsonl(out.join("main"));
    main.side_output(&tens).write_jsonl(out.join("tens"));
    main.side_output(&hundreds)
        .write_jsonl(out.join("hundreds"));
    env.execute("counting with side outputs")
}

fn outputs(out: &Path) -> [Vec<String>; 3] {
    ["main", "tens", "hundreds"].map(|o| rows(&out.join(o)))
}

#[test]
fn a_restored_job_with_side_outputs_writes_every_output_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    counting(&expected_dir, JobConfig::local(1), u64::MAX, None).unwrap();
    let expected = outputs(&expected_dir);
    assert_eq!(expected[1].len() as u64, EVENTS / 10);
    assert_eq!(expected[2].len() as u64, EVENTS / 100);
    assert_eq!(expected[0].len() as u64, EVENTS - EVENTS / 10);

    let config = |restore: bool| {
        let mut config = JobConfig::local(2);
        config.checkpoint_interval = Some(Duration::from_millis(50));
        config.checkpoint_dir = Some(ckpt.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
        config
    };
    assert!(counting(&out, config(false), EVENTS / 2, Some(&ckpt)).is_err());
    let partial = outputs(&out);
    assert!(partial[0].len() < expected[0].len());
    counting(&out, config(true), u64::MAX, None).unwrap();
    assert_eq!(
        outputs(&out),
        expected,
        "nothing lost, nothing twice, on every output"
    );
}
