//! OTLP JSON (one `TracesData` / `ExportTraceServiceRequest` per line, or whole documents) into
//! compact span records. Mirrors `llmtrace/analysis/otlp.py`: the same accepted variations (hex or
//! base64 ids, `kind` as int or enum name, integers as strings, Jaeger's `result` wrapper) and the
//! same attribute filter, so both readers see the same spans.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use sonic_rs::LazyValue;

use crate::conventions::{self, SpanAttributes, NO_FAMILY};
use crate::line_error::classify;
pub use crate::line_error::LineError;
use crate::model::{intern, key, Id, SpanRec, Value, TTFT};
use crate::nesting;
use crate::values::{decode_any, Attributes, Decoded, Kind, Nanos, Text};

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
    /// read only for a first-token event (`conventions.FIRST_TOKEN_EVENTS`)
    #[serde(borrow, default)]
    events: Option<LazyValue<'a>>,
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
                    // null is no resource spans at all, as in otlp.py
                    seen.found |= map.next_value_seed(SeqSeed(ResourceSpansSeed {
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
    /// Whether there was an array (not null).
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: Reseed<'de>> Visitor<'de> for SeqSeed<S> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element_seed(self.0.reseed())?.is_some() {}
        Ok(true)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
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
                "resource" => match map.next_value_seed(ResourceSeed) {
                    Ok(name) => service = name,
                    Err(error) => {
                        // otlp.py reads the resource first: none of its spans are kept
                        self.out.truncate(start);
                        return Err(error);
                    }
                },
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

/// A resource's `service.name`, read as `_service_name` in otlp.py reads it: a resource that is
/// empty or null has none; otherwise its attributes are searched up to the first `service.name`.
struct ResourceSeed;

impl<'de> DeserializeSeed<'de> for ResourceSeed {
    type Value = Option<Arc<str>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ResourceSeed {
    type Value = Option<Arc<str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a resource object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        falsy(!v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        falsy(v == 0)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        falsy(v == 0)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        falsy(v == 0.0)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        falsy(v.is_empty())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        falsy(seq.next_element::<IgnoredAny>()?.is_none())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut service = None;
        while let Some(field) = map.next_key::<Text<'de>>()? {
            if &*field.0 == "attributes" {
                service = map.next_value_seed(ServiceName)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(service)
    }
}

/// A resource that is empty (as Python tests it) has no service; anything else is not a resource.
fn falsy<T, E: de::Error>(empty: bool) -> Result<Option<T>, E> {
    if empty {
        Ok(None)
    } else {
        Err(E::custom("the resource is not an object"))
    }
}

/// The resource's attributes (null: none), up to the first `service.name`.
struct ServiceName;

impl<'de> DeserializeSeed<'de> for ServiceName {
    type Value = Option<Arc<str>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ServiceName {
    type Value = Option<Arc<str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of attributes")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut service = None;
        while let Some(found) = seq.next_element_seed(ResourceAttribute)? {
            if let Some(value) = found {
                service = match value.map_err(de::Error::custom)? {
                    Value::Str(name) => Some(name),
                    _ => None,
                };
                // the attributes after it are not looked at
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                break;
            }
        }
        Ok(service)
    }
}

/// One resource attribute: the value when its key is `service.name` (a missing value is none).
struct ResourceAttribute;

impl<'de> DeserializeSeed<'de> for ResourceAttribute {
    type Value = Option<Decoded>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ResourceAttribute {
    type Value = Option<Decoded>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut is_service = false;
        let mut value: Option<LazyValue<'de>> = None;
        while let Some(field) = map.next_key::<Text<'de>>()? {
            match &*field.0 {
                "key" => is_service = map.next_value_seed(IsServiceName)?,
                "value" => value = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(is_service.then(|| match value {
            Some(raw) => decode_any(raw.as_raw_str()),
            None => Ok(Value::None),
        }))
    }
}

/// Whether a key (of any JSON type) is "service.name".
struct IsServiceName;

impl<'de> DeserializeSeed<'de> for IsServiceName {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsServiceName {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == "service.name")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
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
        // The scope's family, when it names one, is every span's (otlp.py: scope_family): given
        // to the spans read after the scope, and to those before it once it is known.
        let start = self.out.len();
        let mut family: Option<u8> = None;
        while let Some(field) = map.next_key::<Text<'de>>()? {
            match &*field.0 {
                "spans" => {
                    map.next_value_seed(SeqSeed(SpanSeed {
                        out: &mut *self.out,
                        service: self.service.clone(),
                        family,
                    }))?;
                }
                "scope" => {
                    let raw: LazyValue<'de> = map.next_value()?;
                    family = scope_name(raw.as_raw_str()).and_then(|name| {
                        conventions::with_current(|table| table?.scope_family(&name))
                    });
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let Some(family) = family {
            for parsed in &mut self.out[start..] {
                parsed.span.family = family;
            }
        }
        Ok(())
    }
}

struct SpanSeed<'o> {
    out: &'o mut Vec<Parsed>,
    service: Option<Arc<str>>,
    /// the family the span's scope names, when the scope came first
    family: Option<u8>,
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
            family: self.family,
        }
    }
}

impl<'de> DeserializeSeed<'de> for SpanSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SpanSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a span object")
    }
    // Only an object: a derived struct would also take an array of its fields in order.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let raw = RawSpan::deserialize(de::value::MapAccessDeserializer::new(map))?;
        let mut parsed = span_record(raw);
        parsed.span.service = self.service;
        if let Some(family) = self.family {
            parsed.span.family = family;
        }
        self.out.push(parsed);
        Ok(())
    }
}

/// A scope's `name` when the scope is an object and its name a string (`_scope_name`).
fn scope_name(raw: &str) -> Option<String> {
    use sonic_rs::JsonValueTrait;
    let scope: sonic_rs::Value = sonic_rs::from_str(raw).ok()?;
    scope.get("name")?.as_str().map(str::to_owned)
}

/// `first_token_event` in otlp.py: the time of the first first-token event among a span's
/// events, read leniently (an event that is not an object, has another name or no time that is
/// a 64-bit integer or a string of digits is passed over).
fn first_token_event(raw: &str, table: &conventions::Conventions) -> Option<i64> {
    use sonic_rs::{JsonContainerTrait, JsonValueTrait};
    let events: sonic_rs::Value = sonic_rs::from_str(raw).ok()?;
    for event in events.as_array()?.iter() {
        let Some(event) = event.as_object() else {
            continue;
        };
        match event.get(&"name").and_then(|name| name.as_str()) {
            Some(name) if table.is_first_token_event(name) => {}
            _ => continue,
        }
        let Some(time) = event.get(&"timeUnixNano") else {
            continue;
        };
        if let Some(text) = time.as_str() {
            if (1..=19).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(at) = text.parse::<i64>() {
                    return Some(at);
                }
            }
        } else if time.is_i64() {
            return time.as_i64();
        }
    }
    None
}

/// A parsed span with its trace id, before spans are grouped by trace.
pub struct Parsed {
    pub trace_id: Id,
    pub span: SpanRec,
}

/// Read one OTLP JSON document (a line of a trace file) into `out`. Like the Python reader: text
/// that is not JSON adds nothing; JSON that is not OTLP keeps the spans before the problem.
pub fn parse_document(bytes: &[u8], out: &mut Vec<Parsed>) -> Result<(), LineError> {
    if let Some(offset) = nesting::too_deep(bytes) {
        // orjson's words, so that both readers report the line alike
        let column = nesting::column_after(bytes, offset);
        return Err(LineError::Json(format!(
            "depth limit exceeded at column {column}"
        )));
    }
    let start = out.len();
    let mut deserializer = sonic_rs::Deserializer::from_slice(bytes);
    let mut result =
        read_document(&mut deserializer, out).and_then(|()| deserializer.end().map_err(classify));
    if let Err(LineError::Otlp(_)) = result {
        // orjson reads the whole line before otlp.py looks at it: what is not OTLP counts only
        // when the rest of the line is JSON too
        if let Err(error) = sonic_rs::from_slice::<IgnoredAny>(bytes) {
            result = Err(classify(error));
        }
    }
    if !matches!(result, Err(LineError::Json(_))) {
        if let Some((offset, problem)) = lone_surrogate(bytes) {
            // orjson refuses it anywhere (in its words); sonic-rs only in the strings it decodes
            let column = nesting::column_after(bytes, offset) - 1;
            result = Err(LineError::Json(format!("{problem} at column {column}")));
        }
    }
    if let Err(LineError::Json(_)) = result {
        out.truncate(start);
    }
    result
}

/// Where a `\u` escape names half of a UTF-16 surrogate pair without the other half right after
/// it (text no UTF-8 string can hold).
fn lone_surrogate(text: &[u8]) -> Option<(usize, &'static str)> {
    memchr::memchr(b'\\', text)?; // no backslash, no escape
    let unit = |at: usize| -> Option<u32> {
        let digits = text.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let mut from = 0;
    while let Some(found) = memchr::memmem::find(&text[from..], b"\\u") {
        let at = from + found;
        from = at + 2;
        let backslashes = text[..at].iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 1 {
            continue; // an escaped backslash, then a "u"
        }
        match unit(at + 2) {
            Some(0xd800..=0xdbff) => {
                if text.get(at + 6..at + 8) != Some(b"\\u") {
                    return Some((at, "no low surrogate in string"));
                }
                if !matches!(unit(at + 8), Some(0xdc00..=0xdfff)) {
                    return Some((at, "invalid low surrogate in string"));
                }
                from = at + 12;
            }
            Some(0xdc00..=0xdfff) => return Some((at, "invalid high surrogate in string")),
            _ => {}
        }
    }
    None
}

/// Every document of a whole-file JSON text (one document, or several written back to back),
/// each read like a line; all or nothing, like the Python reader: the first that is not OTLP
/// trace data ends the reading and drops what was read.
pub fn parse_stream(bytes: &[u8], out: &mut Vec<Parsed>) -> Result<(), LineError> {
    let start = out.len();
    let mut rest = bytes;
    loop {
        let skipped = rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        let Some(skipped) = skipped else {
            return Ok(());
        };
        rest = &rest[skipped..];
        let end = match rest[0] {
            b'{' | b'[' => nesting::document_end(rest),
            _ => None,
        };
        let result = match end {
            Some(end) => parse_document(&rest[..end], out),
            None => Err(LineError::Json("not a JSON object".into())),
        };
        if result.is_err() {
            out.truncate(start);
            return result;
        }
        rest = &rest[end.unwrap_or(rest.len())..];
    }
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

fn span_record(raw: RawSpan) -> Parsed {
    let parent = match raw.parent_span_id {
        Some(text) if !text.is_empty() => Some(Id::span(&text)),
        _ => None,
    };
    let Attributes(kept, table) = raw.attributes;
    let start = raw.start.0;
    let events = raw.events;
    // otlp.py: the family is looked for before the table adds a stage; a span without
    // llmtrace.stage is normalized (conventions.py)
    let (attrs, family, unassigned, inferred_call) = conventions::with_current(|conventions| {
        let Some(conventions) = conventions else {
            return (kept, NO_FAMILY, false, false);
        };
        let mut span = SpanAttributes {
            kept: kept.into_vec(),
            table,
        };
        let family = conventions.attribute_family(&span);
        let mut assigned = Some(None);
        if !span.kept.iter().any(|(k, _)| *k == key::STAGE) {
            let first_token_at = events
                .as_ref()
                .and_then(|raw| first_token_event(raw.as_raw_str(), conventions));
            assigned = conventions.normalize(&mut span, first_token_at, start);
        }
        let inferred_call = assigned == Some(Some(TTFT));
        (
            span.kept.into_boxed_slice(),
            family,
            assigned.is_none(),
            inferred_call,
        )
    });
    Parsed {
        trace_id: Id::trace(&raw.trace_id),
        span: SpanRec {
            span_id: Id::span(&raw.span_id),
            parent,
            name: intern(raw.name.as_deref().unwrap_or_default()),
            kind: raw.kind.0,
            start: raw.start.0,
            end: raw.end.0,
            attrs,
            service: None,
            family,
            unassigned,
            inferred_call,
        },
    }
}

#[cfg(test)]
mod tests;
