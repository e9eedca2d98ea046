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
        #[allow(dead_code)]
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
    QUEUE_NAME = "llmtrace.queue.name",
    BENCH_RUN = "llmtrace.bench.run",
    BENCH_CONCURRENCY = "llmtrace.bench.concurrency",
    BENCH_QUESTION_SET_HASH = "llmtrace.bench.question_set_hash",
    BENCH_WARMUP = "llmtrace.bench.warmup",
    INPUT_MESSAGES = "gen_ai.input.messages",
    RETRIEVAL_QUERY_TEXT = "gen_ai.retrieval.query.text",
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
    if !(name.starts_with("gen_ai.") || name.starts_with("llmtrace.")) {
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
pub const STAGES: [&str; 13] = [
    "queue",
    "load",
    "prompt",
    "embedding",
    "retrieval",
    "rerank",
    "cache",
    "ttft",
    "generation",
    "tool",
    "network",
    "postprocess",
    "other",
];
pub const QUEUE: u8 = 0;
pub const TTFT: u8 = 7;
pub const GENERATION: u8 = 8;
pub const NETWORK: u8 = 10;
pub const OTHER: u8 = 12;

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
            Value::Str(s) if quoted => {
                let _ = write!(out, "'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
            }
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
                    let _ = write!(out, "'{k}': ");
                    item.write_py(out, true);
                }
                out.push('}');
            }
        }
    }
}

fn py_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if v == v.trunc() && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v:?}")
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
                None => Id::Text(raw.to_ascii_lowercase().into()),
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
            None => Id::Text(raw.to_ascii_lowercase().into()),
        }
    }

    pub fn format(&self, hex_length: usize) -> String {
        match self {
            Id::Num(value) => format!("{value:0width$x}", width = hex_length),
            Id::Text(text) => text.to_string(),
        }
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
}

pub const KIND_SERVER: u8 = 2;
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

    pub fn has(&self, key: u8) -> bool {
        self.attrs.iter().any(|(k, _)| *k == key)
    }

    pub fn seconds(&self, key: u8) -> Option<f64> {
        self.get(key).and_then(Value::number)
    }

    pub fn duration(&self) -> f64 {
        (self.end - self.start) as f64 / NANOS
    }
}
