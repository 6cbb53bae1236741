//! `spate sql` as a user runs it, each test against an oracle:
//!
//! * the Nexmark suite's own Flink SQL texts (`shared/nexmark/flink-sql`, unchanged) give
//!   Flink's results on one and two workers and on two processes;
//! * the same texts give what Spate's hand-written Rust pipelines (`spate nexmark run`) give
//!   over a larger generated input;
//! * a bad script fails with one `error:` line that names the problem and its place, and never
//!   panics;
//! * a `SELECT` prints its rows as Flink's `print` connector does, and so does `print`;
//! * expressions over NULLs, negative numbers, decimals, strings and timestamps give the values
//!   Flink's documented semantics give, written out by hand below.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::{ok, shared, spate};

/// The Nexmark queries whose suite texts `spate sql` runs with Flink's results: all of
/// `shared/nexmark/expected`.
const SQL_QUERIES: &[&str] = &[
    "q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q10", "q11", "q13", "q14", "q15", "q16",
    "q17", "q18", "q19", "q20", "q21", "q22",
];

/// `spate nexmark gen`'s events into `dir/name`.
fn generate(dir: &Path, name: &str, events: u64, seed: u64, rate: u64) -> PathBuf {
    let out = dir.join(name);
    ok(spate()
        .args(["nexmark", "gen", "--events", &events.to_string()])
        .args([
            "--seed",
            &seed.to_string(),
            "--event-rate",
            &rate.to_string(),
        ])
        .arg("--out")
        .arg(&out));
    out
}

/// `nexmark_canon.py --compare` exit status and report (both files canonicalised).
fn compare(a: &Path, b: &Path) -> (bool, String) {
    let result = Command::new("python3")
        .arg(shared().join("anchors/nexmark_canon.py"))
        .arg("--compare")
        .arg(a)
        .arg(b)
        .output()
        .expect("python3 runs the canonical comparison");
    (
        result.status.success(),
        String::from_utf8_lossy(&result.stdout).into_owned(),
    )
}

/// Fails the test if the binary panicked.
fn assert_no_panic(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{what}: spate panicked:\n{stderr}"
    );
}

/// Runs `cmd`, which must succeed without a panic.
fn succeeds(cmd: &mut Command, what: &str) -> Output {
    let out = ok(cmd);
    assert_no_panic(&out, what);
    out
}

/// `NAME=path` for `-D`.
fn define(name: &str, path: &Path) -> OsString {
    let mut pair = OsString::from(format!("{name}="));
    pair.push(path);
    pair
}

/// `TABLE=path` for `--redirect`.
fn redirect(table: &str, path: &Path) -> OsString {
    define(table, path)
}

/// Runs the suite's text of `query` over the events in `input` (the `datagen` table of
/// `examples/sql/nexmark_file.sql` and the suite's views), its sink redirected to `out`.
fn run_suite_query(query: &str, input: &Path, out: &Path, workers: usize, processes: usize) {
    let mut cmd = suite_command(query, input, out);
    cmd.args(["--workers", &workers.to_string()])
        .args(["--processes", &processes.to_string()]);
    succeeds(
        &mut cmd,
        &format!("{query} on {workers} workers × {processes} processes"),
    );
}

/// A directory beside `out` holding q13's side input in `data/side_input.txt`.
fn side_input(out: &Path) -> PathBuf {
    let home = out
        .parent()
        .expect("a file in a directory")
        .join("flink-home");
    let file = home.join("data/side_input.txt");
    if !file.exists() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let rows: String = (0..10_000).map(|i| format!("{i},{i}\n")).collect();
        std::fs::write(&file, rows).unwrap();
    }
    home
}

/// `spate sql` running the suite's text of `query` over `input` into `out`.
fn suite_command(query: &str, input: &Path, out: &Path) -> Command {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sql");
    let mut cmd = suite_command_over(query, &examples.join("nexmark_file.sql"), out);
    cmd.arg("-D").arg(define("INPUT", input));
    cmd
}

/// `spate sql` running the suite's text of `query` over the `datagen` table that the script
/// `ddl` creates, into `out`.
fn suite_command_over(query: &str, ddl: &Path, out: &Path) -> Command {
    let suite = shared().join("nexmark/flink-sql");
    let mut cmd = spate();
    cmd.arg("sql")
        .arg("-i")
        .arg(ddl)
        .arg("-i")
        .arg(suite.join("ddl_views.sql"))
        .arg("-f")
        .arg(suite.join(format!("{query}.sql")))
        .args(["-D", "NEXMARK_TABLE=datagen"])
        // q10's filesystem table names these; its rows are redirected, so nothing goes there.
        .arg("-D")
        .arg(define(
            "NEXMARK_DIR",
            out.parent().expect("a file in a directory"),
        ))
        .args(["-D", "SUBMIT_TIME=x"])
        // q13's side input, `${FLINK_HOME}/data/side_input.txt`: the rows `(i, "i")` for i in
        // [0, 10000), as the suite's `SideInputGenerator --num 10000` writes them.
        .arg("-D")
        .arg(define("FLINK_HOME", &side_input(out)))
        .arg("--redirect")
        .arg(redirect(&format!("nexmark_{query}"), out));
    cmd
}

/// A SQL job checkpoints and comes back from its latest checkpoint when one of its processes
/// is killed: q5 (window aggregates, a cascaded one, and a join: all their state) over
/// 150,000 events on two processes, one of them killed with SIGKILL after the first
/// checkpoint, writes exactly the failure-free run's rows.
#[test]
fn a_killed_sql_job_recovers_from_its_checkpoint_with_exactly_once_output() {
    let _exclusive = crate::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let input = generate(dir.path(), "in.jsonl", 150_000, 3, 200);
    let reference = dir.path().join("reference.jsonl");
    run_suite_query("q5", &input, &reference, 1, 1);
    let expected = crate::sorted_lines(&reference);
    assert!(expected.len() > 100, "q5 gives rows: {}", expected.len());

    let (out, ckpt) = (dir.path().join("out.jsonl"), dir.path().join("ckpt"));
    let mut supervisor = suite_command("q5", &input, &out)
        .args(["--processes", "2", "--checkpoint-interval", "200ms"])
        .args(["--restart-strategy", "fixed-delay:10:100"])
        .arg("--checkpoint-dir")
        .arg(&ckpt)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut killed = false;
    while started.elapsed() < std::time::Duration::from_secs(120)
        && supervisor.try_wait().unwrap().is_none()
    {
        if crate::chaos::newest_checkpoint(&ckpt) >= 1 {
            if let Some(&victim) = crate::chaos::children(supervisor.id()).first() {
                let _ = Command::new("kill")
                    .args(["-9", &victim.to_string()])
                    .status();
                killed = true;
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let output = supervisor.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the job ends well after the kill: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(killed, "a process was killed after a checkpoint");
    assert_eq!(
        crate::sorted_lines(&out),
        expected,
        "after the kill: nothing lost, nothing twice"
    );
}

/// Writes `text` to `dir/name` and returns its path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `spate sql -f script`.
fn sql(script: &Path) -> Command {
    let mut cmd = spate();
    cmd.arg("sql").arg("-f").arg(script);
    cmd
}

/// `CREATE TABLE t (a BIGINT, s STRING)` over the JSON lines at `path`, on one line.
fn table_t(path: &Path) -> String {
    format!(
        "CREATE TABLE t (a BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');",
        path.display()
    )
}

/// The lines of `out`'s standard output, sorted.
fn stdout_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn suite_texts_match_flink_on_one_and_two_workers_and_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    // The input of `shared/nexmark/expected/seed7-20k`.
    let input = generate(dir.path(), "in.jsonl", 20_000, 7, 200);
    for query in SQL_QUERIES {
        let expected = shared().join(format!("nexmark/expected/seed7-20k/{query}.canon"));
        for (workers, processes) in [(1, 1), (2, 1), (1, 2)] {
            let out = dir
                .path()
                .join(format!("{query}-{workers}x{processes}.jsonl"));
            run_suite_query(query, &input, &out, workers, processes);
            let (same, report) = compare(&out, &expected);
            assert!(
                same,
                "{query} on {processes} process(es) of {workers} worker(s) differs from Flink: {report}"
            );
        }
    }
}

#[test]
fn sql_equals_the_rust_pipeline_on_generated_events() {
    let dir = tempfile::tempdir().unwrap();
    let input = generate(dir.path(), "in.jsonl", 200_000, 11, 1000);
    for query in SQL_QUERIES {
        let rust = dir.path().join(format!("{query}-rust.jsonl"));
        succeeds(
            spate()
                .args(["nexmark", "run", "--no-progress", "--query", query])
                .arg("--input")
                .arg(&input)
                .arg("--output")
                .arg(&rust),
            &format!("the Rust pipeline of {query}"),
        );
        // Two empty results would be equal: the comparison means something only with rows.
        assert!(
            std::fs::metadata(&rust).unwrap().len() > 0,
            "the Rust pipeline of {query} gave no rows"
        );
        let sql = dir.path().join(format!("{query}-sql.jsonl"));
        run_suite_query(query, &input, &sql, 1, 1);
        let (same, report) = compare(&sql, &rust);
        assert!(
            same,
            "{query}: the SQL text differs from the Rust pipeline: {report}"
        );
    }
}

/// The suite's own `ddl_gen.sql`, unchanged (the `nexmark` connector, with the suite's
/// option values), gives on one worker what the same events give from a file that `spate
/// nexmark gen` wrote: every suite text, compared canonically. On two workers the generator
/// has two partitions, as `spate nexmark run` has: the SQL texts give the Rust pipelines'
/// rows over that generator.
#[test]
fn the_suites_generator_table_gives_the_rows_of_the_same_events_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let events = 20_000;
    let input = generate(dir.path(), "in.jsonl", events, 42, 200);
    let ddl_gen = shared().join("nexmark/flink-sql/ddl_gen.sql");
    let gen_command = |query: &str, out: &Path| {
        let mut cmd = suite_command_over(query, &ddl_gen, out);
        cmd.args(["-D", "TPS=200", "-D", &format!("EVENTS_NUM={events}")])
            .args(["-D", "PERSON_PROPORTION=1", "-D", "AUCTION_PROPORTION=3"])
            .args(["-D", "BID_PROPORTION=46"]);
        cmd
    };
    for query in SQL_QUERIES {
        let from_file = dir.path().join(format!("{query}-file.jsonl"));
        run_suite_query(query, &input, &from_file, 1, 1);
        let generated = dir.path().join(format!("{query}-gen.jsonl"));
        succeeds(
            &mut gen_command(query, &generated),
            &format!("{query} over ddl_gen.sql"),
        );
        assert!(
            std::fs::metadata(&generated).unwrap().len() > 0,
            "{query} over the generator gave no rows"
        );
        let (same, report) = compare(&generated, &from_file);
        assert!(
            same,
            "{query}: the generator table differs from its events in a file: {report}"
        );
    }
    for query in ["q3", "q5", "q7", "q8", "q11", "q20"] {
        let rust = dir.path().join(format!("{query}-rust2.jsonl"));
        succeeds(
            spate()
                .args(["nexmark", "run", "--no-progress", "--query", query])
                .args(["--events", &events.to_string(), "--event-rate", "200"])
                .args(["--workers", "2", "--output"])
                .arg(&rust),
            &format!("the Rust pipeline of {query} on two workers"),
        );
        let generated = dir.path().join(format!("{query}-gen2.jsonl"));
        succeeds(
            gen_command(query, &generated).args(["--workers", "2"]),
            &format!("{query} over ddl_gen.sql on two workers"),
        );
        let (same, report) = compare(&generated, &rust);
        assert!(
            same,
            "{query} on two workers: the generator table differs from the Rust pipeline: {report}"
        );
    }
}

/// The suite's Kafka scripts, as written: `insert_kafka.sql` writes the generator table's
/// events into the `kafka` table of `ddl_kafka.sql` (JSON objects, as Flink's `json`
/// format), exactly once through Kafka transactions; the suite's texts over that table
/// (`NEXMARK_TABLE=kafka`, read to the offsets of their start) give the rows of the same
/// events read from a file. Only the topic, the end of reading and the delivery are set
/// apart, by `ALTER TABLE kafka SET (...)`.
#[test]
fn the_suites_kafka_scripts_write_and_read_the_events_of_its_generator() {
    use spate_connectors::kafka::admin::KafkaAdmin;
    let dir = tempfile::tempdir().unwrap();
    let events = 20_000;
    let input = generate(dir.path(), "in.jsonl", events, 42, 200);
    let bootstrap = crate::kafka::bootstrap();
    let topic = crate::kafka::unique("sql-nexmark");
    KafkaAdmin::new(&bootstrap)
        .create_topic(&topic, 2, false)
        .unwrap();
    let suite = shared().join("nexmark/flink-sql");
    let alter = |name: &str, options: &str| {
        write(
            dir.path(),
            name,
            &format!("ALTER TABLE kafka SET ('topic' = '{topic}', {options});"),
        )
    };
    let to_kafka = alter(
        "to_kafka.sql",
        &format!(
            "'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = '{topic}'"
        ),
    );
    let from_kafka = alter("from_kafka.sql", "'scan.bounded.mode' = 'latest-offset'");
    let ckpt = dir.path().join("ckpt");
    succeeds(
        spate()
            .arg("sql")
            .arg("-i")
            .arg(suite.join("ddl_gen.sql"))
            .arg("-i")
            .arg(suite.join("ddl_kafka.sql"))
            .arg("-i")
            .arg(&to_kafka)
            .arg("-f")
            .arg(suite.join("insert_kafka.sql"))
            .args(["-D", "TPS=200", "-D", &format!("EVENTS_NUM={events}")])
            .args(["-D", "PERSON_PROPORTION=1", "-D", "AUCTION_PROPORTION=3"])
            .args(["-D", "BID_PROPORTION=46", "-D"])
            .arg(format!("BOOTSTRAP_SERVERS={bootstrap}"))
            .args(["--checkpoint-interval", "200ms", "--checkpoint-dir"])
            .arg(&ckpt),
        "insert_kafka.sql",
    );
    let written = crate::kafka::read_all(&topic);
    assert_eq!(written.len() as u64, events, "each event once");
    let first: Value = serde_json::from_str(&written[0]).unwrap();
    assert!(
        first.get("event_type").is_some() && first.get("bid").is_some(),
        "a message is a JSON object of the table's columns: {first}"
    );
    for query in ["q1", "q3", "q5", "q7", "q8", "q11", "q15", "q18", "q20"] {
        let from_file = dir.path().join(format!("{query}-file.jsonl"));
        run_suite_query(query, &input, &from_file, 1, 1);
        let from_topic = dir.path().join(format!("{query}-kafka.jsonl"));
        let mut cmd = suite_command_over(query, &suite.join("ddl_kafka.sql"), &from_topic);
        cmd.arg("-i")
            .arg(&from_kafka)
            .args(["-D", "NEXMARK_TABLE=kafka", "-D"])
            .arg(format!("BOOTSTRAP_SERVERS={bootstrap}"))
            .args(["--workers", "2"]);
        succeeds(&mut cmd, &format!("{query} over ddl_kafka.sql"));
        assert!(
            std::fs::metadata(&from_topic).unwrap().len() > 0,
            "{query} over Kafka gave no rows"
        );
        let (same, report) = compare(&from_topic, &from_file);
        assert!(
            same,
            "{query}: the Kafka table differs from the file: {report}"
        );
    }
}

/// A `filesystem` table is written as Flink's `json` format writes it (an object per row,
/// named by the columns; a `ROW` a nested object, a `DECIMAL` a number), and a table over
/// the written directory reads back the rows that went in.
#[test]
fn a_filesystem_table_is_written_as_flinks_json_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write(
        dir.path(),
        "rows.jsonl",
        "{\"a\": 1, \"s\": \"x\\\"y\", \"d\": 12.5, \"ts\": \"2024-01-01 00:00:01.250\", \"r\": {\"n\": 7, \"t\": null}}\n\
         {\"a\": null, \"s\": null, \"d\": -0.05, \"ts\": null, \"r\": null}\n",
    );
    let out = dir.path().join("out");
    let columns = "a BIGINT, s STRING, d DECIMAL(5, 2), ts TIMESTAMP(3), r ROW<n INT, t STRING>";
    let table = |name: &str, path: &Path| {
        format!(
            "CREATE TABLE {name} ({columns}) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\n",
            path.display()
        )
    };
    let write_script = write(
        dir.path(),
        "write.sql",
        &format!(
            "{}{}INSERT INTO sink SELECT * FROM src;\n",
            table("src", &rows),
            table("sink", &out)
        ),
    );
    succeeds(&mut sql(&write_script), "INSERT INTO a filesystem table");
    let mut written: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        written.extend(text.lines().map(str::to_owned));
    }
    written.sort();
    assert_eq!(
        written,
        [
            r#"{"a":1,"s":"x\"y","d":12.50,"ts":"2024-01-01 00:00:01.250","r":{"n":7,"t":null}}"#,
            r#"{"a":null,"s":null,"d":-0.05,"ts":null,"r":null}"#,
        ]
    );
    let read = |name: &str, path: &Path| {
        let script = write(
            dir.path(),
            &format!("read_{name}.sql"),
            &format!("{}SELECT * FROM {name};\n", table(name, path)),
        );
        stdout_lines(&succeeds(
            &mut sql(&script),
            "SELECT from a filesystem table",
        ))
    };
    let (back, original) = (read("back", &out), read("src", &rows));
    assert_eq!(back.len(), 2, "{back:?}");
    assert_eq!(back, original);
}

/// The one `error:` line of a failed run, after checking that the run failed without a panic
/// and that stderr holds nothing else than the `[INFO]` lines of the statements that ran
/// before the error.
fn the_error(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_panic(out, what);
    assert!(
        matches!(out.status.code(), Some(code) if code != 0),
        "{what}: expected a failing exit, got {:?}; stderr:\n{stderr}",
        out.status
    );
    let others: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("[INFO] "))
        .collect();
    assert!(
        others.len() == 1 && others[0].starts_with("error:"),
        "{what}: expected one line `error: ...` on stderr, got:\n{stderr}"
    );
    assert_eq!(
        stderr.lines().last(),
        Some(others[0]),
        "{what}: the error is not the last line"
    );
    others[0].to_owned()
}

/// The numbers written in `text`.
fn numbers_in(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[test]
fn errors_are_one_line_with_the_place_and_a_failing_exit() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write(dir.path(), "t.jsonl", "{\"a\":1,\"s\":\"x\"}\n");
    let t = table_t(&rows);
    let fails = |name: &str, text: &str| {
        let script = write(dir.path(), name, text);
        the_error(&sql(&script).output().expect("spate starts"), name)
    };

    let line = fails("keyword.sql", "SELEC auction FROM bid;\n");
    assert!(line.contains("Line: 1"), "a misspelled keyword: {line}");

    // The unknown column is on line 3 (and so is its statement).
    let line = fails(
        "column.sql",
        &format!("{t}\n-- a column t does not have:\nSELECT a, nope FROM t;\n"),
    );
    assert!(
        line.contains("line 3") && line.contains("nope"),
        "an unknown column: {line}"
    );

    let line = fails("variable.sql", &format!("{t}\nSELECT ${{NOPE}} FROM t;\n"));
    assert!(line.contains("NOPE"), "an undefined variable: {line}");

    // 2 columns into 4 (on line 3: neither number can come from the place).
    let line = fails(
        "arity.sql",
        &format!(
            "{t}\nCREATE TABLE four (a BIGINT, s STRING, b BIGINT, c BIGINT) WITH ('connector' = 'blackhole');\nINSERT INTO four SELECT a, s FROM t;\n"
        ),
    );
    let numbers = numbers_in(&line);
    assert!(
        line.contains("four") && numbers.contains(&2) && numbers.contains(&4),
        "an INSERT of 2 columns into 4: {line}"
    );

    let line = fails(
        "sink-connector.sql",
        &format!(
            "{t}\nCREATE TABLE out (a BIGINT) WITH ('connector' = 'no-such-sink');\nINSERT INTO out SELECT a FROM t;\n"
        ),
    );
    assert!(
        line.contains("no-such-sink"),
        "an unknown sink connector: {line}"
    );

    let line = fails(
        "source-connector.sql",
        "CREATE TABLE src (a BIGINT) WITH ('connector' = 'no-such-source');\nCREATE TABLE out (a BIGINT) WITH ('connector' = 'print');\nINSERT INTO out SELECT a FROM src;\n",
    );
    assert!(
        line.contains("no-such-source"),
        "an unknown source connector: {line}"
    );

    let missing = dir.path().join("missing.sql");
    let line = the_error(
        &sql(&missing).output().expect("spate starts"),
        "a missing script",
    );
    assert!(
        line.contains(&missing.display().to_string()),
        "a missing script: {line}"
    );
}

#[test]
fn a_select_prints_its_rows_and_the_print_connector_prints_flink_rows() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write(
        dir.path(),
        "t.jsonl",
        concat!(
            "{\"a\":1,\"s\":\"x\"}\n",
            "{\"a\":2,\"s\":\"y\"}\n",
            "{\"a\":3,\"s\":null}\n",
            "{\"a\":null,\"s\":\"z\"}\n",
            "{\"a\":10,\"s\":\"two words\"}\n",
        ),
    );
    let t = table_t(&rows);
    // Flink's `print` writes `Row.toString()`: the kind, then the fields' `toString` joined by
    // ", " in brackets, strings unquoted. `a > 1` is NULL, so not TRUE, for the NULL `a`.
    let expected = [
        "+I[10, two words]",
        "+I[2, y]",
        // Flink writes a NULL field as `StringUtils.arrayAwareToString(null)`: `null`.
        "+I[3, null]",
    ];
    let print = write(
        dir.path(),
        "print.sql",
        &format!(
            "{t}\nCREATE TABLE p (a BIGINT, s STRING) WITH ('connector' = 'print');\nINSERT INTO p SELECT a, s FROM t WHERE a > 1;\n"
        ),
    );
    let printed = stdout_lines(&succeeds(&mut sql(&print), "INSERT INTO a print table"));
    let select = write(
        dir.path(),
        "select.sql",
        &format!("{t}\nSELECT a, s FROM t WHERE a > 1;\n"),
    );
    let selected = stdout_lines(&succeeds(&mut sql(&select), "a SELECT"));
    assert_eq!(printed, expected, "the print connector's rows");
    assert_eq!(selected, printed, "a SELECT prints as the print connector");
}

/// The rows of `expressions_follow_flink`: NULLs in every column, negative numbers, an empty
/// string, a non-ASCII one, and timestamps at the ends of a day and a year and on a 29
/// February.
const EXPRESSION_ROWS: &str = r#"{"id":1,"a":7,"price":100,"s":"item-42","ts":"2024-01-01 00:00:00.000"}
{"id":2,"a":-7,"price":-5,"s":"a,,c","ts":"2024-01-01 23:59:59.500"}
{"id":3,"a":null,"price":null,"s":null,"ts":null}
{"id":4,"a":0,"price":3,"s":"héllo","ts":"2024-02-29 12:34:56.789"}
{"id":5,"a":2,"price":null,"s":"x-9-y-10","ts":"2023-12-31 23:59:59.999"}
{"id":6,"a":-1,"price":-1,"s":"","ts":"2024-01-01 00:00:00.000"}
{"id":7,"a":null,"price":60,"s":"solo","ts":"2024-01-01 00:00:00.000"}
{"id":8,"a":5,"price":null,"s":null,"ts":null}
{"id":9,"a":-3,"price":-2,"s":null,"ts":null}
"#;

/// An expression of `expressions_follow_flink`: its column in the sink, the column's type, and
/// Flink's values for the rows of id 1 to 9, in the JSON of the redirected sink.
struct Case {
    column: &'static str,
    ty: &'static str,
    expr: &'static str,
    expected: Value,
}

fn case(column: &'static str, ty: &'static str, expr: &'static str, expected: Value) -> Case {
    Case {
        column,
        ty,
        expr,
        expected,
    }
}

/// The expressions of `expressions_follow_flink`, each with a comment on its non-obvious values.
fn expression_cases() -> Vec<Case> {
    vec![
        // DECIMAL(3, 3) × BIGINT is exact, with the sum of the scales (3): always 3 decimals,
        // the sign before a leading zero.
        case(
            "euro",
            "DECIMAL(23, 3)",
            "0.908 * price",
            json!(["90.800", "-4.540", null, "2.724", null, "-0.908", "54.480", null, "-1.816"]),
        ),
        // Java's `%`: the sign of the dividend (MOD(-7, 3) = -1, not 2), and -3 % 3 = 0.
        case(
            "m",
            "INT",
            "MOD(a, 3)",
            json!([1, -1, null, 0, 2, -1, null, 2, 0]),
        ),
        // For a NULL `a` both conditions are NULL, not TRUE: the ELSE branch (ids 3 and 7).
        // The literals have one length, so Flink's CHAR(3) result needs no padding.
        case(
            "sign",
            "STRING",
            "CASE WHEN a < 0 THEN 'neg' WHEN a = 0 THEN 'nil' ELSE 'pos' END",
            json!(["pos", "neg", "pos", "nil", "pos", "neg", "pos", "pos", "neg"]),
        ),
        // Integer division truncates toward zero: -7 / 2 = -3, -1 / 2 = 0, -3 / 2 = -1.
        case(
            "half",
            "BIGINT",
            "a / 2",
            json!([3, -3, null, 0, 1, 0, null, 2, -1]),
        ),
        case(
            "no_price",
            "BOOLEAN",
            "price IS NULL",
            json!([false, false, true, false, true, false, false, true, false]),
        ),
        // The empty string is not NULL (id 6).
        case(
            "name",
            "STRING",
            "COALESCE(s, 'none')",
            json!(["item-42", "a,,c", "none", "héllo", "x-9-y-10", "", "solo", "none", "none"]),
        ),
        // Characters, not bytes: `héllo` is 5 (6 bytes in UTF-8).
        case(
            "len",
            "INT",
            "CHAR_LENGTH(s)",
            json!([7, 4, null, 5, 8, 0, 4, null, null]),
        ),
        // Commons' splitByWholeSeparatorPreserveAllTokens: `a,,c` is [a, "", c], so index 1 is
        // the empty string; an index past the last token (one token without a comma, none for
        // the empty string) is NULL.
        case(
            "second",
            "STRING",
            "SPLIT_INDEX(s, ',', 1)",
            json!([null, "", null, null, null, null, null, null, null]),
        ),
        // The first match's group 2 (`x-9` in `x-9-y-10`); no match is NULL.
        case(
            "num",
            "STRING",
            "REGEXP_EXTRACT(s, '([a-z]+)-([0-9]+)', 2)",
            json!(["42", null, null, null, "9", null, null, null, null]),
        ),
        case(
            "minute",
            "STRING",
            "DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm')",
            json!([
                "2024-01-01 00:00",
                "2024-01-01 23:59",
                null,
                "2024-02-29 12:34",
                "2023-12-31 23:59",
                "2024-01-01 00:00",
                "2024-01-01 00:00",
                null,
                null
            ]),
        ),
        // Into the next day (id 2) and the next year (id 5); the milliseconds stay.
        case(
            "later",
            "TIMESTAMP(3)",
            "ts + INTERVAL '1' SECOND",
            json!([
                "2024-01-01 00:00:01.000",
                "2024-01-02 00:00:00.500",
                null,
                "2024-02-29 12:34:57.789",
                "2024-01-01 00:00:00.999",
                "2024-01-01 00:00:01.000",
                "2024-01-01 00:00:01.000",
                null,
                null
            ]),
        ),
        case(
            "a_text",
            "STRING",
            "CAST(a AS STRING)",
            json!(["7", "-7", null, "0", "2", "-1", null, "5", "-3"]),
        ),
        // A comparison with a NULL price is NULL, neither TRUE nor FALSE (ids 3, 5, 8).
        case(
            "dear",
            "BOOLEAN",
            "price > 50",
            json!([true, false, null, false, null, false, true, null, false]),
        ),
        // `= NULL` is NULL for every row, even the NULL `a`s (Flink types the NULL as `a`'s).
        case(
            "eq_null",
            "BOOLEAN",
            "a = NULL",
            json!([null, null, null, null, null, null, null, null, null]),
        ),
        // NULL IN (1, 2) is NULL (ids 3 and 7).
        case(
            "small",
            "BOOLEAN",
            "a IN (1, 2)",
            json!([false, false, null, false, true, false, null, false, false]),
        ),
    ]
}

/// A predicate over NULLs for the WHERE of `expressions_follow_flink`.
const PREDICATE: &str = "(a > 0 OR price > 0) AND CHAR_LENGTH(s) < 8";

/// The rows of the JSON-array lines at `path`, sorted by their first column.
fn json_rows(path: &Path) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    rows.sort_by_key(|r| r[0].as_i64());
    rows
}

/// The ids (first columns) of the rows at `path`, sorted.
fn ids(path: &Path) -> Vec<i64> {
    json_rows(path)
        .iter()
        .map(|r| r[0].as_i64().unwrap())
        .collect()
}

#[test]
fn expressions_follow_flink() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write(dir.path(), "rows.jsonl", EXPRESSION_ROWS);
    let cases = expression_cases();
    let columns: Vec<String> = cases
        .iter()
        .map(|c| format!("{} {}", c.column, c.ty))
        .collect();
    let exprs: Vec<&str> = cases.iter().map(|c| c.expr).collect();
    let script = format!(
        "CREATE TABLE t (id BIGINT, a BIGINT, price BIGINT, s STRING, ts TIMESTAMP(3)) \
         WITH ('connector' = 'filesystem', 'path' = '{rows}', 'format' = 'json');\n\
         CREATE TABLE projected (id BIGINT, {columns}) WITH ('connector' = 'blackhole');\n\
         INSERT INTO projected SELECT id, {exprs} FROM t;\n\
         CREATE TABLE kept (id BIGINT) WITH ('connector' = 'blackhole');\n\
         INSERT INTO kept SELECT id FROM t WHERE {PREDICATE};\n\
         CREATE TABLE rejected (id BIGINT) WITH ('connector' = 'blackhole');\n\
         INSERT INTO rejected SELECT id FROM t WHERE NOT ({PREDICATE});\n",
        rows = rows.display(),
        columns = columns.join(", "),
        exprs = exprs.join(",\n  "),
    );
    let script = write(dir.path(), "expressions.sql", &script);
    let [projected, kept, rejected] =
        ["projected", "kept", "rejected"].map(|t| dir.path().join(format!("{t}.jsonl")));
    succeeds(
        sql(&script)
            .arg("--redirect")
            .arg(redirect("projected", &projected))
            .arg("--redirect")
            .arg(redirect("kept", &kept))
            .arg("--redirect")
            .arg(redirect("rejected", &rejected)),
        "the expressions' script",
    );

    let got = json_rows(&projected);
    assert_eq!(
        got.iter().map(|r| r[0].as_i64()).collect::<Vec<_>>(),
        (1..=9).map(Some).collect::<Vec<_>>(),
        "the projection's rows: {got:?}"
    );
    let mut differences = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let expected = case.expected.as_array().unwrap();
        assert_eq!(expected.len(), 9, "the expected values of {}", case.expr);
        for (row, want) in got.iter().zip(expected) {
            let value = &row[i + 1];
            if value != want {
                differences.push(format!(
                    "`{}` for id {}: Flink gives {want}, Spate {value}",
                    case.expr, row[0]
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "expressions differ from Flink:\n{}",
        differences.join("\n")
    );

    // A WHERE keeps a row when its predicate is TRUE; NOT keeps the FALSE ones. NULL OR TRUE
    // is TRUE (id 7: a NULL `a`, price 60), TRUE AND NULL is NULL (id 8: CHAR_LENGTH(NULL)),
    // FALSE AND NULL is FALSE (id 9), NOT NULL is NULL: ids 3 and 8 are in neither.
    assert_eq!(ids(&kept), [1, 4, 7], "WHERE {PREDICATE}");
    assert_eq!(ids(&rejected), [2, 5, 6, 9], "WHERE NOT ({PREDICATE})");
}
