//! A regular join that drops the rows a time bound proves can meet nothing more (the shape
//! of Nexmark's q7: each row against the maximum of the 2-second window that ends within 2
//! seconds after it) gives Flink's rows, late rows included, whether the watermark moves
//! after every row or only at the end.
//!
//! The input is `tests/slt/data/ticks_late.jsonl`: out-of-order rows under a 2-second
//! watermark delay, then two rows far behind the watermark. One of them (`z`) has the
//! maximum of the window `[2 s, 4 s)`, so Flink joins it with that window's row whether or
//! not its aggregate counted it. The expected rows are Flink 2.3's (streaming mode).

use std::path::Path;
use std::time::Duration;

use spate_dataflow::JobConfig;
use spate_sql::{Outcome, Session};

const QUERY: &str = "SELECT B.k, B.v, B.ts, M.wend FROM ticks B JOIN (SELECT MAX(v) AS maxv, \
    window_end AS wend FROM TABLE(TUMBLE(TABLE ticks, DESCRIPTOR(ts), INTERVAL '2' SECOND)) \
    GROUP BY window_start, window_end) M ON B.v = M.maxv \
    WHERE B.ts BETWEEN M.wend - INTERVAL '2' SECOND AND M.wend";

const FLINK: &[&str] = &[
    r#"["a",4,"2024-01-01 00:00:13.740","2024-01-01 00:00:14.000"]"#,
    r#"["a",5,"2024-01-01 00:00:07.947","2024-01-01 00:00:08.000"]"#,
    r#"["a",6,"2024-01-01 00:00:16.003","2024-01-01 00:00:18.000"]"#,
    r#"["a",6,"2024-01-01 00:00:16.235","2024-01-01 00:00:18.000"]"#,
    r#"["a",6,"2024-01-01 00:00:17.658","2024-01-01 00:00:18.000"]"#,
    r#"["a",7,"2024-01-01 00:00:02.546","2024-01-01 00:00:04.000"]"#,
    r#"["a",7,"2024-01-01 00:00:24.577","2024-01-01 00:00:26.000"]"#,
    r#"["a",8,"2024-01-01 00:00:00.000","2024-01-01 00:00:02.000"]"#,
    r#"["a",9,"2024-01-01 00:00:21.239","2024-01-01 00:00:22.000"]"#,
    r#"["a",9,"2024-01-01 00:00:23.800","2024-01-01 00:00:24.000"]"#,
    r#"["b",2,"2024-01-01 00:00:29.732","2024-01-01 00:00:30.000"]"#,
    r#"["b",6,"2024-01-01 00:00:05.387","2024-01-01 00:00:06.000"]"#,
    r#"["b",7,"2024-01-01 00:00:10.196","2024-01-01 00:00:12.000"]"#,
    r#"["b",8,"2024-01-01 00:00:08.215","2024-01-01 00:00:10.000"]"#,
    r#"["b",8,"2024-01-01 00:00:09.641","2024-01-01 00:00:10.000"]"#,
    r#"["b",8,"2024-01-01 00:00:18.087","2024-01-01 00:00:20.000"]"#,
    r#"["b",8,"2024-01-01 00:00:31.204","2024-01-01 00:00:32.000"]"#,
    r#"["b",9,"2024-01-01 00:00:15.490","2024-01-01 00:00:16.000"]"#,
    r#"["b",9,"2024-01-01 00:00:26.596","2024-01-01 00:00:28.000"]"#,
    r#"["z",7,"2024-01-01 00:00:02.500","2024-01-01 00:00:04.000"]"#,
];

fn session(config: JobConfig) -> Session {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt/data/ticks_late.jsonl");
    let mut session = Session::new(config);
    session
        .execute_script(&format!(
            "CREATE TABLE ticks (k STRING, v INT, ts TIMESTAMP(3), \
             WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) \
             WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');",
            data.display()
        ))
        .unwrap();
    session
}

#[test]
fn a_time_bounded_join_drops_rows_and_keeps_flinks_results() {
    // The plan drops a row of the left side 2 s - 2 ms + 1 ms after its `ts`: when the
    // watermark is there, every window ending by `ts + 2 s` has been emitted.
    let explained = match session(JobConfig::local(1))
        .execute_script(&format!("EXPLAIN {QUERY};"))
        .unwrap()
        .pop()
    {
        Some(Outcome::Info(text)) => text,
        other => panic!("EXPLAIN gives its plan, not {other:?}"),
    };
    assert!(
        explained.contains("left-expires=`ts`+1999ms"),
        "{explained}"
    );
    // Every row its own batch and watermark: the late rows arrive after the rows they could
    // have met were dropped from the left side, and still meet the kept window rows.
    let row_by_row = JobConfig {
        poll_batch: 1,
        epoch_max_records: 1,
        auto_watermark_interval: Duration::ZERO,
        ..JobConfig::local(1)
    };
    for (what, config) in [
        ("whole batches", JobConfig::local(1)),
        ("row by row", row_by_row),
    ] {
        let rows = session(config).query(QUERY).unwrap().final_rows();
        assert_eq!(rows, FLINK, "{what}");
    }
}
