use super::*;
use crate::testing::TRACE;

#[test]
fn hex_ids_are_numbers_that_format_back_in_lower_case() {
    assert_eq!(Id::trace(TRACE).format(32), TRACE);
    assert_eq!(Id::trace(&TRACE.to_uppercase()), Id::trace(TRACE));
    assert_eq!(Id::span("00f067aa0ba902b7").format(16), "00f067aa0ba902b7");
    assert_eq!(Id::span("00000000000000a1"), Id::Num(0xa1));
}

#[test]
fn base64_ids_are_the_same_ids_as_their_hex() {
    assert_eq!(Id::trace("CvdlGRbNQ92ESOshHIAxnA=="), Id::trace(TRACE));
    assert_eq!(Id::span("APBnqgupArc="), Id::span("00f067aa0ba902b7"));
    // base64 of another length is kept as its hex text
    assert_eq!(Id::span("AQI=").format(16), "0102");
}

#[test]
fn ids_that_are_neither_are_kept_as_lower_case_text() {
    assert_eq!(Id::span("Not-An-Id").format(16), "not-an-id");
    assert_eq!(Id::span("ZZZZZZZZZZZZZZZZ").format(16), "zzzzzzzzzzzzzzzz");
    assert_eq!(Id::span("AQI").format(16), "aqi"); // not a multiple of 4 characters
    assert_eq!(Id::span("A===").format(16), "a===");
}

#[test]
fn floats_print_as_pythons_repr() {
    let cases = [
        (0.1, "0.1"),
        (100.0, "100.0"),
        (12345.678, "12345.678"),
        (1.0 / 3.0, "0.3333333333333333"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1e-4, "0.0001"),
        (1e-5, "1e-05"),
        (2.5e-7, "2.5e-07"),
        (-0.0, "-0.0"),
        (5e-324, "5e-324"),
        (123_456_789_012_345_678.0, "1.2345678901234568e+17"),
        (f64::MAX, "1.7976931348623157e+308"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
        // exactly halfway between two shortest texts: Python prints the even one
        // (2^49 and a quarter: Rust's shortest text ends in 3)
        ((1u64 << 49) as f64 + 0.25, "562949953421312.2"),
        ((1u64 << 49) as f64 + 0.75, "562949953421312.8"),
    ];
    for (value, python) in cases {
        assert_eq!(py_float(value), python, "{value:e}");
    }
}

#[test]
fn values_print_as_pythons_str() {
    let text = |t: &str| Value::Str(intern(t));
    let list = Value::List(Box::new([
        text("it's"),
        text("a\"b"),
        Value::Int(1),
        Value::None,
        Value::Bool(true),
        Value::Float(0.5),
        text("tab\there"),
        text("\u{0}é\u{200b}"),
    ]));
    assert_eq!(
        list.py_str(),
        r#"["it's", 'a"b', 1, None, True, 0.5, 'tab\there', '\x00é\u200b']"#
    );
    let map = Value::Map(Box::new([
        (
            intern("k"),
            Value::List(Box::new([Value::Float(1.0), text("v")])),
        ),
        (intern("q'"), Value::Map(Box::new([]))),
    ]));
    assert_eq!(map.py_str(), r#"{'k': [1.0, 'v'], "q'": {}}"#);
    // a string on its own is printed as it is
    assert_eq!(text("it's").py_str(), "it's");
}

#[test]
fn counts_numbers_and_truth_follow_python() {
    assert_eq!(Value::Float(2.9).count(), Some(2));
    assert_eq!(Value::Float(f64::NAN).count(), None);
    assert_eq!(Value::Bool(true).count(), None);
    assert_eq!(Value::Bool(true).number(), None);
    assert_eq!(Value::Int(3).number(), Some(3.0));
    for falsy in [
        Value::None,
        Value::Float(0.0),
        Value::Str(intern("")),
        Value::List(Box::new([])),
    ] {
        assert!(!falsy.truthy(), "{falsy:?}");
    }
    assert!(Value::Str(intern("0")).truthy());
}

#[test]
fn seconds_between_round_once_as_python_divides_integers() {
    assert_eq!(seconds_between(0, 1_500_000_000), 1.5);
    assert_eq!(seconds_between(1_500_000_000, 0), -1.5);
    // past 2^53 ns a float of the difference, divided, would round twice (3604358849.2730503)
    assert_eq!(
        seconds_between(0, 3_604_358_849_273_050_034),
        3_604_358_849.273_05
    );
    assert_eq!(seconds_between(i64::MIN, i64::MAX), 18_446_744_073.709553);
    assert_eq!(seconds_between(i64::MAX, i64::MIN), -18_446_744_073.709553);
}

#[test]
fn attribute_keys_are_kept_hashed_or_not_read() {
    assert_eq!(attribute_index("llmtrace.stage"), Some(key::STAGE));
    assert_eq!(hashed_index("llmtrace.stage"), None);
    assert_eq!(attribute_index("gen_ai.input.messages"), None);
    assert_eq!(
        hashed_index("gen_ai.input.messages"),
        Some(key::INPUT_MESSAGES)
    );
    assert_eq!(attribute_index("http.url"), None);
    assert_eq!(attribute_index("gen_ai.unknown"), None);
    assert_eq!(
        KEYS[key::CONVERSATION_ID as usize],
        "gen_ai.conversation.id"
    );
}

#[test]
fn an_attribute_written_twice_keeps_its_last_value_and_null_is_none() {
    let span = SpanRec {
        span_id: Id::span("00000000000000a1"),
        parent: None,
        name: intern("span"),
        kind: 0,
        start: 0,
        end: 0,
        attrs: Box::new([
            (key::STAGE, Value::Str(intern("retrieval"))),
            (key::STAGE, Value::Str(intern("rerank"))),
            (key::REQUEST_MODEL, Value::None),
        ]),
        service: None,
        family: 0,
        unassigned: false,
        inferred_call: false,
    };
    assert_eq!(span.text(key::STAGE), Some("rerank"));
    assert_eq!(span.get(key::REQUEST_MODEL), None);
    assert!(span.has(key::REQUEST_MODEL));
    assert!(!span.has(key::RESPONSE_MODEL));
}

#[test]
fn short_strings_are_shared_long_ones_are_not() {
    assert!(Arc::ptr_eq(&intern("chat"), &intern("chat")));
    let long = "x".repeat(65);
    assert!(!Arc::ptr_eq(&intern(&long), &intern(&long)));
    assert_eq!(intern(&long), Arc::from(long.as_str()));
}
