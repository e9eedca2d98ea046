use super::*;
use crate::model::intern;

fn alias(target: &str, source: &str, kind: &str, field: &str) -> (String, String, String, String) {
    (target.into(), source.into(), kind.into(), field.into())
}

fn with_aliases(aliases: Vec<(String, String, String, String)>) -> Result<Conventions, String> {
    Conventions::new((Vec::new(), aliases, Vec::new(), Vec::new()))
}

#[test]
fn iso_timestamps_are_read_to_the_nanosecond() {
    let cases = [
        (
            "2024-02-29T12:34:56.123456789Z",
            Some(1_709_210_096_123_456_789),
        ),
        ("2024-02-29T12:34:56+05:30", Some(1_709_190_296_000_000_000)),
        ("1969-12-31T23:59:59", Some(-1_000_000_000)),
        ("2000-01-01 00:00:00", Some(946_684_800_000_000_000)),
        ("\"2000-01-01T00:00:00Z\"", Some(946_684_800_000_000_000)),
        // digits past nanoseconds are ignored
        (
            "2000-01-01T00:00:00.1234567891Z",
            Some(946_684_800_123_456_789),
        ),
        ("2023-02-29T00:00:00Z", None),
        ("2024-13-01T00:00:00", None),
        ("2024-01-01T24:00:00", None),
        ("2024-01-01T00:00:00.", None),
        ("2024-01-01T00:00:00+0530", None),
        ("2024-01-01", None),
    ];
    for (text, expected) in cases {
        assert_eq!(iso_nanos(text), expected, "{text}");
    }
}

#[test]
fn aliases_fill_the_attributes_the_analysis_reads_from_others() {
    let table = with_aliases(vec![
        alias("gen_ai.request.model", "llm.model_name", "value", ""),
        alias(
            "llmtrace.time_to_first_token",
            "completion_start_time",
            "iso_time",
            "",
        ),
        alias(
            "gen_ai.usage.input_tokens",
            "llm.usage",
            "json_field",
            "prompt_tokens",
        ),
        alias(
            "gen_ai.usage.output_tokens",
            "llm.usage",
            "json_field",
            "completion_tokens",
        ),
    ])
    .unwrap();
    let slot = |name: &str| table.table_key(name).expect("a key the table reads");
    let start = iso_nanos("2024-01-01T00:00:00Z").unwrap();
    let mut span = SpanAttributes {
        kept: vec![(key::REQUEST_MODEL, Value::Str(intern("already")))],
        table: vec![
            (slot("llm.model_name"), Value::Str(intern("aliased"))),
            (
                slot("completion_start_time"),
                Value::Str(intern("2024-01-01T00:00:00.25Z")),
            ),
            (
                slot("llm.usage"),
                Value::Str(intern(
                    r#"{"prompt_tokens": 12, "completion_tokens": 1.5e40}"#,
                )),
            ),
        ],
    };
    // no stage rule: the span stays unassigned, its aliases filled all the same
    assert_eq!(table.normalize(&mut span, None, start), None);
    assert_eq!(
        span.kept,
        [
            // an alias never replaces the attribute itself
            (key::REQUEST_MODEL, Value::Str(intern("already"))),
            (key::TIME_TO_FIRST_TOKEN, Value::Float(0.25)),
            (key::INPUT_TOKENS, Value::Int(12)),
            (key::OUTPUT_TOKENS, Value::Float(1.5e40)),
        ]
    );
}

#[test]
fn a_table_naming_what_the_analysis_does_not_know_is_refused() {
    let unknown_stage = Conventions::new((
        vec![(Some("warp".to_string()), Vec::new())],
        Vec::new(),
        Vec::new(),
        Vec::new(),
    ));
    assert_eq!(
        unknown_stage.err(),
        Some(r#"unknown stage "warp""#.to_string())
    );
    let unread_target = with_aliases(vec![alias("http.url", "url", "value", "")]);
    assert_eq!(
        unread_target.err(),
        Some(r#""http.url" is not an attribute the analysis reads"#.to_string())
    );
    let unknown_kind = with_aliases(vec![alias("gen_ai.request.model", "m", "guess", "")]);
    assert_eq!(
        unknown_kind.err(),
        Some(r#"unknown alias kind "guess""#.to_string())
    );
}

#[test]
fn a_scope_belongs_to_the_first_family_whose_prefix_it_starts_with() {
    let families = vec![
        (
            "openlit".to_string(),
            vec!["openlit.".to_string()],
            Vec::new(),
        ),
        (
            "openllmetry".to_string(),
            vec!["opentelemetry.instrumentation.".to_string()],
            Vec::new(),
        ),
    ];
    let table = Conventions::new((Vec::new(), Vec::new(), Vec::new(), families)).unwrap();
    assert_eq!(table.scope_family("openlit.otel.tracing"), Some(0));
    assert_eq!(
        table.scope_family("opentelemetry.instrumentation.openai"),
        Some(1)
    );
    assert_eq!(table.scope_family("openlit"), None);
    assert_eq!(table.scope_family(""), None);
}
