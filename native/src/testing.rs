//! Trace file lines written by hand for the unit tests: a span is a few fields, a line is
//! OTLP JSON as exporters write it.

use crate::store::{Filters, Store};

/// The trace every helper writes into unless told otherwise.
pub const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
/// Span times are milliseconds after this instant (unix nanoseconds).
pub const EPOCH: i64 = 1_700_000_000_000_000_000;

/// A span id from a short hex name: "a1" is 00000000000000a1.
pub fn span_id(name: &str) -> String {
    format!("{name:0>16}")
}

/// An attribute whose value is the `AnyValue` JSON given.
pub fn attribute(key: &str, any_value: &str) -> String {
    format!(r#"{{"key":"{key}","value":{any_value}}}"#)
}

pub fn text(key: &str, value: &str) -> String {
    attribute(key, &format!(r#"{{"stringValue":"{value}"}}"#))
}

pub fn seconds(key: &str, value: f64) -> String {
    attribute(key, &format!(r#"{{"doubleValue":{value}}}"#))
}

pub fn flag(key: &str, value: bool) -> String {
    attribute(key, &format!(r#"{{"boolValue":{value}}}"#))
}

/// One span of `TRACE` as OTLP JSON, times in milliseconds after `EPOCH`.
pub fn span(
    id: &str,
    parent: Option<&str>,
    name: &str,
    (start_ms, end_ms): (i64, i64),
    attributes: &[String],
) -> String {
    span_of(TRACE, id, parent, name, (start_ms, end_ms), attributes)
}

pub fn span_of(
    trace: &str,
    id: &str,
    parent: Option<&str>,
    name: &str,
    (start_ms, end_ms): (i64, i64),
    attributes: &[String],
) -> String {
    let parent = parent.map_or(String::new(), span_id);
    format!(
        r#"{{"traceId":"{trace}","spanId":"{}","parentSpanId":"{parent}","name":"{name}","kind":1,"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{}]}}"#,
        span_id(id),
        EPOCH + start_ms * 1_000_000,
        EPOCH + end_ms * 1_000_000,
        attributes.join(","),
    )
}

/// One line of a trace file: the spans, as written by `service`.
pub fn line(service: &str, spans: &[String]) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{}]}},"scopeSpans":[{{"scope":{{"name":"tests"}},"spans":[{}]}}]}}]}}"#,
        text("service.name", service),
        spans.join(","),
    )
}

/// A store holding `spans` (one service, one line), linked and every complete trace chosen.
pub fn assembled(spans: &[String]) -> Store {
    let mut store = Store::default();
    store
        .read_answer(line("app", spans).as_bytes(), true)
        .expect("OTLP trace data");
    store.assemble(&Filters::default());
    store
}
