//! Spans as compact records: ids as integers, only the attributes the analysis reads.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

/// FxHash: ids are random already, and keys are short; SipHash's protection is not needed here.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(SEED);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_isize(&mut self, v: isize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Strings that repeat (span names, stages, models, operation names) share one allocation.
pub fn intern(text: &str) -> Arc<str> {
    const MAX_LENGTH: usize = 64;
    const MAX_ENTRIES: usize = 4096;
    thread_local! {
        static TABLE: RefCell<FastMap<Box<str>, Arc<str>>> = RefCell::new(FastMap::default());
    }
    if text.len() > MAX_LENGTH {
        return Arc::from(text);
    }
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if let Some(shared) = table.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        if table.len() < MAX_ENTRIES {
            table.insert(Box::from(text), shared.clone());
        }
        shared
    })
}

macro_rules! keys {
    ($($name:ident = $text:literal,)*) => {
        /// Attribute keys the analysis reads, by index into `KEYS` (`KEPT_ATTRIBUTES` and
        /// `HASHED_ATTRIBUTES` in otlp.py).
        #[allow(dead_code, reason = "one constant per key of KEYS, though some are only looked up by text")]
        pub mod key {
            keys!(@index 0u8, $($name,)*);
        }
        pub const KEYS: &[&str] = &[$($text,)*];
    };
    (@index $n:expr, $first:ident, $($rest:ident,)*) => {
        pub const $first: u8 = $n;
        keys!(@index $n + 1u8, $($rest,)*);
    };
    (@index $n:expr,) => {};
}

keys! {
    OPERATION_NAME = "gen_ai.operation.name",
    REQUEST_MODEL = "gen_ai.request.model",
    RESPONSE_MODEL = "gen_ai.response.model",
    REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens",
    REQUEST_STREAM = "gen_ai.request.stream",
    FINISH_REASONS = "gen_ai.response.finish_reasons",
    TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk",
    INPUT_TOKENS = "gen_ai.usage.input_tokens",
    OUTPUT_TOKENS = "gen_ai.usage.output_tokens",
    CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens",
    RETRIEVAL_TOP_K = "gen_ai.retrieval.top_k",
    TOOL_NAME = "gen_ai.tool.name",
    LATENCY_TIME_IN_QUEUE = "gen_ai.latency.time_in_queue",
    LATENCY_TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token",
    LATENCY_TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill",
    LATENCY_TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode",
    LATENCY_E2E = "gen_ai.latency.e2e",
    STAGE = "llmtrace.stage",
    TIME_TO_FIRST_TOKEN = "llmtrace.time_to_first_token",
    GENERATION_TIME = "llmtrace.generation_time",
    OUTPUT_TOKENS_PER_SECOND = "llmtrace.output_tokens_per_second",
    RETRIEVAL_RETURNED = "llmtrace.retrieval.returned",
    RERANK_INPUT_COUNT = "llmtrace.rerank.input_count",
    EMBEDDING_INPUT_COUNT = "llmtrace.embedding.input_count",
    PROMPT_CHARS = "llmtrace.prompt.chars",
    HTTP_CONNECT = "llmtrace.http.connect",
    HTTP_TLS = "llmtrace.http.tls",
    HTTP_REQUEST_SENT = "llmtrace.http.request_sent",
    SERVER_QUEUE_TIME = "llmtrace.server.queue_time",
    SERVER_PROMPT_TIME = "llmtrace.server.prompt_time",
    SERVER_GENERATION_TIME = "llmtrace.server.generation_time",
    SERVER_PROCESSING_TIME = "llmtrace.server.processing_time",
    SERVER_TIME_TO_FIRST_TOKEN = "llmtrace.server.time_to_first_token",
    SERVER_INFERENCE_TIME = "llmtrace.server.inference_time",
    SERVER_PROXY_QUEUE_TIME = "llmtrace.server.proxy_queue_time",
    SERVER_LOAD_TIME = "llmtrace.server.load_time",
    QUEUE_NAME = "llmtrace.queue.name",
    BENCH_RUN = "llmtrace.bench.run",
    BENCH_CONCURRENCY = "llmtrace.bench.concurrency",
    BENCH_QUESTION_SET_HASH = "llmtrace.bench.question_set_hash",
    BENCH_WARMUP = "llmtrace.bench.warmup",
    CLIENT_TIME_TO_FIRST_BYTE = "llmtrace.client.time_to_first_byte",
    CLIENT_TIME_TO_FIRST_EVENT = "llmtrace.client.time_to_first_event",
    INPUT_MESSAGES = "gen_ai.input.messages",
    RETRIEVAL_QUERY_TEXT = "gen_ai.retrieval.query.text",
    SESSION_ID = "session.id",
    USER_ID = "user.id",
    CONVERSATION_ID = "gen_ai.conversation.id",
    RETRY_TIME = "llmtrace.retry.time",
    RETRY_ERROR_TYPES = "llmtrace.retry.error_types",
    ERROR_TYPE = "error.type",
}

fn key_table() -> &'static FastMap<&'static str, u8> {
    static TABLE: OnceLock<FastMap<&'static str, u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        KEYS.iter()
            .enumerate()
            .map(|(i, k)| (*k, i as u8))
            .collect()
    })
}

fn lookup(name: &str) -> Option<u8> {
    // Every key read starts with one of these; HTTP, URL and application keys stop here.
    if !(name.starts_with("gen_ai.")
        || name.starts_with("llmtrace.")
        || name.starts_with("session.")
        || name.starts_with("user.")
        || name.starts_with("error."))
    {
        return None;
    }
    key_table().get(name).copied()
}

/// Index of a kept attribute (decoded and stored).
pub fn attribute_index(name: &str) -> Option<u8> {
    lookup(name).filter(|&i| i != key::INPUT_MESSAGES && i != key::RETRIEVAL_QUERY_TEXT)
}

/// Index of a content attribute (stored as a hash of its value).
pub fn hashed_index(name: &str) -> Option<u8> {
    lookup(name).filter(|&i| i == key::INPUT_MESSAGES || i == key::RETRIEVAL_QUERY_TEXT)
}

/// The stage vocabulary (`llmtrace.semconv.STAGES`), in its order; a test compares the two.
pub const STAGES: [&str; 14] = [
    "queue",
    "load",
    "prompt",
    "embedding",
    "retrieval",
    "rerank",
    "cache",
    "retry",
    "ttft",
    "generation",
    "tool",
    "network",
    "postprocess",
    "other",
];
pub const QUEUE: u8 = 0;
pub const LOAD: u8 = 1;
pub const RETRY: u8 = 7;
pub const TTFT: u8 = 8;
pub const GENERATION: u8 = 9;
pub const NETWORK: u8 = 11;
pub const OTHER: u8 = 13;

/// A model call's own `llmtrace.stage` tags (`llmtrace.semconv.MODEL_CALL_STAGES`): `model`, and
/// `ttft` as earlier releases wrote it. Either is split at the call's first token; a test
/// compares the two.
pub const MODEL_CALL_STAGES: [&str; 2] = ["model", "ttft"];

pub fn is_model_call_stage(name: &str) -> bool {
    MODEL_CALL_STAGES.contains(&name)
}

pub fn stage_index(name: &str) -> Option<u8> {
    STAGES.iter().position(|s| *s == name).map(|i| i as u8)
}

/// A decoded attribute value (an OTLP `AnyValue`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Str(Arc<str>),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Box<[Value]>),
    Map(Box<[(Arc<str>, Value)]>),
}

impl Value {
    /// `_seconds` / `_number`: floats and ints (not bools) as float.
    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// `_count`: ints as they are, floats truncated.
    pub fn count(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Float(v) if v.is_finite() => Some(v.trunc() as i64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Value::None => false,
            Value::Str(s) => !s.is_empty(),
            Value::Int(v) => *v != 0,
            Value::Float(v) => *v != 0.0,
            Value::Bool(b) => *b,
            Value::List(items) => !items.is_empty(),
            Value::Map(items) => !items.is_empty(),
        }
    }

    /// Python's `str()` of the value.
    pub fn py_str(&self) -> String {
        let mut out = String::new();
        self.write_py(&mut out, false);
        out
    }

    fn write_py(&self, out: &mut String, quoted: bool) {
        match self {
            Value::None => out.push_str("None"),
            Value::Str(s) if quoted => write_py_repr(out, s),
            Value::Str(s) => out.push_str(s),
            Value::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Float(v) => out.push_str(&py_float(*v)),
            Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Value::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_py(out, true);
                }
                out.push(']');
            }
            Value::Map(items) => {
                out.push('{');
                for (i, (k, item)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_py_repr(out, k);
                    out.push_str(": ");
                    item.write_py(out, true);
                }
                out.push('}');
            }
        }
    }
}

/// Python's `repr()` of a string: single quotes unless the text has one and no double quote,
/// control and other unprintable characters escaped.
fn write_py_repr(out: &mut String, text: &str) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if unprintable(c) => {
                let code = u32::from(c);
                let _ = match code {
                    0..=0xff => write!(out, "\\x{code:02x}"),
                    0x100..=0xffff => write!(out, "\\u{code:04x}"),
                    _ => write!(out, "\\U{code:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// What Python's `str.isprintable()` says no to: control characters, and of the rest the
/// separators, format characters and private-use characters in common use (Python consults the
/// full Unicode database, which Rust's standard library does not carry).
fn unprintable(c: char) -> bool {
    matches!(
        u32::from(c),
        0..=0x1f
            | 0x7f..=0xa0
            | 0xad
            | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x1680
            | 0x180e
            | 0x2000..=0x200f
            | 0x2028..=0x202f
            | 0x205f..=0x2064
            | 0x2066..=0x206f
            | 0x3000
            | 0xe000..=0xf8ff
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0xf0000..
    )
}

/// Python's `repr()` of a float: the shortest text that reads back the same, positional between
/// 1e-4 and 1e16, otherwise with a signed two-digit (at least) exponent.
fn py_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's shortest round-trip digits, as d.ddde±x
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // When the float lies exactly halfway between two shortest candidates, Rust writes the upper
    // one and Python the even one: tell by the exact expansion, which ends there with a 5.
    let last = digits.as_bytes()[digits.len() - 1];
    if last % 2 == 1 {
        let exact = format!("{:.*e}", digits.len() + 60, v.abs());
        let exact: String = exact
            .split_once('e')
            .map_or("", |(m, _)| m)
            .chars()
            .filter(|c| *c != '.')
            .collect();
        let mut lower = digits[..digits.len() - 1].to_string();
        lower.push(char::from(last - 1));
        let tail = &exact[digits.len()..];
        if exact.starts_with(&lower)
            && tail.starts_with('5')
            && tail[1..].bytes().all(|b| b == b'0')
        {
            digits = lower;
        }
    }
    let point = exponent + 1; // digits before the decimal point
    if !(-4 < point && point <= 16) {
        let rest = &digits[1..];
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{}{fraction}e{exponent_sign}{:02}",
            &digits[..1],
            exponent.abs()
        );
    }
    if point <= 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-point) as usize));
    }
    let point = point as usize;
    if point >= digits.len() {
        format!("{sign}{digits}{}.0", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

/// A trace or span id: hex ids as an integer, anything else kept as (lower-case) text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(u128),
    Text(Box<str>),
}

impl Id {
    pub fn trace(raw: &str) -> Id {
        Id::parse(raw, 32)
    }

    pub fn span(raw: &str) -> Id {
        Id::parse(raw, 16)
    }

    /// `normalize_id`: hex as it is, base64 (protobuf JSON mapping) decoded to hex.
    fn parse(raw: &str, hex_length: usize) -> Id {
        if raw.len() == hex_length {
            return match hex_value(raw.as_bytes()) {
                Some(value) => Id::Num(value),
                None => Id::Text(lower(raw)),
            };
        }
        match base64_decode(raw) {
            Some(bytes) if bytes.len() * 2 == hex_length => Id::Num(
                bytes
                    .iter()
                    .fold(0u128, |acc, b| (acc << 8) | u128::from(*b)),
            ),
            Some(bytes) => Id::Text(
                bytes
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
                    .into(),
            ),
            None => Id::Text(lower(raw)),
        }
    }

    pub fn format(&self, hex_length: usize) -> String {
        match self {
            Id::Num(value) => format!("{value:0width$x}", width = hex_length),
            Id::Text(text) => text.to_string(),
        }
    }
}

/// Python's `str.lower()`.
fn lower(raw: &str) -> Box<str> {
    if raw.is_ascii() {
        raw.to_ascii_lowercase().into()
    } else {
        raw.to_lowercase().into()
    }
}

const fn hex_table() -> [u8; 256] {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
}

static HEX: [u8; 256] = hex_table();

fn hex_u64(digits: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    let mut invalid = 0u8;
    for &b in digits {
        let digit = HEX[b as usize];
        invalid |= digit;
        value = (value << 4) | u64::from(digit & 0x0f);
    }
    (invalid & 0xf0 == 0).then_some(value)
}

fn hex_value(digits: &[u8]) -> Option<u128> {
    if digits.len() <= 16 {
        return hex_u64(digits).map(u128::from);
    }
    let (high, low) = digits.split_at(digits.len() - 16);
    Some((u128::from(hex_u64(high)?) << 64) | u128::from(hex_u64(low)?))
}

/// Strict standard base64 (`base64.b64decode(raw, validate=True)`).
fn base64_decode(raw: &str) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    if padding > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let mut buffer = 0u32;
    let mut bits = 0;
    for &b in &bytes[..bytes.len() - padding] {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// One span as the analysis needs it. Times are unix nanoseconds on the emitting host's clock.
pub struct SpanRec {
    pub span_id: Id,
    pub parent: Option<Id>,
    pub name: Arc<str>,
    pub kind: u8,
    pub start: i64,
    pub end: i64,
    pub attrs: Box<[(u8, Value)]>,
    pub service: Option<Arc<str>>,
    /// the instrumentation family that wrote it (`conventions::NO_FAMILY`: none recognised)
    pub family: u8,
    /// no llmtrace.stage and no conventions rule matched it
    pub unassigned: bool,
    /// the conventions table made it a model call (it may yield to one below it)
    pub inferred_call: bool,
}

pub const KIND_SERVER: u8 = 2;
pub const KIND_CLIENT: u8 = 3;
pub const KIND_PRODUCER: u8 = 4;
pub const KIND_CONSUMER: u8 = 5;
pub const NANOS: f64 = 1e9;

impl SpanRec {
    /// The attribute's value, None for a missing key or a null value (`dict.get`); a key
    /// written twice keeps its last value, as a dict would.
    pub fn get(&self, key: u8) -> Option<&Value> {
        match self.attrs.iter().rev().find(|(k, _)| *k == key) {
            Some((_, Value::None)) | None => None,
            Some((_, value)) => Some(value),
        }
    }

    /// The attribute's value when it is a string (what `--filter` and `--group-by` compare).
    pub fn text(&self, key: u8) -> Option<&str> {
        match self.get(key) {
            Some(Value::Str(text)) => Some(text),
            _ => None,
        }
    }

    pub fn has(&self, key: u8) -> bool {
        self.attrs.iter().any(|(k, _)| *k == key)
    }

    pub fn seconds(&self, key: u8) -> Option<f64> {
        self.get(key).and_then(Value::number)
    }

    pub fn duration(&self) -> f64 {
        seconds_between(self.start, self.end)
    }
}

/// Seconds from `start` to `end` (unix nanoseconds), rounded once, as Python's
/// `(end - start) / 10**9` is: converting a difference of more than 2^53 ns (104 days, a span of
/// a hostile file) to a float first and dividing after would round twice.
pub fn seconds_between(start: i64, end: i64) -> f64 {
    let nanos = i128::from(end) - i128::from(start);
    if nanos.unsigned_abs() <= 1 << 53 {
        return nanos as f64 / NANOS; // the difference is exact as a float: one rounding
    }
    const BILLION: u128 = 1_000_000_000;
    // 2^32 more bits than the quotient needs to be exact to 53 bits, and whether the division
    // left anything: enough to round to nearest, ties to even
    const SCALE: i32 = 32;
    let dividend = nanos.unsigned_abs() << SCALE;
    let quotient = dividend / BILLION;
    let inexact = !dividend.is_multiple_of(BILLION);
    let bits = 128 - quotient.leading_zeros() as i32;
    let dropped = bits - 53;
    let mut mantissa = quotient >> dropped;
    let rest = quotient & ((1u128 << dropped) - 1);
    let half = 1u128 << (dropped - 1);
    if rest > half || (rest == half && (inexact || mantissa & 1 == 1)) {
        mantissa += 1;
    }
    let magnitude = mantissa as f64 * 2f64.powi(dropped - SCALE);
    if nanos < 0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests;
