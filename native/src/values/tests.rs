use super::*;
use crate::model::key;

fn decoded(any_value: &str) -> Decoded {
    decode_any(any_value)
}

fn string(text: &str) -> Value {
    Value::Str(intern(text))
}

#[test]
fn integers_are_read_as_pythons_int_reads_them() {
    let cases = [
        ("42", Some(42)),
        (" \t+7\n", Some(7)),
        ("-0", Some(0)),
        ("1_000", Some(1000)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None), // past 64 bits
        ("1__0", None),
        ("_1", None),
        ("1_", None),
        ("0x10", None),
        ("1.0", None),
        ("", None),
        ("  ", None),
        ("\u{0661}\u{0662}", None), // Arabic-Indic digits: int() takes them, otlp.py does not
    ];
    for (text, expected) in cases {
        assert_eq!(python_int(text), expected, "{text:?}");
    }
}

#[test]
fn floats_are_read_as_pythons_float_reads_them() {
    let cases = [
        ("2.5", Some(2.5)),
        (" 1e3 ", Some(1000.0)),
        ("1.", Some(1.0)),
        (".5", Some(0.5)),
        ("1_0.5", Some(10.5)),
        ("-Infinity", Some(f64::NEG_INFINITY)),
        ("inf", Some(f64::INFINITY)),
        ("1._5", None),
        ("1e", None),
        ("0x1p3", None),
        ("", None),
    ];
    for (text, expected) in cases {
        assert_eq!(python_float(text), expected, "{text:?}");
    }
    assert!(python_float("NaN").is_some_and(f64::is_nan));
}

#[test]
fn floats_become_integers_truncated_within_64_bits() {
    assert_eq!(float_to_int(3.9), Some(3));
    assert_eq!(float_to_int(-3.9), Some(-3));
    assert_eq!(float_to_int(-9_223_372_036_854_775_808.0), Some(i64::MIN));
    assert_eq!(float_to_int(9_223_372_036_854_775_808.0), None);
    assert_eq!(float_to_int(f64::NAN), None);
    assert_eq!(float_to_int(f64::INFINITY), None);
}

#[test]
fn scalar_any_values_decode_by_their_field() {
    assert_eq!(decoded(r#"{"stringValue":"a"}"#), Ok(string("a")));
    assert_eq!(decoded(r#"{"intValue":"12"}"#), Ok(Value::Int(12)));
    assert_eq!(decoded(r#"{"intValue":1.9}"#), Ok(Value::Int(1)));
    assert_eq!(
        decoded(r#"{"doubleValue":"1e-3"}"#),
        Ok(Value::Float(0.001))
    );
    assert_eq!(decoded(r#"{"doubleValue":2}"#), Ok(Value::Float(2.0)));
    // NaN and infinities are no value (no duration or count is either)
    assert_eq!(decoded(r#"{"doubleValue":"NaN"}"#), Ok(Value::None));
    assert_eq!(decoded(r#"{"boolValue":"TRUE"}"#), Ok(Value::Bool(true)));
    assert_eq!(decoded(r#"{"boolValue":1}"#), Ok(Value::Bool(false)));
    assert_eq!(decoded(r#"{"bytesValue":"AQI="}"#), Ok(string("AQI=")));
    assert_eq!(decoded(r#"{}"#), Ok(Value::None));
}

#[test]
fn a_field_of_the_wrong_type_is_an_error_that_names_it() {
    assert_eq!(
        decoded(r#"{"intValue":"x"}"#),
        Err(r#"invalid integer "x""#.to_string())
    );
    assert_eq!(
        decoded(r#"{"intValue":18446744073709551615}"#),
        Err("integer out of range: 18446744073709551615".to_string())
    );
    assert_eq!(
        decoded(r#"{"stringValue":5}"#),
        Err("stringValue is a number".to_string())
    );
    assert_eq!(
        decoded(r#"{"doubleValue":null}"#),
        Err("doubleValue is null".to_string())
    );
}

#[test]
fn the_first_field_in_otlp_pys_order_decides_and_only_it_is_read() {
    // stringValue is tested before intValue, whatever the order written: the bad integer is
    // never looked at
    assert_eq!(
        decoded(r#"{"intValue":"bad","stringValue":"s"}"#),
        Ok(string("s"))
    );
    assert_eq!(
        decoded(r#"{"stringValue":"s","intValue":"bad"}"#),
        Ok(string("s"))
    );
    // a field written twice keeps its last value, as in a dict
    assert_eq!(
        decoded(r#"{"stringValue":"a","stringValue":"b"}"#),
        Ok(string("b"))
    );
}

#[test]
fn arrays_and_kvlists_decode_their_values() {
    assert_eq!(
        decoded(r#"{"arrayValue":{"values":[{"intValue":1},{"stringValue":"x"},{}]}}"#),
        Ok(Value::List(
            vec![Value::Int(1), string("x"), Value::None].into_boxed_slice()
        ))
    );
    assert_eq!(
        decoded(r#"{"arrayValue":{"values":null}}"#),
        Ok(Value::List(Box::new([])))
    );
    // a key written twice keeps its first place and its last value, as in a dict
    let kvlist = r#"{"kvlistValue":{"values":[
        {"key":"a","value":{"intValue":1}},
        {"key":"b"},
        {"key":"a","value":{"intValue":3}}]}}"#;
    assert_eq!(
        decoded(kvlist),
        Ok(Value::Map(
            vec![(intern("a"), Value::Int(3)), (intern("b"), Value::None)].into_boxed_slice()
        ))
    );
    assert_eq!(
        decoded(r#"{"kvlistValue":{"values":[{"value":{"intValue":1}}]}}"#),
        Err("missing 'key'".to_string())
    );
}

fn attributes(json: &str) -> Result<Attributes, sonic_rs::Error> {
    sonic_rs::from_str(json)
}

#[test]
fn only_the_attributes_the_analysis_reads_are_kept() {
    let read = attributes(
        r#"[{"key":"gen_ai.request.model","value":{"stringValue":"m"}},
            {"key":"http.url","value":{"stringValue":"https://example.com"}},
            {"value":{"intValue":"3"},"key":"gen_ai.usage.input_tokens"},
            {"key":7,"value":{"intValue":1}}]"#,
    )
    .unwrap();
    assert_eq!(
        &*read.0,
        [
            (key::REQUEST_MODEL, string("m")),
            (key::INPUT_TOKENS, Value::Int(3)),
        ]
    );
    assert!(read.1.is_empty());
    assert!(attributes("null").unwrap().0.is_empty());
}

#[test]
fn an_attribute_read_must_have_a_key_and_a_value() {
    let refusal = |json: &str| match attributes(json) {
        Ok(_) => panic!("read: {json}"),
        Err(error) => error.to_string(),
    };
    let missing_value = refusal(r#"[{"key":"gen_ai.request.model"}]"#);
    assert!(
        missing_value.starts_with("missing 'value'"),
        "{missing_value}"
    );
    let missing_key = refusal(r#"[{"value":{"stringValue":"m"}}]"#);
    assert!(missing_key.starts_with("missing 'key'"), "{missing_key}");
    // one not read needs no value
    attributes(r#"[{"key":"http.url"}]"#).unwrap();
}

#[test]
fn content_is_kept_as_a_hash_equal_for_values_python_prints_alike() {
    let hash = |any_value: &str| {
        let json = format!(r#"[{{"key":"gen_ai.input.messages","value":{any_value}}}]"#);
        match &attributes(&json).unwrap().0[..] {
            [(key::INPUT_MESSAGES, Value::Int(hash))] => *hash,
            other => panic!("not a hash: {other:?}"),
        }
    };
    assert_eq!(hash(r#"{"stringValue":"5"}"#), hash(r#"{"intValue":5}"#));
    assert_eq!(
        hash(r#"{"stringValue":"[1, 'a']"}"#),
        hash(r#"{"arrayValue":{"values":[{"intValue":1},{"stringValue":"a"}]}}"#)
    );
    assert_ne!(
        hash(r#"{"stringValue":"5"}"#),
        hash(r#"{"stringValue":"6"}"#)
    );
}

#[test]
fn times_read_what_int_of_x_or_0_reads() {
    let nanos = |json: &str| sonic_rs::from_str::<Nanos>(json).map(|n| n.0);
    assert_eq!(
        nanos(r#""1700000000000000000""#).unwrap(),
        1_700_000_000_000_000_000
    );
    assert_eq!(nanos("12").unwrap(), 12);
    assert_eq!(nanos("1.5e3").unwrap(), 1500);
    for zero in ["null", r#""""#, "0", "false", "[]", "{}"] {
        assert_eq!(nanos(zero).unwrap(), 0, "{zero}");
    }
    for wrong in [
        "true",
        "[1]",
        r#"{"a":1}"#,
        r#""x""#,
        "18446744073709551615",
    ] {
        assert!(nanos(wrong).is_err(), "{wrong}");
    }
}

#[test]
fn kinds_are_the_protobuf_enum_by_number_or_name() {
    let kind = |json: &str| sonic_rs::from_str::<Kind>(json).unwrap().0;
    assert_eq!(kind("2"), 2);
    assert_eq!(kind(r#""SPAN_KIND_CLIENT""#), 3);
    assert_eq!(kind(r#""client""#), 0);
    assert_eq!(kind("300"), 0);
    assert_eq!(kind("-1"), 0);
    assert_eq!(kind(r#"{"a":[1]}"#), 0);
}
