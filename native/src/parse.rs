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

use crate::conventions::{self, SpanAttributes, NO_FAMILY};
use crate::model::{attribute_index, hashed_index, intern, key, FastMap, Id, SpanRec, Value, TTFT};
use crate::nesting;

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

/// A span's attributes: the kept ones decoded, content ones hashed, those only the conventions
/// table reads decoded apart, the rest skipped unread.
#[derive(Default)]
struct Attributes(Box<[(u8, Value)]>, Vec<(u16, Value)>);

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
                let mut table = Vec::new();
                let result = (|| {
                    while let Some(Attribute(item)) = seq.next_element()? {
                        match item {
                            Some((Entry::Kept(index), value)) => kept.push((index, value)),
                            Some((Entry::Table(slot), value)) => table.push((slot, value)),
                            None => {}
                        }
                    }
                    Ok(())
                })();
                let attributes = Attributes(kept.drain(..).collect(), table);
                SCRATCH.with(|scratch| *scratch.borrow_mut() = kept);
                result.map(|()| attributes)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Attributes, E> {
                Ok(Attributes::default())
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Where a decoded attribute goes: among the kept ones, or among those only the table reads.
#[derive(Clone, Copy)]
enum Entry {
    Kept(u8),
    Table(u16),
}

struct Attribute(Option<(Entry, Value)>);

enum Wanted {
    Kept(Entry),
    Hashed(u8),
    Skipped,
}

fn wanted(name: &str) -> Wanted {
    if let Some(index) = attribute_index(name) {
        Wanted::Kept(Entry::Kept(index))
    } else if let Some(index) = hashed_index(name) {
        Wanted::Hashed(index)
    } else if let Some(slot) = conventions::with_current(|table| table?.table_key(name)) {
        Wanted::Kept(Entry::Table(slot))
    } else {
        Wanted::Skipped
    }
}

fn finish(wanted: &Wanted, raw: &LazyValue) -> Result<Option<(Entry, Value)>, LineError> {
    Ok(match wanted {
        Wanted::Kept(entry) => Some((*entry, decode(raw)?)),
        Wanted::Hashed(index) => Some((Entry::Kept(*index), Value::Int(content_hash(raw)?))),
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
                let mut value: Option<(Entry, Value)> = None;
                let mut has_value = false;
                while let Some(field) = map.next_key::<Text<'de>>()? {
                    match &*field.0 {
                        "key" => {
                            let want = map.next_value_seed(KeySeed)?;
                            if let Some(raw) = early.take() {
                                value = finish(&want, &raw)
                                    .map_err(|e| de::Error::custom(e.detail()))?;
                            }
                            key = Some(want);
                        }
                        "value" => {
                            has_value = true;
                            match &key {
                                Some(Wanted::Kept(entry)) => {
                                    let any = map.next_value_seed(AnyValueSeed)?;
                                    value = Some((*entry, any.map_err(de::Error::custom)?));
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

/// An attribute's key. otlp.py looks it up in sets: a key that is not a string is one it does not
/// read, unless it cannot be looked up at all (an array or an object).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Wanted;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Wanted, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Wanted;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Wanted, E> {
        Ok(wanted(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Wanted, E> {
        Ok(Wanted::Skipped)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Wanted, E> {
        Ok(Wanted::Skipped)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Wanted, E> {
        Ok(Wanted::Skipped)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Wanted, E> {
        Ok(Wanted::Skipped)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Wanted, E> {
        Ok(Wanted::Skipped)
    }
}

/// An `AnyValue` decoded, or why it cannot be: a field of the wrong type.
type Decoded = Result<Value, String>;

/// `AnyValue` fields in the order `attribute_value` in otlp.py tests them: the first one present
/// decides, and only that one is read (the others may hold anything).
const ANY_FIELDS: [&str; 7] = [
    "stringValue",
    "doubleValue",
    "intValue",
    "boolValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
];
const ARRAY_VALUE: usize = 4;
const KVLIST_VALUE: usize = 5;
const BOOL_VALUE: usize = 3;

/// An `AnyValue` object.
struct AnyValueSeed;

enum AnyField<'de> {
    Scalar(Decoded),
    /// `arrayValue` and `kvlistValue`, decoded once chosen.
    Nested(LazyValue<'de>),
}

impl<'de> DeserializeSeed<'de> for AnyValueSeed {
    type Value = Decoded;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Decoded, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnyValueSeed {
    type Value = Decoded;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AnyValue object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Decoded, A::Error> {
        let mut chosen: Option<(usize, AnyField<'de>)> = None;
        while let Some(field) = map.next_key::<Text<'de>>()? {
            let rank = ANY_FIELDS.iter().position(|name| *name == &*field.0);
            // a later copy of the same field replaces the earlier one, as in a dict
            let rank = match rank {
                Some(rank) if chosen.as_ref().is_none_or(|(best, _)| rank <= *best) => rank,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let field = match rank {
                ARRAY_VALUE | KVLIST_VALUE => AnyField::Nested(map.next_value()?),
                _ => AnyField::Scalar(map.next_value_seed(Scalar(rank))?),
            };
            chosen = Some((rank, field));
        }
        Ok(match chosen {
            None => Ok(Value::None),
            Some((_, AnyField::Scalar(decoded))) => decoded,
            Some((ARRAY_VALUE, AnyField::Nested(raw))) => decode_array(&raw),
            Some((_, AnyField::Nested(raw))) => decode_kvlist(&raw),
        })
    }
}

/// One scalar field of an `AnyValue`, read as `attribute_value` reads it: `stringValue` and
/// `bytesValue` a string, `doubleValue` what `float()` takes, `intValue` what `int()` takes within
/// 64 bits, `boolValue` a boolean or a string saying "true" (anything else is false).
#[derive(Clone, Copy)]
struct Scalar(usize);

impl Scalar {
    fn wrong(self, what: &str) -> Decoded {
        if self.0 == BOOL_VALUE {
            return Ok(Value::Bool(false));
        }
        Err(format!("{} is {what}", ANY_FIELDS[self.0]))
    }
}

impl<'de> DeserializeSeed<'de> for Scalar {
    type Value = Decoded;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Decoded, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scalar {
    type Value = Decoded;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Decoded, E> {
        Ok(match self.0 {
            1 => python_float(v)
                .map(finite)
                .ok_or_else(|| format!("invalid number {v:?}")),
            2 => python_int(v)
                .map(Value::Int)
                .ok_or_else(|| format!("invalid integer {v:?}")),
            BOOL_VALUE => Ok(Value::Bool(v.eq_ignore_ascii_case("true"))),
            _ => Ok(Value::Str(intern(v))),
        })
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Decoded, E> {
        Ok(match self.0 {
            BOOL_VALUE => Ok(Value::Bool(v)),
            _ => self.wrong("a boolean"),
        })
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Decoded, E> {
        Ok(match self.0 {
            1 => Ok(Value::Float(v as f64)),
            2 => Ok(Value::Int(v)),
            _ => self.wrong("a number"),
        })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Decoded, E> {
        Ok(match self.0 {
            1 => Ok(Value::Float(v as f64)),
            2 => i64::try_from(v)
                .map(Value::Int)
                .map_err(|_| format!("integer out of range: {v}")),
            _ => self.wrong("a number"),
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Decoded, E> {
        Ok(match self.0 {
            1 => Ok(finite(v)),
            2 => float_to_int(v)
                .map(Value::Int)
                .ok_or_else(|| format!("integer out of range: {v}")),
            _ => self.wrong("a number"),
        })
    }
    fn visit_unit<E: de::Error>(self) -> Result<Decoded, E> {
        Ok(self.wrong("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Decoded, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(self.wrong("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Decoded, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(self.wrong("an object"))
    }
}

/// A double: NaN and infinities are no value, as in otlp.py (no duration or count is either).
fn finite(v: f64) -> Value {
    if v.is_finite() {
        Value::Float(v)
    } else {
        Value::None
    }
}

/// Python's `int(x)` of a float: truncated, and within 64 bits.
fn float_to_int(v: f64) -> Option<i64> {
    // -2^63 is a float exactly; 2^63 is the first float past i64::MAX
    (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0)
        .contains(&v)
        .then(|| v.trunc() as i64)
}

/// The whitespace Python's `int()` and `float()` ignore around a number, among ASCII characters
/// (otlp.py refuses numbers written with other characters).
fn is_python_space(c: char) -> bool {
    matches!(c, ' ' | '\t'..='\r' | '\x1c'..='\x1f')
}

/// Digits with single underscores between them (PEP 515), as Python reads them: without them.
fn without_separators(text: &str) -> Option<Cow<'_, str>> {
    if !text.contains('_') {
        return Some(Cow::Borrowed(text));
    }
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let digit_before = i > 0 && bytes[i - 1].is_ascii_digit();
            let digit_after = bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(digit_before && digit_after) {
                return None;
            }
        }
    }
    Some(Cow::Owned(text.replace('_', "")))
}

/// Python's `int(text)` for ASCII text, within 64 bits.
fn python_int(text: &str) -> Option<i64> {
    if let Ok(number) = text.parse::<i64>() {
        return Some(number);
    }
    if !text.is_ascii() {
        return None;
    }
    let trimmed = text.trim_matches(is_python_space);
    let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return None;
    }
    without_separators(trimmed)?.parse::<i64>().ok()
}

/// Python's `float(text)` for ASCII text.
fn python_float(text: &str) -> Option<f64> {
    if !text.is_ascii() {
        return None;
    }
    let trimmed = text.trim_matches(is_python_space);
    // Rust reads what Python reads (inf, infinity, nan in any case, signs, exponents), but for
    // digit separators
    without_separators(trimmed)?.parse::<f64>().ok()
}

/// An `arrayValue`, read from its own text: values nested in values then do not count against
/// sonic-rs's limit of 255 levels per document (the line's 1024 levels apply, as in orjson).
fn decode_array(raw: &LazyValue) -> Decoded {
    let items = nested_values(raw)?;
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        out.push(decode_any(item.as_raw_str())?);
    }
    Ok(Value::List(out.into_boxed_slice()))
}

/// A `kvlistValue`: a key written twice keeps its first place and its last value, as in a dict.
fn decode_kvlist(raw: &LazyValue) -> Decoded {
    let entries = nested_values(raw)?;
    let mut out: Vec<(Arc<str>, Value)> = Vec::with_capacity(entries.len());
    let mut index: FastMap<Arc<str>, usize> = FastMap::default();
    for entry in &entries {
        let (key, value) = decode_entry(entry.as_raw_str())?;
        match index.get(&key) {
            Some(&i) => out[i].1 = value,
            None => {
                index.insert(key.clone(), out.len());
                out.push((key, value));
            }
        }
    }
    Ok(Value::Map(out.into_boxed_slice()))
}

fn text_error(error: sonic_rs::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The `values` of an `arrayValue` or `kvlistValue` object (missing or null: none).
fn nested_values<'a>(raw: &'a LazyValue) -> Result<Vec<LazyValue<'a>>, String> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<LazyValue<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object with values")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut values = Vec::new();
            while let Some(field) = map.next_key::<Text<'de>>()? {
                if &*field.0 == "values" {
                    values = map
                        .next_value::<Option<Vec<LazyValue<'de>>>>()?
                        .unwrap_or_default();
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(values)
        }
    }
    let mut deserializer = sonic_rs::Deserializer::from_str(raw.as_raw_str());
    deserializer.deserialize_map(V).map_err(text_error)
}

/// One `{key, value}` of a `kvlistValue`: the key a string, the value missing or null for none.
fn decode_entry(text: &str) -> Result<(Arc<str>, Value), String> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = (Option<Text<'de>>, Option<LazyValue<'de>>);
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a {key, value} object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut key, mut value) = (None, None);
            while let Some(field) = map.next_key::<Text<'de>>()? {
                match &*field.0 {
                    "key" => key = Some(map.next_value()?),
                    "value" => value = map.next_value()?,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok((key, value))
        }
    }
    let mut deserializer = sonic_rs::Deserializer::from_str(text);
    let (key, value) = deserializer.deserialize_map(V).map_err(text_error)?;
    let key = key.ok_or("missing 'key'")?;
    let value = match value {
        Some(raw) => decode_any(raw.as_raw_str())?,
        None => Value::None,
    };
    Ok((intern(&key.0), value))
}

/// An `AnyValue` from its own text.
fn decode_any(text: &str) -> Decoded {
    let mut deserializer = sonic_rs::Deserializer::from_str(text);
    AnyValueSeed
        .deserialize(&mut deserializer)
        .map_err(text_error)?
}

/// A time: what `int(x or 0)` reads, within 64 bits (missing, null, "", 0, false and empty
/// containers are 0).
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
                    .map_err(|_| E::custom(format!("integer out of range: {v}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Nanos, E> {
                float_to_int(v)
                    .map(Nanos)
                    .ok_or_else(|| E::custom(format!("integer out of range: {v}")))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Nanos, E> {
                match v {
                    false => Ok(Nanos(0)),
                    true => Err(E::custom("expected an integer, not a boolean")),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                if v.is_empty() {
                    return Ok(Nanos(0));
                }
                python_int(v)
                    .map(Nanos)
                    .ok_or_else(|| E::custom(format!("invalid integer {v:?}")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Nanos, E> {
                Ok(Nanos(0))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Nanos, A::Error> {
                match seq.next_element::<IgnoredAny>()? {
                    None => Ok(Nanos(0)),
                    Some(_) => Err(de::Error::custom("expected an integer, not an array")),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Nanos, A::Error> {
                match map.next_key::<IgnoredAny>()? {
                    None => Ok(Nanos(0)),
                    Some(_) => Err(de::Error::custom("expected an integer, not an object")),
                }
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

/// Decode an `AnyValue` the way `attribute_value` in otlp.py does.
pub fn decode(raw: &LazyValue) -> Result<Value, LineError> {
    decode_any(raw.as_raw_str()).map_err(LineError::Otlp)
}

/// Content attributes are kept as a hash: only whether two requests were identical matters.
/// Identical as otlp.py judges it: the same `str()` of the decoded value.
fn content_hash(raw: &LazyValue) -> Result<i64, LineError> {
    let value = decode(raw)?;
    let text = match &value {
        Value::Str(text) => Cow::Borrowed(&**text),
        _ => Cow::Owned(value.py_str()),
    };
    // FNV-1a, 64 bit
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    Ok(hash as i64)
}
