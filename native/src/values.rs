//! The values inside an OTLP JSON span, read as `llmtrace/analysis/otlp.py` reads them: its
//! attributes (which are kept, hashed or read only by the conventions table, and their
//! `AnyValue`s decoded with Python's int and float parsing of strings), its times and its kind.
//! Used by `parse`, which walks the documents.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use sonic_rs::LazyValue;

use crate::conventions;
use crate::line_error::LineError;
use crate::model::{attribute_index, hashed_index, intern, FastMap, Value};

/// A string, borrowed from the input when it has no escapes.
pub(crate) struct Text<'de>(pub(crate) Cow<'de, str>);

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

/// A span's attributes: the kept ones decoded, content ones hashed, those only the conventions
/// table reads decoded apart, the rest skipped unread.
#[derive(Default)]
pub(crate) struct Attributes(pub(crate) Box<[(u8, Value)]>, pub(crate) Vec<(u16, Value)>);

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
pub(crate) type Decoded = Result<Value, String>;

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
pub(crate) fn float_to_int(v: f64) -> Option<i64> {
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
pub(crate) fn python_int(text: &str) -> Option<i64> {
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
pub(crate) fn decode_any(text: &str) -> Decoded {
    let mut deserializer = sonic_rs::Deserializer::from_str(text);
    AnyValueSeed
        .deserialize(&mut deserializer)
        .map_err(text_error)?
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

/// A time: what `int(x or 0)` reads, within 64 bits (missing, null, "", 0, false and empty
/// containers are 0).
#[derive(Default, Clone, Copy)]
pub(crate) struct Nanos(pub(crate) i64);

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
pub(crate) struct Kind(pub(crate) u8);

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

#[cfg(test)]
mod tests;
