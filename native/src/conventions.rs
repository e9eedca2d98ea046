//! Other instrumentations' conventions in the analysis's own terms: the table of
//! `llmtrace/analysis/conventions.py`, handed over when the store is made (never a second copy),
//! applied to each span as it is read, as `normalize` there applies it.

use std::cell::RefCell;
use std::sync::Arc;

use crate::model::{attribute_index, key, stage_index, FastMap, Value};

/// Where an attribute the table reads is kept while a span is read: among the attributes the
/// analysis reads (`Kept`), or among those only the table reads (`Table`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Slot {
    Kept(u8),
    Table(u16),
}

struct Rule {
    /// None: structure (inherits its parent's stage)
    stage: Option<u8>,
    when: Vec<(Slot, Vec<Box<str>>)>,
}

enum Kind {
    Value,
    IsoTime,
    JsonField(Box<str>),
}

struct Alias {
    target: u8,
    source: Slot,
    kind: Kind,
}

struct Family {
    scopes: Vec<Box<str>>,
    keys: Vec<Slot>,
}

/// The table as Python hands it over (`conventions.native_table()`).
pub type Table = (
    Vec<(Option<String>, Vec<(String, Vec<String>)>)>,
    Vec<(String, String, String, String)>,
    Vec<String>,
    Vec<(String, Vec<String>, Vec<String>)>,
);

#[derive(Default)]
pub struct Conventions {
    table_keys: FastMap<Box<str>, u16>,
    rules: Vec<Rule>,
    aliases: Vec<Alias>,
    events: Vec<Box<str>>,
    families: Vec<Family>,
    pub family_names: Vec<Arc<str>>,
}

/// A span's family is an index into `family_names`; this one is none.
pub const NO_FAMILY: u8 = u8::MAX;

impl Conventions {
    pub fn new(table: Table) -> Result<Conventions, String> {
        let (rules, aliases, events, families) = table;
        let mut conventions = Conventions::default();
        for (stage, when) in rules {
            let stage = match stage {
                Some(name) => Some(stage_index(&name).ok_or(format!("unknown stage {name:?}"))?),
                None => None,
            };
            let when = when
                .into_iter()
                .map(|(name, values)| {
                    let slot = conventions.slot(&name);
                    (slot, values.into_iter().map(Box::from).collect())
                })
                .collect();
            conventions.rules.push(Rule { stage, when });
        }
        for (target, source, kind, field) in aliases {
            let target = attribute_index(&target)
                .ok_or(format!("{target:?} is not an attribute the analysis reads"))?;
            let kind = match kind.as_str() {
                "value" => Kind::Value,
                "iso_time" => Kind::IsoTime,
                "json_field" => Kind::JsonField(field.into()),
                other => return Err(format!("unknown alias kind {other:?}")),
            };
            let source = conventions.slot(&source);
            conventions.aliases.push(Alias {
                target,
                source,
                kind,
            });
        }
        conventions.events = events.into_iter().map(Box::from).collect();
        for (name, scopes, keys) in families {
            let keys = keys.iter().map(|k| conventions.slot(k)).collect();
            conventions.families.push(Family {
                scopes: scopes.into_iter().map(Box::from).collect(),
                keys,
            });
            conventions.family_names.push(Arc::from(name));
        }
        if conventions.families.len() >= usize::from(NO_FAMILY) {
            return Err("too many instrumentation families".into());
        }
        Ok(conventions)
    }

    fn slot(&mut self, name: &str) -> Slot {
        if let Some(index) = attribute_index(name) {
            return Slot::Kept(index);
        }
        let next = self.table_keys.len() as u16;
        Slot::Table(*self.table_keys.entry(Box::from(name)).or_insert(next))
    }

    /// The slot of an attribute only the table reads.
    pub fn table_key(&self, name: &str) -> Option<u16> {
        if self.table_keys.is_empty() {
            return None;
        }
        self.table_keys.get(name).copied()
    }

    pub fn is_first_token_event(&self, name: &str) -> bool {
        self.events.iter().any(|event| &**event == name)
    }

    /// The family whose scope names start like `scope`.
    pub fn scope_family(&self, scope: &str) -> Option<u8> {
        if scope.is_empty() {
            return None;
        }
        self.families
            .iter()
            .position(|f| f.scopes.iter().any(|prefix| scope.starts_with(&**prefix)))
            .map(|i| i as u8)
    }

    /// The first family one of whose keys the span carries.
    pub fn attribute_family(&self, span: &SpanAttributes) -> u8 {
        self.families
            .iter()
            .position(|f| f.keys.iter().any(|slot| span.has(*slot)))
            .map_or(NO_FAMILY, |i| i as u8)
    }

    fn rule(&self, span: &SpanAttributes) -> Option<&Rule> {
        self.rules.iter().find(|rule| {
            rule.when
                .iter()
                .all(|(slot, values)| match span.get(*slot) {
                    Some(Value::Str(text)) => values.iter().any(|v| **v == **text),
                    _ => false,
                })
        })
    }

    /// `normalize` in conventions.py: the aliases, the first-token event and the stage rule
    /// applied to a span without `llmtrace.stage`. Some(Some(stage)): a rule gave that stage;
    /// Some(None): it named structure; None: no rule matched (the span is unassigned).
    pub fn normalize(
        &self,
        span: &mut SpanAttributes,
        first_token_at: Option<i64>,
        start: i64,
    ) -> Option<Option<u8>> {
        for alias in &self.aliases {
            if span.kept.iter().any(|(k, _)| *k == alias.target) {
                continue;
            }
            let Some(value) = span.get_any(alias.source) else {
                continue;
            };
            let converted = match &alias.kind {
                Kind::Value => Some(value.clone()),
                Kind::IsoTime => match value {
                    Value::Str(text) => iso_nanos(text).map(|at| after(at, start)),
                    _ => None,
                },
                Kind::JsonField(field) => json_field(value, field),
            };
            if let Some(converted) = converted {
                span.kept.push((alias.target, converted));
            }
        }
        if let Some(at) = first_token_at {
            if !span
                .kept
                .iter()
                .any(|(k, _)| *k == key::TIME_TO_FIRST_CHUNK)
            {
                span.kept.push((key::TIME_TO_FIRST_CHUNK, after(at, start)));
            }
        }
        let rule = self.rule(span)?;
        let Some(stage) = rule.stage else {
            return Some(None); // structure: inherits its parent's stage
        };
        span.kept.push((
            key::STAGE,
            Value::Str(crate::model::intern(crate::model::STAGES[stage as usize])),
        ));
        Some(Some(stage))
    }
}

/// Seconds from `start` to `at`, as Python's `(at - start) / 1e9` computes them: the difference
/// made a float, then divided.
fn after(at: i64, start: i64) -> Value {
    Value::Float((i128::from(at) - i128::from(start)) as f64 / 1e9)
}

/// A span's attributes while it is read: those the analysis reads, and those only the table does.
pub struct SpanAttributes {
    pub kept: Vec<(u8, Value)>,
    pub table: Vec<(u16, Value)>,
}

impl SpanAttributes {
    fn has(&self, slot: Slot) -> bool {
        match slot {
            Slot::Kept(k) => self.kept.iter().any(|(key, _)| *key == k),
            Slot::Table(k) => self.table.iter().any(|(key, _)| *key == k),
        }
    }

    /// The last value written under the slot (a dict keeps the last), null included.
    fn get_any(&self, slot: Slot) -> Option<&Value> {
        let found = match slot {
            Slot::Kept(k) => self
                .kept
                .iter()
                .rev()
                .find(|(key, _)| *key == k)
                .map(|e| &e.1),
            Slot::Table(k) => self
                .table
                .iter()
                .rev()
                .find(|(key, _)| *key == k)
                .map(|e| &e.1),
        };
        match found {
            Some(Value::None) | None => None,
            value => value,
        }
    }

    fn get(&self, slot: Slot) -> Option<&Value> {
        self.get_any(slot)
    }
}

/// `iso_nanos` in conventions.py: unix nanoseconds of an ISO 8601 timestamp
/// (`YYYY-MM-DD[T ]HH:MM:SS[.fraction][Z|+HH:MM|-HH:MM]`, UTC without an offset), optionally
/// JSON-quoted. Digits past nanoseconds are ignored.
pub fn iso_nanos(text: &str) -> Option<i64> {
    let text = text.as_bytes();
    let text = if text.len() >= 2 && text[0] == b'"' && text[text.len() - 1] == b'"' {
        &text[1..text.len() - 1]
    } else {
        text
    };
    let digits = |from: usize, count: usize| -> Option<i64> {
        let part = text.get(from..from + count)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let punctuation = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if text.len() < 19
        || punctuation.iter().any(|(at, c)| text[*at] != *c)
        || !(text[10] == b'T' || text[10] == b' ')
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let mut at = 19;
    let mut nanos = 0i64;
    if text.get(at) == Some(&b'.') {
        let count = text[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if count == 0 {
            return None;
        }
        for i in 0..9 {
            let digit = if i < count {
                text[at + 1 + i] - b'0'
            } else {
                0
            };
            nanos = nanos * 10 + i64::from(digit);
        }
        at += 1 + count;
    }
    let mut offset = 0i64;
    match &text[at..] {
        [] => {}
        [b'Z'] => {}
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let hours = digits(at + 1, 2)?;
            let minutes = digits(at + 4, 2)?;
            offset = (hours * 3600 + minutes * 60) * if *sign == b'-' { -1 } else { 1 };
        }
        _ => return None,
    }
    if year < 1 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let seconds =
        days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset;
    Some(seconds * 1_000_000_000 + nanos)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `json_field` in conventions.py: one field of a JSON object written as a string, when it is a
/// number (an integer within 64 bits) or a boolean.
fn json_field(value: &Value, field: &str) -> Option<Value> {
    use sonic_rs::{JsonContainerTrait, JsonValueTrait};
    let Value::Str(text) = value else {
        return None;
    };
    let document: sonic_rs::Value = sonic_rs::from_str(text).ok()?;
    let found = document.as_object()?.get(&field)?;
    if let Some(flag) = found.as_bool() {
        return Some(Value::Bool(flag));
    }
    if found.is_i64() {
        return found.as_i64().map(Value::Int);
    }
    if found.is_u64() {
        return None; // beyond 64 signed bits
    }
    if found.is_f64() {
        return found.as_f64().map(Value::Float);
    }
    None
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Conventions>>> = const { RefCell::new(None) };
}

/// Run `read` with `conventions` as the table the parser on this thread applies.
pub fn with<T>(conventions: &Arc<Conventions>, read: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|current| current.replace(Some(conventions.clone())));
    let result = read();
    CURRENT.with(|current| *current.borrow_mut() = previous);
    result
}

/// `read` given the table the parser on this thread applies (none outside `with`).
pub fn with_current<T>(read: impl FnOnce(Option<&Conventions>) -> T) -> T {
    CURRENT.with(|current| read(current.borrow().as_deref()))
}

#[cfg(test)]
mod tests;
