use super::*;
use crate::model::STAGES;
use crate::store::Store;
use crate::testing::{assembled, flag, seconds, span, span_of, text};

fn collected(store: &Store, run: Option<&str>) -> Collected {
    let traces = store
        .selected
        .iter()
        .enumerate()
        .map(|(i, s)| (i, &store.groups[s.group as usize], s.root));
    collect(traces, run)
}

/// A trace's stages in the order the critical path meets them, in whole milliseconds.
fn stage_milliseconds(row: &TraceRow) -> Vec<(&'static str, i64)> {
    row.stages
        .iter()
        .map(|(stage, s)| (STAGES[*stage as usize], (s * 1e3).round() as i64))
        .collect()
}

fn stage(name: &str) -> String {
    text("llmtrace.stage", name)
}

#[test]
fn parallel_retrievals_count_only_the_critical_path() {
    let store = assembled(&[
        span("1", None, "request", (0, 1000), &[]),
        span(
            "2",
            Some("1"),
            "search a",
            (100, 400),
            &[stage("retrieval")],
        ),
        span(
            "3",
            Some("1"),
            "search b",
            (100, 600),
            &[stage("retrieval")],
        ),
        span(
            "4",
            Some("1"),
            "chat",
            (600, 1000),
            &[stage("ttft"), seconds("llmtrace.time_to_first_token", 0.1)],
        ),
    ]);
    let result = collected(&store, None);
    let row = &result.rows[0];
    assert_eq!(
        stage_milliseconds(row),
        [
            ("other", 100),
            ("retrieval", 500),
            ("ttft", 100),
            ("generation", 300)
        ]
    );
    assert_eq!(row.duration, 1.0);
    // the root's own time is "other", by span name
    assert_eq!(result.unclaimed, [("request".to_string(), 0.1)]);
    let call = &result.sink.model_calls[0];
    assert_eq!(call.time_to_first_token, Some(0.1));
    assert_eq!(call.streamed, Some(true));
    assert!((call.generation_time.unwrap() - 0.3).abs() < 1e-9);
}

#[test]
fn time_no_child_covers_is_the_parents_and_unstaged_children_inherit_its_stage() {
    let store = assembled(&[
        span("1", None, "retrieve", (0, 500), &[stage("retrieval")]),
        span("2", Some("1"), "embed", (100, 200), &[stage("embedding")]),
        span("3", Some("1"), "http", (300, 400), &[]),
    ]);
    let result = collected(&store, None);
    assert_eq!(
        stage_milliseconds(&result.rows[0]),
        [("retrieval", 400), ("embedding", 100)]
    );
    assert!(result.unclaimed.is_empty());
}

#[test]
fn server_timings_split_a_model_calls_wait_into_network_queue_and_ttft() {
    let store = assembled(&[span(
        "1",
        None,
        "chat",
        (0, 1000),
        &[
            stage("ttft"),
            seconds("llmtrace.time_to_first_token", 0.4),
            seconds("llmtrace.server.time_to_first_token", 0.3),
            seconds("llmtrace.server.queue_time", 0.05),
            text("gen_ai.request.model", "small"),
        ],
    )]);
    let result = collected(&store, None);
    assert_eq!(
        stage_milliseconds(&result.rows[0]),
        [
            ("network", 100),
            ("queue", 50),
            ("ttft", 250),
            ("generation", 600)
        ]
    );
    let call = &result.sink.model_calls[0];
    assert_eq!(call.model, "small");
    assert!(call.server_joined);
    assert!((call.network - 0.1).abs() < 1e-9);
    assert_eq!(call.queue, 0.05);
}

#[test]
fn warmup_requests_and_other_runs_are_left_out() {
    let root = |trace: &str, attributes: &[String]| {
        span_of(trace, "1", None, "request", (0, 10), attributes)
    };
    let store = assembled(&[
        root(
            &format!("{:032x}", 1),
            &[
                text("llmtrace.bench.run", "r1"),
                flag("llmtrace.bench.warmup", true),
            ],
        ),
        root(&format!("{:032x}", 2), &[text("llmtrace.bench.run", "r1")]),
        root(&format!("{:032x}", 3), &[text("llmtrace.bench.run", "r2")]),
    ]);
    let result = collected(&store, Some("r1"));
    assert_eq!(result.excluded_warmup, 1);
    let chosen: Vec<usize> = result.rows.iter().map(|row| row.selected).collect();
    assert_eq!(chosen, [1]);
    assert_eq!(result.rows[0].facts.bench_run.as_deref(), Some("r1"));
    assert_eq!(collected(&store, None).rows.len(), 2);
}

#[test]
fn pythons_max_and_min_keep_the_first_argument_against_nan() {
    assert!(py_max(f64::NAN, 1.0).is_nan());
    assert_eq!(py_max(1.0, f64::NAN), 1.0);
    assert!(py_min(f64::NAN, 1.0).is_nan());
    assert_eq!(or_else(Some(0.0), 2.0), 2.0);
    assert_eq!(or_else(Some(-1.0), 2.0), -1.0);
}

/// LangGraph's `call_model` recorded beside the model's chain it started (OpenInference,
/// OpenLLMetry): a stage-less leaf, ending last, that the chain covers almost wholly.
fn wrapper_beside_the_chain(wrapper: (i64, i64), chain: (i64, i64)) -> Store {
    assembled(&[
        span("1", None, "LangGraph", (0, 1000), &[]),
        span("2", Some("1"), "agent", (10, 990), &[]),
        span("3", Some("2"), "call_model", wrapper, &[]),
        span("4", Some("2"), "RunnableSequence", chain, &[]),
        span(
            "5",
            Some("4"),
            "chat",
            (chain.0 + 5, chain.1 - 5),
            &[stage("ttft"), seconds("llmtrace.time_to_first_token", 0.3)],
        ),
        span("6", Some("2"), "should_continue", (970, 980), &[]),
    ])
}

#[test]
fn a_stage_less_leaf_a_sibling_covers_almost_wholly_is_passed_over_for_it() {
    let store = wrapper_beside_the_chain((20, 960), (25, 955));
    let result = collected(&store, None);
    assert_eq!(
        stage_milliseconds(&result.rows[0]),
        [("other", 80), ("ttft", 300), ("generation", 620)]
    );
    // the wrapper's uncovered instants are its parent's own time
    assert!(!result
        .unclaimed
        .iter()
        .any(|(name, _)| name == "call_model"));
}

#[test]
fn nine_tenths_covered_is_enough_and_less_is_not() {
    // the chain covers 846 of the wrapper's 940 ms (90%): passed over
    let store = wrapper_beside_the_chain((20, 960), (57, 903));
    assert_eq!(
        stage_milliseconds(&collected(&store, None).rows[0]),
        [("other", 164), ("ttft", 300), ("generation", 536)]
    );
    // 845 of 940 ms: the wrapper ended last, and it takes its stretch
    let store = wrapper_beside_the_chain((20, 960), (57, 902));
    assert_eq!(
        stage_milliseconds(&collected(&store, None).rows[0]),
        [("other", 1000)]
    );
}

#[test]
fn only_a_sibling_with_a_stage_or_spans_under_it_explains_a_wrapper() {
    let beside = |sibling: Vec<String>| {
        let mut spans = vec![
            span("1", None, "request", (0, 100), &[]),
            span("2", Some("1"), "wrapper", (0, 100), &[stage("other")]),
        ];
        spans.extend(sibling);
        collected(&assembled(&spans), None)
    };
    let staged = beside(vec![span(
        "3",
        Some("1"),
        "search",
        (2, 99),
        &[stage("retrieval")],
    )]);
    assert_eq!(
        stage_milliseconds(&staged.rows[0]),
        [("other", 3), ("retrieval", 97)]
    );
    // a stage-less leaf explains no more than the wrapper does
    let bare = beside(vec![span("3", Some("1"), "step", (2, 99), &[])]);
    assert_eq!(stage_milliseconds(&bare.rows[0]), [("other", 100)]);
    assert_eq!(bare.unclaimed, [("wrapper".to_string(), 0.1)]);
}

#[test]
fn a_stage_less_span_with_spans_under_it_keeps_its_stretch() {
    let store = assembled(&[
        span("1", None, "request", (0, 100), &[]),
        span("2", Some("1"), "wrapper", (0, 100), &[]),
        span("3", Some("2"), "format", (90, 100), &[stage("postprocess")]),
        span("4", Some("1"), "search", (2, 99), &[stage("retrieval")]),
    ]);
    assert_eq!(
        stage_milliseconds(&collected(&store, None).rows[0]),
        [("other", 90), ("postprocess", 10)]
    );
}

/// A span of another kind than INTERNAL (`testing::span` writes kind 1).
fn of_kind(kind: u8, span: String) -> String {
    span.replacen(r#""kind":1"#, &format!(r#""kind":{kind}"#), 1)
}

#[test]
fn a_service_llmtrace_does_not_see_is_its_own_time_and_the_hop_is_placed_by_durations() {
    // gateway: root 0-400, its network span 5-395; the orchestrator (no stage, its clock 3 s
    // ahead) 3010-3390 with its own HTTP client span 3270-3385; the RAG service 275-380
    let gateway = [
        of_kind(2, span("1", None, "POST /ask", (0, 400), &[stage("other")])),
        of_kind(
            3,
            span("2", Some("1"), "POST", (5, 395), &[stage("network")]),
        ),
    ];
    let orchestrator = [
        of_kind(2, span("3", Some("2"), "POST /answer", (3010, 3390), &[])),
        of_kind(3, span("4", Some("3"), "POST", (3270, 3385), &[])),
    ];
    let rag = [
        of_kind(
            2,
            span("5", Some("4"), "POST /rag", (275, 380), &[stage("other")]),
        ),
        span("6", Some("5"), "search", (280, 330), &[stage("retrieval")]),
    ];
    let mut store = Store::default();
    for (service, spans) in [
        ("gateway", &gateway[..]),
        ("orchestrator", &orchestrator[..]),
        ("rag", &rag[..]),
    ] {
        store
            .read_answer(crate::testing::line(service, spans).as_bytes(), true)
            .expect("OTLP trace data");
    }
    store.assemble(&crate::store::Filters::default());
    let result = collected(&store, None);
    let row = &result.rows[0];
    let mut stages = stage_milliseconds(row);
    stages.sort();
    // gateway 10 + orchestrator 265 + RAG 5 + 50 of other; 10 of network per hop
    assert_eq!(stages, [("network", 20), ("other", 330), ("retrieval", 50)]);
    let orchestrator_time: f64 = row
        .services
        .iter()
        .filter(|(service, stage, _)| service.as_deref() == Some("orchestrator") && *stage == OTHER)
        .map(|(_, _, seconds)| seconds)
        .sum();
    assert_eq!((orchestrator_time * 1e3).round() as i64, 265);
}
