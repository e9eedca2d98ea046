//! OTLP JSON (one `TracesData` / `ExportTraceServiceRequest` per line, or whole documents) into
//! compact span records. Mirrors `llmtrace/analysis/otlp.py`: the same accepted variations (hex or
//! base64 ids, `kind` as int or enum name, integers as strings, Jaeger's `result` wrapper) and the
//! same attribute filter, so both readers see the same spans.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use sonic_rs::LazyValue;

use crate::model::{attribute_index, hashed_index, intern, Id, SpanRec, Value};

#[derive(Deserialize)]
struct Resource<'a> {
    #[serde(borrow, default)]
    attributes: Option<Vec<KeyValue<'a>>>,
}

#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<LazyValue<'a>>,
}

#[derive(Deserialize)]
struct RawSpan<'a> {
    #[serde(rename = "traceId", borrow)]
    trace_id: Cow<'a, str>,
    #[serde(rename = "spanId", borrow)]
    span_id: Cow<'a, str>,
    #[serde(rename = "parentSpanId", borrow, default)]
    parent_span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    kind: Kind,
    #[serde(rename = "startTimeUnixNano", default)]
    start: Nanos,
    #[serde(rename = "endTimeUnixNano", default)]
    end: Nanos,
    #[serde(default)]
    attributes: Attributes,
}

// The document is walked with seeds that push each span straight into the output: no
// intermediate vectors of raw spans or attributes.

/// A document's fields: `resourceSpans` (or `resource_spans`), or Jaeger's `result` wrapper.
struct DocumentSeed<'o> {
    out: &'o mut Vec<Parsed>,
}

/// Whether the document had resource spans, and Jaeger's wrapped document if there was one.
struct DocumentSeen<'de> {
    found: bool,
    result: Option<LazyValue<'de>>,
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = DocumentSeen<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = DocumentSeen<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object with resourceSpans")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = DocumentSeen {
            found: false,
            result: None,
        };
        while let Some(field) = map.next_key::<Text<'de>>()? {
            match &*field.0 {
                "resourceSpans" | "resource_spans" => {
                    seen.found = true;
                    map.next_value_seed(SeqSeed(ResourceSpansSeed {
                        out: &mut *self.out,
                    }))?;
                }
                "result" => seen.result = Some(map.next_value::<LazyValue<'de>>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(seen)
    }
}

/// Each element of a JSON array (null: none) through a copyable seed.
struct SeqSeed<S>(S);

impl<'de, S: Reseed<'de>> DeserializeSeed<'de> for SeqSeed<S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: Reseed<'de>> Visitor<'de> for SeqSeed<S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self.0.reseed())?.is_some() {}
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A seed borrowing the output again for the next element.
trait Reseed<'de> {
    type Seed<'s>: DeserializeSeed<'de, Value = ()>
    where
        Self: 's;
    fn reseed(&mut self) -> Self::Seed<'_>;
}

struct ResourceSpansSeed<'o> {
    out: &'o mut Vec<Parsed>,
}

impl<'de> Reseed<'de> for ResourceSpansSeed<'_> {
    type Seed<'s>
        = ResourceSpansSeed<'s>
    where
        Self: 's;
    fn reseed(&mut self) -> ResourceSpansSeed<'_> {
        ResourceSpansSeed {
            out: &mut *self.out,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ResourceSpansSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ResourceSpansSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a ResourceSpans object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.out.len();
        let mut service: Option<Arc<str>> = None;
        while let Some(field) = map.next_key::<Text<'de>>()? {
            match &*field.0 {
                "resource" => {
                    let resource: Option<Resource> = map.next_value()?;
                    service = resource.as_ref().and_then(service_name);
                }
                "scopeSpans" => {
                    map.next_value_seed(SeqSeed(ScopeSpansSeed {
                        out: &mut *self.out,
                        service: service.clone(),
                    }))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let Some(service) = &service {
            // spans written before their resource
            for parsed in &mut self.out[start..] {
                parsed.span.service.get_or_insert_with(|| service.clone());
            }
        }
        Ok(())
    }
}

struct ScopeSpansSeed<'o> {
    out: &'o mut Vec<Parsed>,
    service: Option<Arc<str>>,
}

impl<'de> Reseed<'de> for ScopeSpansSeed<'_> {
    type Seed<'s>
        = ScopeSpansSeed<'s>
    where
        Self: 's;
    fn reseed(&mut self) -> ScopeSpansSeed<'_> {
        ScopeSpansSeed {
            out: &mut *self.out,
            service: self.service.clone(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for ScopeSpansSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScopeSpansSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a ScopeSpans object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(field) = map.next_key::<Text<'de>>()? {
            if &*field.0 == "spans" {
                map.next_value_seed(SeqSeed(SpanSeed {
                    out: &mut *self.out,
                    service: self.service.clone(),
                }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct SpanSeed<'o> {
    out: &'o mut Vec<Parsed>,
    service: Option<Arc<str>>,
}

impl<'de> Reseed<'de> for SpanSeed<'_> {
    type Seed<'s>
        = SpanSeed<'s>
    where
        Self: 's;
    fn reseed(&mut self) -> SpanSeed<'_> {
        SpanSeed {
            out: &mut *self.out,
            service: self.service.clone(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for SpanSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let raw = RawSpan::deserialize(deserializer)?;
        let mut parsed = span_record(raw);
        parsed.span.service = self.service;
        self.out.push(parsed);
        Ok(())
    }
}

/// A string, borrowed from the input when it has no escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(V(std::marker::PhantomData))
    }
}

/// A span's attributes: the kept ones decoded, content ones hashed, the rest skipped unread.
#[derive(Default)]
struct Attributes(Box<[(u8, Value)]>);

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Attributes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of attributes")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Attributes, A::Error> {
                thread_local! {
                    static SCRATCH: RefCell<Vec<(u8, Value)>> = const { RefCell::new(Vec::new()) };
                }
                let mut kept = SCRATCH.with(|scratch| std::mem::take(&mut *scratch.borrow_mut()));
                kept.clear();
                let result = (|| {
                    while let Some(Attribute(item)) = seq.next_element()? {
                        kept.extend(item);
                    }
                    Ok(())
                })();
                let attributes = Attributes(kept.drain(..).collect());
                SCRATCH.with(|scratch| *scratch.borrow_mut() = kept);
                result.map(|()| attributes)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Attributes, E> {
                Ok(Attributes(Box::default()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

struct Attribute(Option<(u8, Value)>);

enum Wanted {
    Kept(u8),
    Hashed(u8),
    Skipped,
}

fn wanted(name: &str) -> Wanted {
    if let Some(index) = attribute_index(name) {
        Wanted::Kept(index)
    } else if let Some(index) = hashed_index(name) {
        Wanted::Hashed(index)
    } else {
        Wanted::Skipped
    }
}

fn finish(wanted: &Wanted, raw: &LazyValue) -> Result<Option<(u8, Value)>, LineError> {
    Ok(match wanted {
        Wanted::Kept(index) => Some((*index, decode(raw)?)),
        Wanted::Hashed(index) => Some((*index, Value::Int(content_hash(raw)?))),
        Wanted::Skipped => None,
    })
}

impl<'de> Deserialize<'de> for Attribute {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Attribute;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an attribute {key, value}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Attribute, A::Error> {
                let mut key: Option<Wanted> = None;
                let mut early: Option<LazyValue<'de>> = None; // a value written before its key
                let mut value: Option<(u8, Value)> = None;
                let mut has_value = false;
                while let Some(field) = map.next_key::<Text<'de>>()? {
                    match &*field.0 {
                        "key" => {
                            let name: Text<'de> = map.next_value()?;
                            let want = wanted(&name.0);
                            if let Some(raw) = early.take() {
                                value = finish(&want, &raw)
                                    .map_err(|e| de::Error::custom(e.detail()))?;
                            }
                            key = Some(want);
                        }
                        "value" => {
                            has_value = true;
                            match &key {
                                Some(Wanted::Kept(index)) => {
                                    let any: AnyValue = map.next_value()?;
                                    value = Some((*index, any.into_value()));
                                }
                                Some(want @ Wanted::Hashed(_)) => {
                                    let raw: LazyValue<'de> = map.next_value()?;
                                    value = finish(want, &raw)
                                        .map_err(|e| de::Error::custom(e.detail()))?;
                                }
                                Some(Wanted::Skipped) => {
                                    map.next_value::<IgnoredAny>()?;
                                }
                                None => early = Some(map.next_value()?),
                            }
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                match key {
                    None => Err(de::Error::custom("missing 'key'")),
                    Some(Wanted::Skipped) => Ok(Attribute(None)),
                    Some(_) if !has_value => Err(de::Error::custom("missing 'value'")),
                    Some(_) => Ok(Attribute(value)),
                }
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// `AnyValue`; the first field present wins, in the order `attribute_value` in otlp.py tests them.
#[derive(Deserialize)]
struct AnyValue<'a> {
    #[serde(rename = "stringValue", borrow, default)]
    string_value: Option<Cow<'a, str>>,
    #[serde(rename = "doubleValue", default)]
    double_value: Option<Double>,
    #[serde(rename = "intValue", default)]
    int_value: Option<Nanos>,
    #[serde(rename = "boolValue", default)]
    bool_value: Option<Flag>,
    #[serde(rename = "arrayValue", borrow, default)]
    array_value: Option<ArrayValue<'a>>,
    #[serde(rename = "kvlistValue", borrow, default)]
    kvlist_value: Option<KvList<'a>>,
    #[serde(rename = "bytesValue", borrow, default)]
    bytes_value: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ArrayValue<'a> {
    #[serde(borrow, default)]
    values: Vec<AnyValue<'a>>,
}

#[derive(Deserialize)]
struct KvList<'a> {
    #[serde(borrow, default)]
    values: Vec<KvEntry<'a>>,
}

#[derive(Deserialize)]
struct KvEntry<'a> {
    #[serde(borrow)]
    key: Text<'a>,
    #[serde(borrow, default)]
    value: Option<AnyValue<'a>>,
}

/// An integer written as a JSON number or a string (OTLP/JSON writes 64-bit integers as strings);
/// missing, null, "" and 0 are 0, as `int(x or 0)` reads them.
#[derive(Default, Clone, Copy)]
struct Nanos(i64);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string holding one")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Nanos, E> {
                Ok(Nanos(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Nanos, E> {
                i64::try_from(v)
                    .map(Nanos)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Nanos, E> {
                if v.is_finite() {
                    Ok(Nanos(v.trunc() as i64))
                } else {
                    Err(E::custom("not a finite number"))
                }
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Nanos, E> {
                Ok(Nanos(v as i64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                if let Ok(number) = v.parse::<i64>() {
                    return Ok(Nanos(number));
                }
                // what Python's int() also accepts: surrounding spaces, digit separators
                let text = v.trim();
                if text.is_empty() {
                    return Ok(Nanos(0));
                }
                text.replace('_', "")
                    .parse::<i64>()
                    .map(Nanos)
                    .map_err(|_| E::custom(format!("invalid integer {v:?}")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Nanos, E> {
                Ok(Nanos(0))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A double as a number or a string ("NaN", "Infinity" and numbers written as text).
struct Double(f64);

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Double;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a string holding one")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Double, E> {
                Ok(Double(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Double, E> {
                Ok(Double(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Double, E> {
                Ok(Double(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Double, E> {
                v.trim()
                    .parse::<f64>()
                    .map(Double)
                    .map_err(|_| E::custom(format!("invalid number {v:?}")))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A bool, or a string that is "true" in any case.
struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Flag, E> {
                Ok(Flag(v.eq_ignore_ascii_case("true")))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `kind`: the protobuf enum as an int or its name; anything else is unspecified (0).
#[derive(Default)]
struct Kind(u8);

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a span kind")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Kind, E> {
                Ok(Kind(u8::try_from(v).unwrap_or(0)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Kind, E> {
                Ok(Kind(u8::try_from(v).unwrap_or(0)))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Kind, E> {
                Ok(Kind(0))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Kind, E> {
                Ok(Kind(0))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Kind, E> {
                Ok(Kind(0))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Kind, E> {
                Ok(Kind(match v {
                    "SPAN_KIND_INTERNAL" => 1,
                    "SPAN_KIND_SERVER" => 2,
                    "SPAN_KIND_CLIENT" => 3,
                    "SPAN_KIND_PRODUCER" => 4,
                    "SPAN_KIND_CONSUMER" => 5,
                    _ => 0,
                }))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Kind(0))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Kind(0))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// What reading one line (or document) produced: spans, or why it is not OTLP trace data.
pub enum LineError {
    Json(String),
    Otlp(String),
}

impl LineError {
    fn detail(&self) -> String {
        match self {
            LineError::Json(detail) | LineError::Otlp(detail) => detail.clone(),
        }
    }

    pub fn message(&self) -> String {
        match self {
            LineError::Json(detail) => format!("not valid JSON ({detail})"),
            LineError::Otlp(detail) => format!("not OTLP trace data ({detail})"),
        }
    }
}

fn classify(error: sonic_rs::Error) -> LineError {
    // The first line: the rest is a multi-line excerpt of the input.
    let text = error.to_string();
    let detail = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string();
    match error.classify() {
        sonic_rs::error::Category::TypeUnmatched | sonic_rs::error::Category::NotFound => {
            LineError::Otlp(detail)
        }
        _ => LineError::Json(detail),
    }
}

/// A parsed span with its trace id, before spans are grouped by trace.
pub struct Parsed {
    pub trace_id: Id,
    pub span: SpanRec,
}

/// Read one OTLP JSON document (a line of a trace file) into `out`. Like the Python reader: text
/// that is not JSON adds nothing; JSON that is not OTLP keeps the spans before the problem.
pub fn parse_document(bytes: &[u8], out: &mut Vec<Parsed>) -> Result<(), LineError> {
    let start = out.len();
    let mut deserializer = sonic_rs::Deserializer::from_slice(bytes);
    let result =
        read_document(&mut deserializer, out).and_then(|()| deserializer.end().map_err(classify));
    if let Err(LineError::Json(_)) = result {
        out.truncate(start);
    }
    result
}

/// Every document of a whole-file JSON text (one document, or several written back to back).
///
/// Such files are small (a saved Jaeger answer, pretty-printed OTLP); each document is
/// re-encoded compactly and read like a line. (sonic-rs's own stream reader reports an error
/// at the end of the input, so serde_json splits the stream.)
pub fn parse_stream(bytes: &[u8], out: &mut Vec<Parsed>) -> Result<(), LineError> {
    let start = out.len();
    for document in serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>() {
        let result = match document {
            Ok(document) => match serde_json::to_vec(&document) {
                Ok(line) => parse_document(&line, out),
                Err(error) => Err(LineError::Json(error.to_string())),
            },
            Err(error) if error.is_data() => Err(LineError::Otlp(error.to_string())),
            Err(error) => Err(LineError::Json(error.to_string())),
        };
        if result.is_err() {
            out.truncate(start);
            return result;
        }
    }
    Ok(())
}

fn read_document<'de>(
    deserializer: &mut sonic_rs::Deserializer<sonic_rs::Read<'de>>,
    out: &mut Vec<Parsed>,
) -> Result<(), LineError> {
    let start = out.len();
    let seen = DocumentSeed { out: &mut *out }
        .deserialize(&mut *deserializer)
        .map_err(classify)?;
    finish_document(seen, out, start)
}

/// Jaeger /api/v3 wraps TracesData in "result": then only the wrapped document counts.
/// `start`: where the document's spans begin in `spans`.
fn finish_document(
    seen: DocumentSeen,
    spans: &mut Vec<Parsed>,
    start: usize,
) -> Result<(), LineError> {
    if let Some(inner) = seen.result {
        let text = inner.as_raw_str().as_bytes();
        if text.first() == Some(&b'{') {
            spans.truncate(start);
            let mut deserializer = sonic_rs::Deserializer::from_slice(text);
            return read_document(&mut deserializer, spans);
        }
    }
    if !seen.found {
        return Err(LineError::Otlp(
            "no resourceSpans in this JSON object".into(),
        ));
    }
    Ok(())
}

fn service_name(resource: &Resource) -> Option<Arc<str>> {
    for attr in resource.attributes.iter().flatten() {
        if attr.key == "service.name" {
            let value = attr.value.as_ref().map(decode).transpose().ok().flatten();
            return match value {
                Some(Value::Str(name)) => Some(name),
                _ => None,
            };
        }
    }
    None
}

fn span_record(raw: RawSpan) -> Parsed {
    let parent = match raw.parent_span_id {
        Some(text) if !text.is_empty() => Some(Id::span(&text)),
        _ => None,
    };
    Parsed {
        trace_id: Id::trace(&raw.trace_id),
        span: SpanRec {
            span_id: Id::span(&raw.span_id),
            parent,
            name: intern(raw.name.as_deref().unwrap_or_default()),
            kind: raw.kind.0,
            start: raw.start.0,
            end: raw.end.0,
            attrs: raw.attributes.0,
            service: None,
        },
    }
}

/// Decode an `AnyValue` the way `attribute_value` in otlp.py does.
pub fn decode(raw: &LazyValue) -> Result<Value, LineError> {
    let value: AnyValue = sonic_rs::from_str(raw.as_raw_str()).map_err(classify)?;
    Ok(value.into_value())
}

impl AnyValue<'_> {
    fn into_value(self) -> Value {
        if let Some(text) = self.string_value {
            return Value::Str(intern(&text));
        }
        if let Some(Double(number)) = self.double_value {
            return Value::Float(number);
        }
        if let Some(Nanos(number)) = self.int_value {
            return Value::Int(number);
        }
        if let Some(Flag(flag)) = self.bool_value {
            return Value::Bool(flag);
        }
        if let Some(array) = self.array_value {
            let items: Vec<Value> = array.values.into_iter().map(AnyValue::into_value).collect();
            return Value::List(items.into_boxed_slice());
        }
        if let Some(list) = self.kvlist_value {
            let entries: Vec<(Arc<str>, Value)> = list
                .values
                .into_iter()
                .map(|kv| {
                    (
                        intern(&kv.key.0),
                        kv.value.map_or(Value::None, AnyValue::into_value),
                    )
                })
                .collect();
            return Value::Map(entries.into_boxed_slice());
        }
        if let Some(bytes) = self.bytes_value {
            return Value::Str(intern(&bytes));
        }
        Value::None
    }
}

/// Content attributes are kept as a hash: only whether two requests were identical matters.
fn content_hash(raw: &LazyValue) -> Result<i64, LineError> {
    let value = decode(raw)?;
    let text = match &value {
        Value::Str(text) => text.as_bytes(),
        _ => raw.as_raw_str().as_bytes(),
    };
    // FNV-1a, 64 bit
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    Ok(hash as i64)
}
