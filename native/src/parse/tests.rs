use std::sync::Arc;

use super::*;
use crate::conventions::Conventions;
use crate::model::{key, STAGES};
use crate::testing::{attribute, line, span, span_id, text, EPOCH, TRACE};

fn parse(text: &str) -> (Vec<Parsed>, Result<(), LineError>) {
    let mut out = Vec::new();
    let result = parse_document(text.as_bytes(), &mut out);
    (out, result)
}

fn json_detail(result: Result<(), LineError>) -> String {
    match result {
        Err(LineError::Json(detail)) => detail,
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

#[test]
fn a_line_yields_its_spans_with_their_service() {
    let request = span("1", None, "request", (0, 10), &[]);
    let retrieval = span(
        "2",
        Some("1"),
        "retrieve",
        (1, 5),
        &[text("llmtrace.stage", "retrieval")],
    );
    let (out, result) = parse(&line("api", &[request, retrieval]));
    result.unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].trace_id.format(32), TRACE);
    let (root, child) = (&out[0].span, &out[1].span);
    assert_eq!(root.span_id.format(16), span_id("1"));
    assert_eq!(root.parent, None);
    assert_eq!(child.parent, Some(Id::span(&span_id("1"))));
    assert_eq!(&*child.name, "retrieve");
    assert_eq!(
        (child.start, child.end),
        (EPOCH + 1_000_000, EPOCH + 5_000_000)
    );
    assert_eq!(child.text(key::STAGE), Some("retrieval"));
    assert_eq!(child.service.as_deref(), Some("api"));
    assert_eq!(child.family, NO_FAMILY);
}

#[test]
fn ids_may_be_base64_kinds_names_and_times_numbers() {
    let document = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{
        "traceId":"CvdlGRbNQ92ESOshHIAxnA==","spanId":"APBnqgupArc=","parentSpanId":"",
        "kind":"SPAN_KIND_SERVER","startTimeUnixNano":5,"endTimeUnixNano":"7"}]}]}]}"#;
    let (out, result) = parse(document);
    result.unwrap();
    assert_eq!(out[0].trace_id, Id::trace(TRACE));
    let span = &out[0].span;
    assert_eq!(span.span_id.format(16), "00f067aa0ba902b7");
    assert_eq!(span.parent, None);
    assert_eq!(span.kind, crate::model::KIND_SERVER);
    assert_eq!((span.start, span.end), (5, 7));
    assert_eq!(span.service, None);
}

#[test]
fn a_resource_written_after_its_spans_still_names_their_service() {
    let document = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}],"resource":{{"attributes":[{}]}}}}]}}"#,
        span("1", None, "request", (0, 1), &[]),
        text("service.name", "late"),
    );
    let (out, result) = parse(&document);
    result.unwrap();
    assert_eq!(out[0].span.service.as_deref(), Some("late"));
}

#[test]
fn text_that_is_not_json_adds_nothing_and_keeps_what_was_read() {
    let mut out = Vec::new();
    let first = line("api", &[span("1", None, "request", (0, 1), &[])]);
    parse_document(first.as_bytes(), &mut out).unwrap();
    let error = parse_document(b"{\"resourceSpans\": [", &mut out).unwrap_err();
    assert!(matches!(error, LineError::Json(_)));
    assert!(
        error.message().starts_with("not valid JSON ("),
        "{}",
        error.message()
    );
    assert_eq!(out.len(), 1);
}

#[test]
fn json_without_resource_spans_is_not_otlp() {
    for document in [r#"{}"#, r#"{"resourceSpans":null}"#, r#"{"spans":[]}"#] {
        let (out, result) = parse(document);
        let error = result.unwrap_err();
        assert_eq!(
            error.message(),
            "not OTLP trace data (no resourceSpans in this JSON object)",
            "{document}"
        );
        assert!(out.is_empty());
    }
    // an empty list of resource spans is OTLP, with no spans
    let (out, result) = parse(r#"{"resource_spans":[]}"#);
    result.unwrap();
    assert!(out.is_empty());
}

#[test]
fn spans_before_an_otlp_problem_are_kept_but_not_before_a_json_one() {
    let good = span("1", None, "request", (0, 1), &[]);
    let otlp_problem =
        format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{good},7]}}]}}]}}"#);
    let (out, result) = parse(&otlp_problem);
    assert!(matches!(result, Err(LineError::Otlp(_))));
    assert_eq!(out.len(), 1);

    // the same, then text that is not JSON: orjson would not have read the line at all
    let (out, result) = parse(&format!("{otlp_problem} x"));
    assert!(matches!(result, Err(LineError::Json(_))));
    assert!(out.is_empty());
}

#[test]
fn a_resource_that_is_not_an_object_drops_its_spans() {
    let spans = span("1", None, "request", (0, 1), &[]);
    let with_resource = |resource: &str| {
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}],"resource":{resource}}}]}}"#
        )
    };
    let (out, result) = parse(&with_resource("5"));
    assert!(matches!(result, Err(LineError::Otlp(_))));
    assert!(out.is_empty());
    // empty, as Python tests it: no service, spans kept
    for empty in ["null", "0", "\"\"", "[]", "{}"] {
        let (out, result) = parse(&with_resource(empty));
        result.unwrap();
        assert_eq!(out.len(), 1, "{empty}");
        assert_eq!(out[0].span.service, None);
    }
}

#[test]
fn too_deep_a_line_is_refused_in_orjsons_words() {
    let deep = format!("{}{}", "[".repeat(1025), "]".repeat(1025));
    let (out, result) = parse(&deep);
    assert_eq!(json_detail(result), "depth limit exceeded at column 1026");
    assert!(out.is_empty());
}

#[test]
fn lone_surrogates_are_refused_even_in_fields_not_read() {
    let (_, result) = parse(r#"{"resourceSpans":[],"note":"\ud800"}"#);
    assert_eq!(
        json_detail(result),
        "no low surrogate in string at column 29"
    );
    let (_, result) = parse(r#"{"resourceSpans":[],"note":"\udc00"}"#);
    assert_eq!(
        json_detail(result),
        "invalid high surrogate in string at column 29"
    );
    let (_, result) = parse(r#"{"resourceSpans":[],"note":"\ud800\u0041"}"#);
    assert_eq!(
        json_detail(result),
        "invalid low surrogate in string at column 29"
    );
    // a pair, and an escaped backslash before "u", are text like any other
    parse(r#"{"resourceSpans":[],"note":"\ud83d\ude00"}"#)
        .1
        .unwrap();
    parse(r#"{"resourceSpans":[],"note":"\\ud800"}"#).1.unwrap();
}

#[test]
fn jaegers_result_wrapper_is_the_only_document_that_counts() {
    let outer = span("1", None, "outer", (0, 1), &[]);
    let inner = line("wrapped", &[span("2", None, "inner", (0, 1), &[])]);
    let document = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{outer}]}}]}}],"result":{inner}}}"#
    );
    let (out, result) = parse(&document);
    result.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(&*out[0].span.name, "inner");
    assert_eq!(out[0].span.service.as_deref(), Some("wrapped"));
}

#[test]
fn documents_back_to_back_are_read_all_or_nothing() {
    let first = line("api", &[span("1", None, "first", (0, 1), &[])]);
    let second = line("api", &[span("2", None, "second", (0, 1), &[])]);
    let mut out = Vec::new();
    parse_stream(format!("\n  {first}{second}\n\n").as_bytes(), &mut out).unwrap();
    assert_eq!(out.len(), 2);

    let mut out = Vec::new();
    let error = parse_stream(format!("{first} {{}}").as_bytes(), &mut out).unwrap_err();
    assert!(matches!(error, LineError::Otlp(_)));
    assert!(out.is_empty());

    let error = parse_stream(format!("{first} x").as_bytes(), &mut out).unwrap_err();
    assert_eq!(error.message(), "not valid JSON (not a JSON object)");
    parse_stream(b" \r\n\t", &mut out).unwrap();
    assert!(out.is_empty());
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// A stage rule with one condition: `key` is one of `values`.
fn rule(
    stage: Option<&str>,
    key: &str,
    values: &[&str],
) -> (Option<String>, Vec<(String, Vec<String>)>) {
    (
        stage.map(str::to_string),
        vec![(key.to_string(), strings(values))],
    )
}

/// A small table in the shape `conventions.native_table()` hands over.
fn table() -> Arc<Conventions> {
    let rules = vec![
        rule(Some("retrieval"), "db.system", &["qdrant"]),
        rule(None, "gen_ai.operation.name", &["invoke_agent"]),
        rule(Some("ttft"), "gen_ai.operation.name", &["chat"]),
    ];
    let events = strings(&["gen_ai.first_token"]);
    let families = vec![(
        "openlit".to_string(),
        strings(&["openlit."]),
        strings(&["db.system"]),
    )];
    let table = Conventions::new((rules, Vec::new(), events, families));
    Arc::new(table.expect("a valid table"))
}

fn parse_with_table(text: &str) -> Vec<Parsed> {
    let mut out = Vec::new();
    crate::conventions::with(&table(), || parse_document(text.as_bytes(), &mut out)).unwrap();
    out
}

#[test]
fn the_conventions_table_gives_stages_to_spans_without_one() {
    let spans = [
        span(
            "1",
            None,
            "qdrant.search",
            (0, 1),
            &[text("db.system", "qdrant")],
        ),
        span(
            "2",
            None,
            "agent",
            (0, 1),
            &[text("gen_ai.operation.name", "invoke_agent")],
        ),
        span("3", None, "mystery", (0, 1), &[text("db.system", "sqlite")]),
        span(
            "4",
            None,
            "declared",
            (0, 1),
            &[text("llmtrace.stage", "tool"), text("db.system", "qdrant")],
        ),
    ];
    let out = parse_with_table(&line("api", &spans));
    let stages: Vec<Option<&str>> = out.iter().map(|p| p.span.text(key::STAGE)).collect();
    assert_eq!(stages, [Some("retrieval"), None, None, Some("tool")]);
    let unassigned: Vec<bool> = out.iter().map(|p| p.span.unassigned).collect();
    assert_eq!(unassigned, [false, false, true, false]);
    // db.system, a key of the family, names it; the agent span carries none of its keys
    let families: Vec<u8> = out.iter().map(|p| p.span.family).collect();
    assert_eq!(families, [0, NO_FAMILY, 0, 0]);
}

#[test]
fn a_scope_the_table_knows_names_the_family_of_all_its_spans() {
    let document = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}],"scope":{{"name":"openlit.otel.tracing"}}}},{{"scope":{{"name":"other"}},"spans":[{}]}}]}}]}}"#,
        span("1", None, "before the scope", (0, 1), &[]),
        span("2", None, "another scope", (0, 1), &[]),
    );
    let out = parse_with_table(&document);
    assert_eq!(out[0].span.family, 0);
    assert_eq!(out[1].span.family, NO_FAMILY);
}

#[test]
fn a_first_token_event_makes_an_inferred_model_call_its_time() {
    let first_token_at = EPOCH + 250_000_000;
    let chat = span(
        "1",
        None,
        "chat",
        (0, 1000),
        &[text("gen_ai.operation.name", "chat")],
    );
    let events = format!(
        r#","events":[7,{{"name":"other","timeUnixNano":"1"}},{{"name":"gen_ai.first_token","timeUnixNano":"{first_token_at}"}}]}}"#
    );
    let chat = chat.strip_suffix('}').unwrap().to_string() + &events;
    let out = parse_with_table(&line("api", &[chat]));
    let call = &out[0].span;
    assert_eq!(
        call.text(key::STAGE),
        Some(STAGES[crate::model::TTFT as usize])
    );
    assert!(call.inferred_call);
    assert_eq!(call.seconds(key::TIME_TO_FIRST_CHUNK), Some(0.25));
}

#[test]
fn an_attribute_only_the_table_reads_is_not_kept() {
    let spans = [span(
        "1",
        None,
        "qdrant.search",
        (0, 1),
        &[
            text("db.system", "qdrant"),
            attribute("http.url", r#"{"stringValue":"x"}"#),
        ],
    )];
    let out = parse_with_table(&line("api", &spans));
    // llmtrace.stage, added by the rule; db.system and http.url are not the analysis's
    let keys: Vec<u8> = out[0].span.attrs.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, [key::STAGE]);
}
