use std::io::Write;
use std::path::PathBuf;

use super::*;
use crate::testing::{assembled, line, span, span_id, span_of, EPOCH, TRACE};

/// A file of this test process, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, contents: &[u8]) -> TempFile {
        let path =
            std::env::temp_dir().join(format!("llmtrace-native-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).expect("a temporary file");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn one_span(id: &str) -> String {
    line("app", &[span(id, None, "request", (0, 1), &[])])
}

fn span_count(store: &Store) -> usize {
    store.groups.iter().map(|g| g.spans.len()).sum()
}

#[test]
fn problems_name_the_line_counting_blank_ones() {
    let data = format!(
        "{}\n\n{{oops\n \x0b\t\n[1]\n{}",
        one_span("1"),
        one_span("2")
    );
    let mut store = Store::default();
    let (mut line, mut warnings) = (0, Vec::new());
    store.read_lines(data.as_bytes(), "traces.jsonl", &mut line, &mut warnings);
    assert_eq!(line, 6);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("traces.jsonl:3: not valid JSON ("),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with("traces.jsonl:5: not OTLP trace data ("),
        "{}",
        warnings[1]
    );
    assert_eq!(span_count(&store), 2);

    // the next block goes on counting; a final newline ends a line, it does not start one
    store.read_lines(b"{oops\n", "traces.jsonl", &mut line, &mut warnings);
    assert_eq!(line, 7);
    assert!(
        warnings[2].starts_with("traces.jsonl:7: "),
        "{}",
        warnings[2]
    );
}

#[test]
fn problems_stop_being_reported_after_the_first_ones() {
    let data = "x\n".repeat(3 * MAX_WARNINGS);
    let file = TempFile::new("many-problems.jsonl", data.as_bytes());
    let warnings = Store::default().read_file(file.path(), false);
    assert_eq!(warnings.len(), MAX_WARNINGS);
    let last = format!("{}:{MAX_WARNINGS}: not valid JSON", file.path());
    assert!(warnings[MAX_WARNINGS - 1].starts_with(&last));
}

#[test]
fn a_file_that_cannot_be_opened_is_one_problem() {
    let warnings = Store::default().read_file("/nonexistent/traces.jsonl", false);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("/nonexistent/traces.jsonl: cannot read ("),
        "{}",
        warnings[0]
    );
}

#[test]
fn gzip_members_and_the_zero_padding_between_them_are_read() {
    let mut data = gzip(format!("{}\n", one_span("1")).as_bytes());
    data.extend_from_slice(&[0; 10]);
    data.extend(gzip(format!("{}\n", one_span("2")).as_bytes()));
    data.extend_from_slice(&[0; 3]);
    let file = TempFile::new("members.jsonl.gz", &data);
    let mut store = Store::default();
    assert_eq!(store.read_file(file.path(), false), Vec::<String>::new());
    assert_eq!(span_count(&store), 2);
}

#[test]
fn a_gzip_file_cut_short_keeps_its_complete_lines() {
    // the second line long and unlike the first: cutting the end of the file cuts into it
    let long_name = (0..200).map(|n| format!("{n:x}")).collect::<String>();
    let second = line("app", &[span("2", None, &long_name, (0, 1), &[])]);
    let text = format!("{}\n{second}\n", one_span("1"));
    let data = gzip(text.as_bytes());
    // the trailer (CRC and size) and the end of the second line cut off
    let file = TempFile::new("cut.jsonl.gz", &data[..data.len() - 20]);
    let mut store = Store::default();
    let warnings = store.read_file(file.path(), false);
    assert_eq!(
        warnings,
        [format!(
            "{}: cannot read (Compressed file ended before the end-of-stream marker was reached)",
            file.path()
        )]
    );
    assert_eq!(span_count(&store), 1);
}

#[test]
fn bytes_after_a_gzip_member_that_start_no_other_are_named() {
    let mut data = gzip(format!("{}\n", one_span("1")).as_bytes());
    data.extend_from_slice(b"PK\x03\x04");
    let file = TempFile::new("trailing.jsonl.gz", &data);
    let warnings = Store::default().read_file(file.path(), false);
    assert_eq!(
        warnings,
        [format!(
            "{}: cannot read (Not a gzipped file (b'PK'))",
            file.path()
        )]
    );
}

#[test]
fn bytes_print_as_pythons_repr() {
    assert_eq!(python_bytes(b"\x1f\x00"), r"b'\x1f\x00'");
    assert_eq!(python_bytes(b"'a"), r#"b"'a""#);
    assert_eq!(python_bytes(b"\\\n"), r"b'\\\n'");
}

#[test]
fn a_whole_document_may_span_lines_or_be_read_line_by_line() {
    let pretty = one_span("1").replace(',', ",\n  ");
    let file = TempFile::new("pretty.json", pretty.as_bytes());
    let mut store = Store::default();
    assert_eq!(store.read_file(file.path(), true), Vec::<String>::new());
    assert_eq!(span_count(&store), 1);

    // not one document: its lines are read as lines, with their numbers
    let lines = format!("{}\n{{oops\n", one_span("2"));
    let file = TempFile::new("lines.json", lines.as_bytes());
    let mut store = Store::default();
    let warnings = store.read_file(file.path(), true);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].starts_with(&format!("{}:2: ", file.path())));
    assert_eq!(span_count(&store), 1);
}

#[test]
fn a_jaeger_answer_names_its_traces_in_the_order_met() {
    let other = "00000000000000000000000000000abc";
    let answer = line(
        "app",
        &[
            span_of(other, "1", None, "a", (0, 1), &[]),
            span("2", None, "b", (0, 1), &[]),
            span_of(other, "3", Some("1"), "c", (0, 1), &[]),
        ],
    );
    let mut store = Store::default();
    assert_eq!(
        store.read_answer(answer.as_bytes(), false).unwrap(),
        [other, TRACE]
    );
    assert!(store.groups.is_empty());
    let error = store.read_answer(b"{}", true).unwrap_err();
    assert_eq!(
        error,
        "not OTLP trace data (no resourceSpans in this JSON object)"
    );
}

#[test]
fn linking_drops_repeated_spans_and_finds_roots_and_orphans() {
    let store = assembled(&[
        span("1", None, "root", (0, 10), &[]),
        span("2", Some("1"), "child", (1, 2), &[]),
        span("2", Some("1"), "child again", (1, 2), &[]),
        span("3", Some("1"), "still open", (3, 0), &[]),
        span("5", Some("4"), "orphan", (4, 6), &[]),
    ]);
    let group = &store.groups[0];
    assert_eq!(group.spans.len(), 4);
    let names: Vec<&str> = group
        .children(0)
        .iter()
        .map(|&c| &*group.span(c).name)
        .collect();
    assert_eq!(names, ["child", "still open"]);
    // a child still open claims no time
    let open = group.span(group.children(0)[1]);
    assert_eq!(open.end, open.start);
    let chosen: Vec<(u32, bool)> = store.selected.iter().map(|s| (s.root, s.orphan)).collect();
    assert_eq!(chosen, [(0, false), (3, true)]);
}

#[test]
fn open_roots_are_left_out_and_counted() {
    let store = assembled(&[span("1", None, "open", (5, 0), &[])]);
    assert!(store.selected.is_empty());
    assert_eq!(store.excluded_open, 1);
}

#[test]
fn filters_choose_traces_by_id_time_and_the_latest_within_a_limit() {
    let traces: Vec<String> = (1..=4)
        .map(|n| {
            let trace = format!("{n:032x}");
            span_of(&trace, "1", None, "root", (n * 100, n * 100 + 10), &[])
        })
        .collect();
    let mut store = Store::default();
    store
        .read_answer(line("app", &traces).as_bytes(), true)
        .unwrap();
    fn chosen(store: &mut Store, filters: &Filters) -> Vec<String> {
        store.assemble(filters);
        let group = |s: &Selected| &store.groups[s.group as usize];
        store
            .selected
            .iter()
            .map(|s| group(s).trace_id.format(32))
            .collect()
    }
    let third = format!("{:032x}", 3);
    let by_id = Filters {
        trace_id: Some(&third),
        ..Filters::default()
    };
    assert_eq!(chosen(&mut store, &by_id), [third.as_str()]);
    let window = Filters {
        since: Some(EPOCH + 200_000_000),
        until: Some(EPOCH + 400_000_000),
        ..Filters::default()
    };
    assert_eq!(
        chosen(&mut store, &window),
        [format!("{:032x}", 2), third.clone()]
    );
    let latest = Filters {
        limit: Some(2),
        ..Filters::default()
    };
    assert_eq!(chosen(&mut store, &latest), [third, format!("{:032x}", 4)]);
}

#[test]
fn a_service_filter_keeps_traces_it_took_part_in() {
    let mut store = Store::default();
    let api = line("api", &[span("1", None, "root", (0, 10), &[])]);
    let db = line("db", &[span("2", Some("1"), "query", (1, 2), &[])]);
    store
        .read_answer(format!("{api}{db}").as_bytes(), true)
        .unwrap();
    for (service, count) in [("db", 1), ("api", 1), ("cache", 0)] {
        store.assemble(&Filters {
            service: Some(service),
            ..Filters::default()
        });
        assert_eq!(store.selected.len(), count, "{service}");
    }
    assert_eq!(store.groups[0].span(0).span_id.format(16), span_id("1"));
}
